"""Engine states as the clients see them: a ``MatchUpdate`` with the ``BackgammonView`` of a state.

The view is the rules service's own mapping (``services/rules_backgammon/family.py``, ``view_to_proto``),
so the clients are tested on what the server sends.
"""

from __future__ import annotations

from skillclassics.backgammon.v1 import backgammon_pb2
from skillclassics.rules.v1 import rules_pb2

from libs.engines.backgammon import BACKGAMMON, BackgammonState, BackgammonView
from services.rules_backgammon.family import BackgammonFamily

SERVICE_MAPPING = BackgammonFamily()


def view_proto(view: BackgammonView) -> backgammon_pb2.BackgammonView:
    """The engine's view as the contract's message: the rules service's own mapping."""
    return SERVICE_MAPPING.view_to_proto(view).backgammon


def update_of(state: BackgammonState, viewer: int | None, *, sequence: int = 1) -> rules_pb2.MatchUpdate:
    """The update ``viewer`` (``None``: a spectator) gets for ``state``."""
    view = BACKGAMMON.view(state, viewer)
    over = BACKGAMMON.is_over(state)
    update = rules_pb2.MatchUpdate(
        match_id="backgammon.0.t",
        sequence=sequence,
        status=rules_pb2.MATCH_STATUS_FINISHED if over else rules_pb2.MATCH_STATUS_LIVE,
        view=rules_pb2.View(backgammon=view_proto(view)),
        legal_actions=BACKGAMMON.legal_actions(state, viewer) if viewer is not None else [],
    )
    if view.to_move is not None:
        update.to_move = view.to_move
    return update
