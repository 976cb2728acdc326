"""The skirmish setups: five fixed presets and the random one.

Fixed presets (docs/design RULES.md, "Skirmish Chess"; White on ranks 1-2, Black mirrored on ranks 4-5):

- ``classic``: Gardner minichess, ``rnbqk/ppppp/5/PPPPP/RNBQK``;
- ``fortress``: rooks in the corners, king in the middle, pawns in front, ``rbkbr/ppppp/5/PPPPP/RBKBR``;
- ``spearhead``: queen and knights forward, king inside the pawn line, ``1nqn1/ppkpp/5/PPKPP/1NQN1``;
- ``wings``: rooks and bishops on the flanks, ``rb1br/1pkp1/5/1PKP1/RB1BR``;
- ``center_clash``: queens face off in the centre behind two pawns, ``n1k1n/1pqp1/5/1PQP1/N1K1N``.

``random`` is made from a shuffle of 20 values drawn from the fairness stream (:func:`random_position`):
each side independently gets K, Q, R, B, N and 3 pawns on its 10 home squares, pawns never on the back
rank. The rule that a random setup is drawn again when White could capture Black's king on move one
(:func:`white_can_take_king`) belongs to whoever draws the shuffle: this module only maps a shuffle to a
setup, always to a valid one.
"""

from __future__ import annotations

from collections.abc import Sequence

from libs.engines.skirmish.board import EMPTY, SIZE, SQUARES, Position
from libs.engines.skirmish.moves import can_capture_king

PRESETS: dict[str, str] = {
    "classic": "rnbqk/ppppp/5/PPPPP/RNBQK",
    "fortress": "rbkbr/ppppp/5/PPPPP/RBKBR",
    "spearhead": "1nqn1/ppkpp/5/PPKPP/1NQN1",
    "wings": "rb1br/1pkp1/5/1PKP1/RB1BR",
    "center_clash": "n1k1n/1pqp1/5/1PQP1/N1K1N",
}
"""The fixed presets' boards (rank 5 first; White moves first in every skirmish)."""

RANDOM = "random"
PRESET_NAMES: tuple[str, ...] = ("classic", "fortress", "spearhead", "wings", "center_clash", RANDOM)
"""Every setup a table may choose, the fixed ones in the order of the rules, then ``random``."""

RANDOM_SHUFFLE_SIZE = 20
"""The number of values of the shuffle a random setup is made from (:func:`random_position`)."""

HOME_SIZE = 10
PAWNS = 3
PIECES = "KQRBN"
"""The pieces a random setup places after the pawns, in this order."""

WHITE_HOME: tuple[int, ...] = tuple(range(0, 10))
"""White's home squares by home index: ``a1 b1 c1 d1 e1 a2 b2 c2 d2 e2``."""
BLACK_HOME: tuple[int, ...] = tuple((SIZE - 1 - h // SIZE) * SIZE + h % SIZE for h in range(HOME_SIZE))
"""Black's home squares by home index, White's mirrored: ``a5 b5 c5 d5 e5 a4 b4 c4 d4 e4``."""


def preset_position(name: str) -> Position:
    """The start of a fixed preset (White to move).

    :raises ValueError: ``random`` (it needs a shuffle: :func:`random_position`) or an unknown name.
    """
    fen = PRESETS.get(name)
    if fen is None:
        if name == RANDOM:
            raise ValueError("the random skirmish setup is made from a shuffle: use random_position")
        raise ValueError(f"{name!r} is not a skirmish setup: choose one of {', '.join(PRESET_NAMES)}")
    return Position.from_fen(fen)


def _place(order: Sequence[int], home: tuple[int, ...], white: bool, cells: list[str]) -> None:
    squares = [home[h] for h in order]
    pawn_squares = [sq for h, sq in zip(order, squares, strict=True) if h >= SIZE][:PAWNS]
    rest = [sq for sq in squares if sq not in pawn_squares]
    for sq in pawn_squares:
        cells[sq] = "P" if white else "p"
    for sq, piece in zip(rest, PIECES, strict=False):
        cells[sq] = piece if white else piece.lower()


def random_position(permutation: Sequence[int]) -> Position:
    """The random setup a shuffle of ``range(20)`` gives (White to move). Always a valid setup.

    The values 0-9, in the order they appear in ``permutation``, order White's home squares; the
    values 10-19 (minus 10), in the order they appear, order Black's. A value ``h`` names a square by
    home index: for White ``a1 b1 c1 d1 e1 a2 b2 c2 d2 e2`` (``h`` = 0 ... 9), for Black the mirror
    ``a5 b5 c5 d5 e5 a4 b4 c4 d4 e4``. In each side's order:

    1. the first three squares of its pawn rank (rank 2 for White, rank 4 for Black) get a pawn each;
    2. the other seven squares keep their order, and the first five of them get K, Q, R, B, N in that
       order; the last two stay empty.

    So pawns are never on a back rank, each side has exactly K, Q, R, B, N and 3 pawns, and a uniform
    shuffle makes every such setup of a side equally likely, the two sides independent.

    :raises ValueError: ``permutation`` is not a shuffle of ``range(20)``.
    """
    values = list(permutation)
    if any(not isinstance(v, int) or isinstance(v, bool) for v in values) or sorted(values) != list(
        range(RANDOM_SHUFFLE_SIZE)
    ):
        raise ValueError(
            f"a random skirmish setup needs a shuffle of range({RANDOM_SHUFFLE_SIZE}), not {values!r}"
        )
    cells = [EMPTY] * SQUARES
    _place([v for v in values if v < HOME_SIZE], WHITE_HOME, True, cells)
    _place([v - HOME_SIZE for v in values if v >= HOME_SIZE], BLACK_HOME, False, cells)
    return Position("".join(cells), True)


def white_can_take_king(position: Position) -> bool:
    """Whether White, moving in ``position`` (whoever is to move there), has a move capturing Black's
    king: the test that makes a random setup be drawn again."""
    return can_capture_king(position, True)
