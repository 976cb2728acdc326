"""Helpers for the go tests: games from move lists."""

from __future__ import annotations

from collections.abc import Iterable

from libs.engines.base import ActionContext
from libs.engines.go import GO, GoOptions, GoState

CONTEXT = ActionContext(remaining_ms=(60_000, 60_000))


def play(moves: Iterable[str], options: GoOptions | None = None, state: GoState | None = None) -> GoState:
    """The state after ``moves`` (points, ``pass``, ``accept``...) each taken by the seat to move."""
    state = GO.new_game(options or GoOptions(size=9)) if state is None else state
    for move in moves:
        seat = GO.to_move(state)
        assert seat is not None
        state = GO.apply(state, seat, move, CONTEXT)
    return state


def walls(size: int = 9) -> list[str]:
    """Black fills column D and White column F, alternately from row 1 (a 9x9 game with equal areas)."""
    moves = []
    for row in range(1, size + 1):
        moves += [f"D{row}", f"F{row}"]
    return moves
