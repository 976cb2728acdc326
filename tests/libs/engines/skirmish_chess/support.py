"""Playing Skirmish Chess through the engine in tests: main-board moves, and duels scripted to an end."""

from __future__ import annotations

from libs.engines.base import ActionContext
from libs.engines.chess.skirmish import SKIRMISH_CHESS, DrawRule, SkirmishChessOptions, SkirmishChessState
from tests.libs.engines.skirmish_chess.lines import line_to

ENGINE = SKIRMISH_CHESS
CONTEXT = ActionContext(remaining_ms=(60_000, 60_000), phase_elapsed_ms=100)
ATTACKER, DEFENDER, DRAW = True, False, None


def game(fen: str | None = None, **options: object) -> SkirmishChessState:
    return ENGINE.new_game(SkirmishChessOptions(initial_fen=fen, **options))  # type: ignore[arg-type]


def move(state: SkirmishChessState, *notations: str) -> SkirmishChessState:
    for notation in notations:
        seat = ENGINE.to_move(state)
        assert seat is not None, f"the game is over before {notation}"
        state = ENGINE.apply(state, seat, notation, CONTEXT)
    return state


def duel_to(state: SkirmishChessState, winner: bool | None) -> SkirmishChessState:
    """Play the pending duel to an end with ``winner`` (the duel's White = the attacker)."""
    pending = state.pending
    assert pending is not None, "no duel is being played"
    assert pending.duel is not None, "the duel is not set up yet"
    return move(state, *line_to(pending.duel, winner))


def capture(state: SkirmishChessState, notation: str, winner: bool | None) -> SkirmishChessState:
    """A capture attempt and its duel, scripted to end with ``winner``."""
    state = move(state, notation)
    assert state.pending is not None, f"{notation} did not start a duel"
    return duel_to(state, winner)


__all__ = ["ATTACKER", "DEFENDER", "DRAW", "ENGINE", "DrawRule", "capture", "duel_to", "game", "move"]
