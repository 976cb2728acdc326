"""Squares of the 9x8 board, the home rows, and reading and checking a setup.

Squares are numbered 0 to 71: ``index = (rank - 1) * 9 + file``, file ``a`` = 0; ``a1`` is 0, ``i1`` is 8,
``a8`` is 63. Seat 0 (White) sets up on ranks 1-3, seat 1 (Black) on ranks 6-8.

A setup is written as *placements*, space-separated ``square=RANK`` (``a1=FLG b1=PVT c2=SPY``), square and
rank in any case. :func:`parse_placements` reads them (a syntax error, an unknown square or rank is
:class:`~libs.engines.base.MalformedActionError`); :func:`check_setup` lists what makes them no legal setup
for a seat (a square outside its home rows, a square twice, too many pieces of a rank, and, when asked,
missing pieces).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeAlias

from libs.engines.base import MalformedActionError
from libs.engines.generals.pieces import BY_CODE, CODES, COUNTS, PIECES_PER_SIDE, RANK_ORDER, rank_id

FILES = "abcdefghi"
RANKS = 8
WIDTH = 9
SQUARES = WIDTH * RANKS
SEATS = (0, 1)
SEAT_NAMES = ("White", "Black")
SEAT_LETTERS = ("W", "B")

NAMES: tuple[str, ...] = tuple(f"{FILES[i % WIDTH]}{i // WIDTH + 1}" for i in range(SQUARES))
"""The name of every square, by index."""
BY_NAME: dict[str, int] = {name: i for i, name in enumerate(NAMES)}

NEIGHBORS: tuple[tuple[int, ...], ...] = tuple(
    tuple(
        j
        for j, ok in (
            (i - WIDTH, i >= WIDTH),
            (i - 1, i % WIDTH > 0),
            (i + 1, i % WIDTH < WIDTH - 1),
            (i + WIDTH, i < SQUARES - WIDTH),
        )
        if ok
    )
    for i in range(SQUARES)
)
"""The orthogonal neighbours of every square, in index order."""

HOME: tuple[tuple[int, ...], tuple[int, ...]] = (tuple(range(0, 27)), tuple(range(45, 72)))
"""Each seat's 27 home squares in index order: ``a1 b1 ... i1 a2 ... i3`` for White, ``a6 ... i8`` for
Black. This is also the order of the squares a setup-completion shuffle permutes."""
HOME_SETS = (frozenset(HOME[0]), frozenset(HOME[1]))
HOME_ROWS = ("1-3", "6-8")
FAR_RANK = (tuple(range(63, 72)), tuple(range(0, 9)))
"""The far rank of each seat (where its Flag wins): rank 8 for White, rank 1 for Black."""
FAR_SETS = (frozenset(FAR_RANK[0]), frozenset(FAR_RANK[1]))

Placements: TypeAlias = tuple[tuple[int, int], ...]
"""Placements as read: ``(square index, rank id)`` pairs in the order written (repeats kept)."""


def square_name(index: int) -> str:
    """The name of square ``index`` (``0`` -> ``a1``)."""
    return NAMES[index]


def parse_square(text: str) -> int:
    """The index of a square name (``e4``, any case).

    :raises MalformedActionError: not a square of the 9x8 board.
    """
    found = BY_NAME.get(text.strip().lower()) if isinstance(text, str) else None
    if found is None:
        raise MalformedActionError(f"{text!r} is not a square: files a-i, ranks 1-8 (like e4)")
    return found


def parse_placements(text: str | Mapping[str, str] | Iterable[tuple[str, str]]) -> Placements:
    """Placements read from text (``a1=FLG b1=PVT``), a mapping ``{"a1": "FLG"}`` or ``(square, rank)``
    pairs; squares and ranks in any case. Repeated squares are kept (for :func:`check_setup` to refuse).

    :raises MalformedActionError: a token is not ``square=RANK``, or names an unknown square or rank.
    """
    pairs: list[tuple[str, str]] = []
    if isinstance(text, str):
        for token in text.split():
            square, sep, rank = token.partition("=")
            if not sep or not square or not rank:
                raise MalformedActionError(
                    f"{token!r} is not a placement: write square=RANK, like a1=FLG or c2=5*"
                )
            pairs.append((square, rank))
    elif isinstance(text, Mapping):
        pairs = [(str(k), str(v)) for k, v in text.items()]
    else:
        pairs = [(str(k), str(v)) for k, v in text]
    placements: list[tuple[int, int]] = []
    for square, rank in pairs:
        index = BY_NAME.get(square.strip().lower())
        if index is None:
            raise MalformedActionError(f"{square!r} is not a square: files a-i, ranks 1-8 (like e4)")
        found = BY_CODE.get(rank.strip().upper())
        if found is None:
            raise MalformedActionError(f"{rank!r} is not a rank: the ranks are {', '.join(CODES.values())}")
        placements.append((index, found))
    return tuple(placements)


def placements_text(placements: Iterable[tuple[int, int]]) -> str:
    """Placements as text, in square order (``a1=FLG b1=PVT ...``)."""
    return " ".join(f"{NAMES[s]}={CODES[r]}" for s, r in sorted(placements))


def check_setup(
    seat: int,
    placements: str | Mapping[str, str] | Iterable[tuple[int, int]] | Iterable[tuple[str, str]],
    complete: bool = False,
) -> list[str]:
    """What makes ``placements`` no legal (partial) setup for ``seat``, in words; empty when legal.

    Refused: a square outside the seat's three home rows, a square used twice, more pieces of a rank
    than a side has; with ``complete``, also fewer than the 21 pieces. Unreadable text gives one reason
    (the reading error's).
    """
    if seat not in SEATS or isinstance(seat, bool):
        raise ValueError(f"Game of the Generals has seats 0 (White) and 1 (Black), not {seat!r}")
    try:
        pairs = _as_pairs(placements)
    except MalformedActionError as error:
        return [str(error)]
    reasons: list[str] = []
    home = HOME_SETS[seat]
    outside = sorted({s for s, _ in pairs if s not in home})
    if outside:
        reasons.append(
            f"{', '.join(NAMES[s] for s in outside)} {'is' if len(outside) == 1 else 'are'} outside "
            f"{SEAT_NAMES[seat]}'s home rows (ranks {HOME_ROWS[seat]})"
        )
    seen: set[int] = set()
    twice: list[int] = []
    for s, _ in pairs:
        if s in seen and s not in twice:
            twice.append(s)
        seen.add(s)
    if twice:
        reasons.append(f"{', '.join(NAMES[s] for s in sorted(twice))} used more than once")
    counts: dict[int, int] = {}
    for _, r in pairs:
        counts[r] = counts.get(r, 0) + 1
    for r in RANK_ORDER:
        if counts.get(r, 0) > COUNTS[r]:
            reasons.append(f"{counts[r]} {CODES[r]} placed, but a side has only {COUNTS[r]}")
    if complete and not reasons and len(pairs) < PIECES_PER_SIDE:
        reasons.append(f"only {len(pairs)} of the 21 pieces are placed (missing: {missing_text(pairs)})")
    return reasons


def missing(pairs: Iterable[tuple[int, int]]) -> list[int]:
    """The rank ids a setup still lacks, in rank order (one entry per missing piece)."""
    counts: dict[int, int] = {}
    for _, r in pairs:
        counts[r] = counts.get(r, 0) + 1
    return [r for r in RANK_ORDER for _ in range(COUNTS[r] - counts.get(r, 0))]


def missing_text(pairs: Iterable[tuple[int, int]]) -> str:
    counts: dict[int, int] = {}
    for r in missing(pairs):
        counts[r] = counts.get(r, 0) + 1
    return ", ".join(f"{n} {CODES[r]}" if n > 1 else CODES[r] for r, n in counts.items())


def _as_pairs(
    placements: str | Mapping[str, str] | Iterable[tuple[int, int]] | Iterable[tuple[str, str]],
) -> Placements:
    if isinstance(placements, str | Mapping):
        return parse_placements(placements)
    items: list[tuple[object, object]] = list(placements)
    pairs: list[tuple[int, int]] = []
    for s, r in items:
        if not (isinstance(s, int) and isinstance(r, int)):
            return parse_placements([(str(s), str(r)) for s, r in items])
        if not 0 <= s < SQUARES:
            raise MalformedActionError(f"{s!r} is not a square index (0 to 71)")
        try:
            pairs.append((s, rank_id(r)))
        except ValueError as error:
            raise MalformedActionError(str(error)) from None
    return tuple(pairs)
