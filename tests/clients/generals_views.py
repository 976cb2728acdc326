"""Engine states as the clients see them: a ``MatchUpdate`` with the ``GeneralsView`` of a state.

The view is the rules service's own mapping (``services/rules_generals/family.py``, ``view_to_proto``), so
the clients are tested on what the server sends. :func:`play_game` plays a whole game between two bot
strategies through the engine: the setup (both seats asked in turn while either may act), ``ready``, the
first-mover coin drawn with a seeded value, and the moves.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping

from skillclassics.generals.v1 import generals_pb2
from skillclassics.rules.v1 import rules_pb2

from clients.families import Strategy
from clients.families.generals import FAMILY as GENERALS_CLIENT
from libs.engines.base import ActionContext
from libs.engines.generals import GENERALS, GeneralsState, GeneralsView
from services.rules_generals.family import GeneralsFamily

SERVICE_MAPPING = GeneralsFamily()
CONTEXT = ActionContext(remaining_ms=(0, 0))
MATCH_ID = "generals.0.t"


def view_proto(view: GeneralsView) -> generals_pb2.GeneralsView:
    """The engine's view as the contract's message: the rules service's own mapping."""
    return SERVICE_MAPPING.view_to_proto(view).generals


def update_of(
    state: GeneralsState,
    viewer: int | None,
    *,
    sequence: int = 1,
    strikes: tuple[int, int] | None = None,
    match_id: str = MATCH_ID,
) -> rules_pb2.MatchUpdate:
    """The update ``viewer`` (``None``: a spectator) gets for ``state``; ``strikes``: per-move clocks with
    that many strikes taken by each seat."""
    view = GENERALS.view(state, viewer)
    over = GENERALS.is_over(state)
    update = rules_pb2.MatchUpdate(
        match_id=match_id,
        sequence=sequence,
        status=rules_pb2.MATCH_STATUS_FINISHED if over else rules_pb2.MATCH_STATUS_LIVE,
        view=rules_pb2.View(generals=view_proto(view)),
        legal_actions=GENERALS.legal_actions(state, viewer) if viewer is not None else [],
    )
    if view.to_move is not None:
        update.to_move = view.to_move
    if strikes is not None:
        for seat in (0, 1):
            update.clocks.add(seat=seat, remaining_ms=60_000, periods_left=3 - strikes[seat])
    return update


def apply(state: GeneralsState, seat: int, action: rules_pb2.Action | str) -> GeneralsState:
    text = action if isinstance(action, str) else action.generals.action
    return GENERALS.apply(state, seat, text, CONTEXT)


Visit = Callable[[GeneralsState, int, str], None]


def play_game(
    movers: Mapping[int, str],
    rng: random.Random,
    *,
    visit: Visit | None = None,
    limit: int = 5_000,
) -> tuple[GeneralsState, int]:
    """A whole game through the engine, each seat played by the bot ``movers[seat]`` (called only as the
    bot loop calls it: when :meth:`~clients.families.FamilyClient.should_act` says so); ``visit(state,
    seat, action)`` sees every action before it is applied, and every action must be accepted. The coin
    is drawn from ``rng``. Returns the final state and the number of actions."""
    bots: dict[int, Strategy] = {
        seat: GENERALS_CLIENT.strategy(name, random.Random(rng.random())) for seat, name in movers.items()
    }
    state = GENERALS.new_game()
    actions = 0
    sequence = 0
    while not GENERALS.is_over(state):
        request = GENERALS.chance_needed(state)
        if request is not None:
            state = GENERALS.apply_chance(state, request, (rng.randrange(2),))
            continue
        acted = False
        # Each seat sees the update; the seat to move first (during the setup either may act).
        first = GENERALS.to_move(state)
        order = (0, 1) if first in (None, 0) else (1, 0)
        for seat in order:
            sequence += 1
            update = update_of(state, seat, sequence=sequence)
            if not GENERALS_CLIENT.should_act(update, seat):
                continue
            action = bots[seat](update, seat)
            if action is None:
                continue
            text = action.generals.action
            if not text.startswith("setup"):
                assert text in update.legal_actions, (text, list(update.legal_actions)[:8])
            if visit is not None:
                visit(state, seat, text)
            state = apply(state, seat, text)  # raises if the engine refuses it
            actions += 1
            acted = True
            break
        assert acted, "no bot acted: the game is stuck"
        assert actions < limit, "a bot game did not end"
    return state, actions
