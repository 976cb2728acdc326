"""Tests of the chess engine (``libs/engines/chess``), with the helpers they share."""

from __future__ import annotations

import re

from libs.engines.base import ActionContext
from libs.engines.chess import CHESS, ChessOptions, ChessState, Ruleset

MOVE_NUMBER = re.compile(r"\d+\.+\Z")

CLOCKS = ActionContext(remaining_ms=(60_000, 60_000))
"""Equal clocks, for actions whose clocks do not matter."""


def new(fen: str | None = None, ruleset: Ruleset = Ruleset.CONTEST) -> ChessState:
    """A new game under ``ruleset``, from ``fen`` or the usual position."""
    return CHESS.new_game(ChessOptions(ruleset=ruleset, initial_fen=fen))


def play(state: ChessState, *moves: str, context: ActionContext = CLOCKS) -> ChessState:
    """``state`` after ``moves`` (UCI or SAN), each made by the side to move."""
    for move in moves:
        seat = CHESS.to_move(state)
        assert seat is not None, f"the game is over before {move}"
        state = CHESS.apply(state, seat, move, context)
    return state


def play_san(state: ChessState, movetext: str, context: ActionContext = CLOCKS) -> ChessState:
    """``state`` after the moves of a movetext like ``"1. f3 e5 2. g4 Qh4#"`` (move numbers ignored)."""
    return play(
        state, *(token for token in movetext.split() if not MOVE_NUMBER.match(token)), context=context
    )
