"""The backgammon board: seats, the two numberings of the points, positions, pip counts, game values.

Absolute points are numbered 1..24. White (seat 0) moves 1 -> 24, home 19-24, bears off past 24; Black
(seat 1) moves 24 -> 1, home 1-6, bears off past 1. Each player also has an *own* numbering, the one
people and gnubg use: the point a checker must still travel to get off, 1..24, with 25 for the bar and 0
for off. Black's own numbering is the absolute one; White's is ``25 - absolute``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

WHITE = 0
BLACK = 1
SEATS = (WHITE, BLACK)
BAR = 25
"""The bar in own numbering."""
OFF = 0
"""Off the board in own numbering."""


class Variant(StrEnum):
    STANDARD = "standard"
    NACKGAMMON = "nackgammon"
    HYPERGAMMON = "hypergammon"

    @property
    def checkers(self) -> int:
        """Checkers per side: 15, or 3 in hypergammon."""
        return 3 if self is Variant.HYPERGAMMON else 15


_STARTS: dict[Variant, dict[int, int]] = {
    # own point -> checkers, the same for both sides
    Variant.STANDARD: {24: 2, 13: 5, 8: 3, 6: 5},
    Variant.NACKGAMMON: {24: 2, 23: 2, 13: 4, 8: 3, 6: 4},
    Variant.HYPERGAMMON: {24: 1, 23: 1, 22: 1},
}


def _check_seat(seat: int) -> None:
    if seat not in SEATS:
        raise ValueError(f"seat must be 0 (White) or 1 (Black), not {seat!r}")


def own_point(seat: int, absolute: int) -> int:
    """The number ``seat`` gives the absolute point (``absolute`` 1..24; 0 and 25 map to each other)."""
    _check_seat(seat)
    return 25 - absolute if seat == WHITE else absolute


def absolute_point(seat: int, own: int) -> int:
    """The absolute point that ``seat`` numbers ``own`` (the inverse of :func:`own_point`)."""
    _check_seat(seat)
    return 25 - own if seat == WHITE else own


@dataclass(frozen=True, slots=True)
class Position:
    """Where every checker is. Immutable; equal positions compare and hash equal."""

    points: tuple[int, ...]
    """Length 25, index 0 unused (always 0). ``points[p] > 0``: that many White checkers on absolute
    point ``p``; ``< 0``: that many Black checkers."""
    bar: tuple[int, int]
    """Checkers on the bar, (white, black)."""
    off: tuple[int, int]
    """Checkers borne off, (white, black)."""

    @classmethod
    def start(cls, variant: Variant = Variant.STANDARD) -> Position:
        """The starting position of ``variant``."""
        layout = _STARTS[Variant(variant)]
        points = [0] * 25
        for own, count in layout.items():
            points[absolute_point(WHITE, own)] += count
            points[absolute_point(BLACK, own)] -= count
        return cls(tuple(points), (0, 0), (0, 0))

    @classmethod
    def from_counts(
        cls,
        white: Mapping[int, int],
        black: Mapping[int, int],
        *,
        bar: tuple[int, int] = (0, 0),
        off: tuple[int, int] | None = None,
        checkers: int = 15,
    ) -> Position:
        """A position from each side's checkers per ABSOLUTE point (``{point: count}``). ``off``
        defaults to whatever makes each side's total ``checkers``."""
        points = [0] * 25
        for seat, layout in ((WHITE, white), (BLACK, black)):
            for point, count in layout.items():
                if not 1 <= point <= 24 or count < 0:
                    raise ValueError(f"bad point or count: {point}: {count}")
                if count and points[point]:
                    raise ValueError(f"both sides on point {point}")
                points[point] = count if seat == WHITE else -count
        if off is None:
            on = [sum(white.values()) + bar[0], sum(black.values()) + bar[1]]
            off = (checkers - on[0], checkers - on[1])
        position = cls(tuple(points), (bar[0], bar[1]), (off[0], off[1]))
        position.validate(checkers)
        return position

    def validate(self, checkers: int | None = None) -> None:
        """Raise ``ValueError`` unless this is a well-formed position (equal totals per side, or
        ``checkers`` each when given)."""
        if len(self.points) != 25 or self.points[0] != 0:
            raise ValueError("points must have 25 entries, the first 0")
        if any(not isinstance(n, int) for n in (*self.points, *self.bar, *self.off)):
            raise ValueError("counts must be integers")
        if len(self.bar) != 2 or len(self.off) != 2 or min(*self.bar, *self.off) < 0:
            raise ValueError("bar and off must be two non-negative counts")
        totals = (self.checkers(WHITE), self.checkers(BLACK))
        if totals[0] != totals[1] or totals[0] <= 0:
            raise ValueError(f"each side must have the same number of checkers, not {totals}")
        if checkers is not None and totals[0] != checkers:
            raise ValueError(f"each side must have {checkers} checkers, not {totals[0]}")

    def checkers(self, seat: int) -> int:
        """``seat``'s checkers on the board, on the bar and off (15, or 3 in hypergammon)."""
        _check_seat(seat)
        if seat == WHITE:
            board = sum(n for n in self.points if n > 0)
        else:
            board = -sum(n for n in self.points if n < 0)
        return board + self.bar[seat] + self.off[seat]

    def count(self, seat: int, point: int) -> int:
        """How many of ``seat``'s checkers stand on the absolute ``point`` (1..24)."""
        _check_seat(seat)
        n = self.points[point]
        return max(n, 0) if seat == WHITE else max(-n, 0)

    def to_json(self) -> dict[str, Any]:
        return {"points": list(self.points), "bar": list(self.bar), "off": list(self.off)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Position:
        """The position :meth:`to_json` wrote; ``ValueError`` for anything else."""
        try:
            points = tuple(data["points"])
            bar = tuple(data["bar"])
            off = tuple(data["off"])
        except (KeyError, TypeError) as error:
            raise ValueError(f"not a backgammon position: {error}") from None
        if len(bar) != 2 or len(off) != 2:
            raise ValueError("bar and off must be two counts")
        position = cls(points, (bar[0], bar[1]), (off[0], off[1]))
        position.validate()
        return position


def pip_count(position: Position, seat: int) -> int:
    """The pips ``seat`` still has to move to bear everything off (a checker on the bar counts 25)."""
    _check_seat(seat)
    points = position.points
    if seat == WHITE:
        pips = sum((25 - p) * points[p] for p in range(1, 25) if points[p] > 0)
    else:
        pips = sum(-p * points[p] for p in range(1, 25) if points[p] < 0)
    return pips + 25 * position.bar[seat]


def _rearmost(position: Position, seat: int) -> int | None:
    """``seat``'s rearmost checker in ITS OWN numbering (25 for the bar), or None if all are off."""
    if position.bar[seat]:
        return BAR
    points = position.points
    for own in range(24, 0, -1):
        n = points[absolute_point(seat, own)]
        if (n > 0) if seat == WHITE else (n < 0):
            return own
    return None


def has_contact(position: Position) -> bool:
    """Whether a checker of one side can still meet one of the other (hit or be blocked): ``False`` once
    the sides have passed each other (a pure race)."""
    white, black = _rearmost(position, WHITE), _rearmost(position, BLACK)
    if white is None or black is None:
        return False
    # White's rearmost at absolute 25 - white (0 for the bar), Black's rearmost at absolute black.
    return 25 - white < black


def all_home(position: Position, seat: int) -> bool:
    """Whether every checker of ``seat`` is in its home board or off (none on the bar)."""
    rearmost = _rearmost(position, seat)
    return rearmost is None or rearmost <= 6


def game_value(position: Position, winner: int) -> int:
    """1 for a single game, 2 for a gammon (the loser has borne off none), 3 for a backgammon (none off
    and a checker on the bar or in the winner's home board). Meaningful once ``winner`` has borne all
    off; gammons being scored or not is the caller's option."""
    _check_seat(winner)
    loser = 1 - winner
    if position.off[loser] > 0:
        return 1
    if position.bar[loser]:
        return 3
    rearmost = _rearmost(position, loser)
    if rearmost is not None and rearmost >= 19:  # the loser's own 19-24 is the winner's home board
        return 3
    return 2
