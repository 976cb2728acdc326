"""Engine states as the clients see them: a ``MatchUpdate`` with the ``GoView`` of a state.

The view is the rules service's own mapping (``services/rules_go/family.py``, ``view_to_proto``), so the
clients are tested on what the server sends.
"""

from __future__ import annotations

from collections.abc import Sequence

from skillclassics.go.v1 import go_pb2
from skillclassics.rules.v1 import rules_pb2

from libs.engines.go import GO, Board, GoOptions, GoState, GoView, Phase
from services.rules_go.family import GoFamily

SERVICE_MAPPING = GoFamily()


def view_proto(view: GoView) -> go_pb2.GoView:
    """The engine's view as the contract's message: the rules service's own mapping."""
    return SERVICE_MAPPING.view_to_proto(view).go


def update_of(state: GoState, viewer: int | None, *, sequence: int = 1) -> rules_pb2.MatchUpdate:
    """The update ``viewer`` (``None``: a spectator) gets for ``state``."""
    view = GO.view(state, viewer)
    over = GO.is_over(state)
    update = rules_pb2.MatchUpdate(
        match_id="go.0.t",
        sequence=sequence,
        status=rules_pb2.MATCH_STATUS_FINISHED if over else rules_pb2.MATCH_STATUS_LIVE,
        view=rules_pb2.View(go=view_proto(view)),
        legal_actions=GO.legal_actions(state, viewer) if viewer is not None else [],
    )
    if view.to_move is not None:
        update.to_move = view.to_move
    return update


def position(rows: Sequence[str], *, turn: int = 0, **options: object) -> GoState:
    """A game in play on the board drawn by ``rows`` (top row first), ``turn`` to play, no moves so far
    and no ko (a test's hand-made position: the engine builds states only by playing)."""
    board = Board.from_rows(rows)
    return GoState(
        options=GoOptions(size=board.size, **options),  # type: ignore[arg-type]
        board=board,
        phase=Phase.PLAY,
        turn=turn,
        passes=0,
        prisoners=(0, 0),
        moves=(),
    )
