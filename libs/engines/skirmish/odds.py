"""Odds by capture pair: the weaker piece's side starts the skirmish with pawns removed.

Values P=1, N=3, B=3, R=5, Q=9, K=4; ``gap = value(attacker) - value(defender)``. The weaker side of the
pair (the defender, skirmish Black, when ``gap > 0``; the attacker, skirmish White, when ``gap < 0``)
loses ``min(3, |gap| // 2)`` of its pawns, as many as it has. Queen takes pawn: Black loses 3; knight
takes bishop: no odds; pawn takes queen: White loses 3.

Which pawns: files in :data:`PAWN_REMOVAL_ORDER` (centre first: c, d, b, e, a); on a file with two
pawns of the side, the one nearer that side's own back rank first.
"""

from __future__ import annotations

from libs.engines.skirmish.board import EMPTY, FILES, SIZE, Position

VALUES: dict[str, int] = {"P": 1, "N": 3, "B": 3, "R": 5, "Q": 9, "K": 4}
"""The value of each kind of piece, for odds."""

MAX_ODDS = 3
"""The most pawns odds ever remove."""

PAWN_REMOVAL_ORDER: tuple[str, ...] = ("c", "d", "b", "e", "a")
"""The files odds take pawns from, first to last: the centre first, then outwards, queen side first."""


def _value(letter: str, role: str) -> int:
    value = VALUES.get(letter.upper()) if isinstance(letter, str) else None
    if value is None:
        raise ValueError(f"the {role} must be a piece letter (P, N, B, R, Q or K), not {letter!r}")
    return value


def odds_pawns(attacker: str, defender: str) -> tuple[int, int]:
    """The pawns odds remove for the capture pair: ``(from skirmish White = the attacker's side,
    from skirmish Black = the defender's side)``, before capping by the pawns a side has.

    ``attacker`` and ``defender`` are main-board piece letters, any case.

    :raises ValueError: not a piece letter.
    """
    gap = _value(attacker, "attacker") - _value(defender, "defender")
    removed = min(MAX_ODDS, abs(gap) // 2)
    if gap > 0:
        return (0, removed)
    if gap < 0:
        return (removed, 0)
    return (0, 0)


def _removal_order(board: str, white: bool) -> list[int]:
    pawn = "P" if white else "p"
    squares = [sq for sq, c in enumerate(board) if c == pawn]
    # Nearer the own back rank first: lower ranks for White, higher ranks for Black.
    return sorted(
        squares,
        key=lambda sq: (
            PAWN_REMOVAL_ORDER.index(FILES[sq % SIZE]),
            sq // SIZE if white else -(sq // SIZE),
        ),
    )


def apply_odds(position: Position, attacker: str, defender: str) -> tuple[Position, tuple[int, ...]]:
    """``position`` with the odds of the capture pair applied, and the squares whose pawns were removed
    (sorted). A side with fewer pawns than the odds loses all it has.

    :raises ValueError: ``attacker`` or ``defender`` is not a piece letter.
    """
    white_loses, black_loses = odds_pawns(attacker, defender)
    removed = (
        _removal_order(position.board, True)[:white_loses]
        + _removal_order(position.board, False)[:black_loses]
    )
    if not removed:
        return position, ()
    cells = list(position.board)
    for sq in removed:
        cells[sq] = EMPTY
    return Position("".join(cells), position.white_to_move), tuple(sorted(removed))
