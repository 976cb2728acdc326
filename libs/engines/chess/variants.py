"""The chess family's engine: standard chess and Skirmish Chess behind one engine, chosen by the options.

The rules service plugs one engine per family. A match's options say which variant it plays
(:class:`~libs.engines.chess.engine.ChessOptions` or
:class:`~libs.engines.chess.skirmish.SkirmishChessOptions`), and every later call goes to the engine of
the state it is given. Standard chess has no timed phases, so :meth:`phase_deadline` is ``None`` for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from libs.engines.base import ActionContext, ChanceRequest, Outcome, PhaseDeadline
from libs.engines.chess.engine import CHESS, ChessOptions, ChessState, ChessView
from libs.engines.chess.skirmish import (
    SKIRMISH_CHESS,
    SkirmishChessOptions,
    SkirmishChessState,
    SkirmishChessView,
)

AnyChessState = ChessState | SkirmishChessState
AnyChessOptions = ChessOptions | SkirmishChessOptions
AnyChessView = ChessView | SkirmishChessView


class ChessVariantsEngine:
    """Standard chess or Skirmish Chess, by the state (see the module docstring)."""

    family: str = "chess"

    def _engine(self, state: AnyChessState) -> Any:
        return SKIRMISH_CHESS if type(state) is SkirmishChessState else CHESS

    def new_game(self, options: AnyChessOptions | None = None) -> AnyChessState:
        if isinstance(options, SkirmishChessOptions):
            return SKIRMISH_CHESS.new_game(options)
        return CHESS.new_game(options)

    def to_move(self, state: AnyChessState) -> int | None:
        return self._engine(state).to_move(state)  # type: ignore[no-any-return]

    def apply(self, state: AnyChessState, seat: int, action: Any, context: ActionContext) -> AnyChessState:
        return self._engine(state).apply(state, seat, action, context)  # type: ignore[no-any-return]

    def legal_actions(self, state: AnyChessState, seat: int) -> Sequence[str]:
        return self._engine(state).legal_actions(state, seat)  # type: ignore[no-any-return]

    def outcome(self, state: AnyChessState) -> Outcome | None:
        return state.result

    def is_over(self, state: AnyChessState) -> bool:
        return state.result is not None

    def timeout_outcome(self, state: AnyChessState, seat: int) -> Outcome:
        return self._engine(state).timeout_outcome(state, seat)  # type: ignore[no-any-return]

    def resignation_outcome(self, state: AnyChessState, seat: int) -> Outcome:
        return self._engine(state).resignation_outcome(state, seat)  # type: ignore[no-any-return]

    def view(self, state: AnyChessState, seat: int | None) -> AnyChessView:
        return self._engine(state).view(state, seat)  # type: ignore[no-any-return]

    def move_san(self, state: AnyChessState, notation: str) -> str:
        return self._engine(state).move_san(state, notation)  # type: ignore[no-any-return]

    def chance_needed(self, state: AnyChessState) -> ChanceRequest | None:
        if type(state) is not SkirmishChessState:
            return None
        return SKIRMISH_CHESS.chance_needed(state)

    def apply_chance(
        self, state: AnyChessState, request: ChanceRequest, values: tuple[int, ...]
    ) -> AnyChessState:
        return self._engine(state).apply_chance(state, request, values)  # type: ignore[no-any-return]

    def phase_deadline(self, state: AnyChessState) -> PhaseDeadline | None:
        if type(state) is not SkirmishChessState:
            return None
        return SKIRMISH_CHESS.phase_deadline(state)

    def on_phase_deadline(self, state: AnyChessState) -> AnyChessState:
        if type(state) is not SkirmishChessState:
            raise ValueError("standard chess has no timed phases")
        return SKIRMISH_CHESS.on_phase_deadline(state)


CHESS_VARIANTS = ChessVariantsEngine()
