"""A second, deliberately plain implementation of the go rules, to check the engine against.

No incremental bookkeeping: the board is a dict of (column, row) -> colour, captures are found by flood
fill after every move, suicide by flood fill, and simple ko by comparing the whole resulting position
with the one before the opponent's last move. Nothing here is shared with ``libs/engines/go``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

Point = tuple[int, int]
"""(column, row), both from 0, row 0 at the bottom."""


@cache
def neighbours(size: int, point: Point) -> tuple[Point, ...]:
    col, row = point
    candidates = [(col - 1, row), (col + 1, row), (col, row - 1), (col, row + 1)]
    return tuple((c, r) for c, r in candidates if 0 <= c < size and 0 <= r < size)


def chain(size: int, stones: dict[Point, str], start: Point) -> tuple[set[Point], set[Point]]:
    """The stones connected to ``start`` and their liberties."""
    colour = stones[start]
    members = {start}
    liberties: set[Point] = set()
    todo = [start]
    while todo:
        point = todo.pop()
        for other in neighbours(size, point):
            if other not in stones:
                liberties.add(other)
            elif stones[other] == colour and other not in members:
                members.add(other)
                todo.append(other)
    return members, liberties


@dataclass
class ReferenceGame:
    """A game by the book: ``history`` holds every position so far (frozensets of stones)."""

    size: int
    stones: dict[Point, str] = field(default_factory=dict)
    to_play: str = "B"
    captures: dict[str, int] = field(default_factory=lambda: {"B": 0, "W": 0})
    history: list[frozenset[tuple[Point, str]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.history.append(self.position())

    def position(self) -> frozenset[tuple[Point, str]]:
        return frozenset(self.stones.items())

    def result_of(self, point: Point, colour: str) -> tuple[dict[Point, str], list[Point]] | None:
        """The stones after ``colour`` plays ``point`` and what it captured, or ``None`` if illegal."""
        if point in self.stones:
            return None
        after = dict(self.stones)
        after[point] = colour
        captured: list[Point] = []
        for other in neighbours(self.size, point):
            if other in after and after[other] != colour:
                members, liberties = chain(self.size, after, other)
                if not liberties:
                    for stone in members:
                        del after[stone]
                    captured.extend(members)
        _, own_liberties = chain(self.size, after, point)
        if not own_liberties:
            return None  # suicide
        # Simple ko: not the position before the opponent's last move. (Without a capture the opponent's
        # last stone is still on the board, or the opponent passed and we added a stone: the position
        # differs, so the whole-board comparison is only needed after a capture.)
        if captured and len(self.history) >= 2 and frozenset(after.items()) == self.history[-2]:
            return None
        return after, sorted(set(captured))

    def legal_points(self) -> set[Point]:
        return {
            (c, r)
            for c in range(self.size)
            for r in range(self.size)
            if self.result_of((c, r), self.to_play) is not None
        }

    def play(self, point: Point) -> list[Point]:
        result = self.result_of(point, self.to_play)
        assert result is not None, f"illegal reference move {point}"
        self.stones, captured = result
        self.captures[self.to_play] += len(captured)
        self.to_play = "W" if self.to_play == "B" else "B"
        self.history.append(self.position())
        return captured

    def pass_move(self) -> None:
        self.to_play = "W" if self.to_play == "B" else "B"
        self.history.append(self.position())

    def area(self) -> tuple[int, int]:
        """Stones plus empty points reachable only from one colour, by flood fill over empty points."""
        black = sum(1 for colour in self.stones.values() if colour == "B")
        white = len(self.stones) - black
        seen: set[Point] = set()
        for c in range(self.size):
            for r in range(self.size):
                start = (c, r)
                if start in self.stones or start in seen:
                    continue
                region = {start}
                touching: set[str] = set()
                todo = [start]
                while todo:
                    point = todo.pop()
                    for other in neighbours(self.size, point):
                        if other in self.stones:
                            touching.add(self.stones[other])
                        elif other not in region:
                            region.add(other)
                            todo.append(other)
                seen |= region
                if touching == {"B"}:
                    black += len(region)
                elif touching == {"W"}:
                    white += len(region)
        return black, white

    def is_own_eye(self, point: Point, colour: str) -> bool:
        """An empty point whose neighbours are all ``colour`` (random players do not fill these)."""
        return point not in self.stones and all(
            self.stones.get(other) == colour for other in neighbours(self.size, point)
        )
