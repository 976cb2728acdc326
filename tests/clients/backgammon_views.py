"""Engine states as the clients see them: a ``MatchUpdate`` with the ``BackgammonView`` of a state.

The view is the rules service's own mapping (``services/rules_backgammon/family.py``, ``view_to_proto``),
so the clients are tested on what the server sends; :func:`view_proto` is the same mapping written out
field by field, used only where that module cannot be imported (it was written alongside the clients).
"""

from __future__ import annotations

from skillclassics.backgammon.v1 import backgammon_pb2
from skillclassics.rules.v1 import rules_pb2

from libs.engines.backgammon import BACKGAMMON, BackgammonState, BackgammonView, Phase, Variant

try:
    from services.rules_backgammon.family import BackgammonFamily
except ImportError:  # pragma: no cover - the service is not there
    SERVICE_MAPPING = None
else:
    SERVICE_MAPPING = BackgammonFamily()

_PHASES = {
    Phase.OPENING: backgammon_pb2.PHASE_OPENING,
    Phase.ROLL_OR_DOUBLE: backgammon_pb2.PHASE_ROLL_OR_DOUBLE,
    Phase.ROLLING: backgammon_pb2.PHASE_ROLLING,
    Phase.MOVE: backgammon_pb2.PHASE_MOVE,
    Phase.DOUBLED: backgammon_pb2.PHASE_DOUBLED,
    Phase.RESIGN_OFFERED: backgammon_pb2.PHASE_RESIGN_OFFERED,
    Phase.BETWEEN_GAMES: backgammon_pb2.PHASE_BETWEEN_GAMES,
    Phase.OVER: backgammon_pb2.PHASE_OVER,
}
_LEVELS = {"single": 1, "gammon": 2, "backgammon": 3}
_VARIANTS = {
    Variant.STANDARD: backgammon_pb2.VARIANT_STANDARD,
    Variant.NACKGAMMON: backgammon_pb2.VARIANT_NACKGAMMON,
    Variant.HYPERGAMMON: backgammon_pb2.VARIANT_HYPERGAMMON,
}


def view_proto(view: BackgammonView) -> backgammon_pb2.BackgammonView:
    """The engine's view as the contract's message (the service's mapping where it can be imported)."""
    if SERVICE_MAPPING is not None:
        return SERVICE_MAPPING.view_to_proto(view).backgammon
    position = view.position
    proto = backgammon_pb2.BackgammonView(
        board=backgammon_pb2.Board(
            points=list(position.points), bar=list(position.bar), off=list(position.off)
        ),
        pips=list(view.pip_counts),
        phase=_PHASES[view.phase],
        dice=list(view.dice) if view.dice is not None else [],
        legal_plays=list(view.legal_plays),
        cube_value=view.cube_value,
        match_to=view.match_to,
        score=list(view.match_score),
        crawford=view.is_crawford,
        resign_offered=_LEVELS[view.resign_offer[1]] if view.resign_offer is not None else 0,
        last_play=view.last_play or "",
        last_turn_forfeited=view.last_forfeited,
        game_number=view.game_number,
        continued=[seat for seat in (0, 1) if seat not in view.continue_pending]
        if view.phase is Phase.BETWEEN_GAMES
        else [],
        variant=_VARIANTS[view.variant],
        cube_offered=view.cube_offered,
        last_dice=list(view.last_dice) if view.last_dice is not None else [],
        message=view.message,
    )
    if view.cube_owner is not None:
        proto.cube_owner = view.cube_owner
    if view.last_mover is not None:
        proto.last_seat = view.last_mover
    return proto


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
