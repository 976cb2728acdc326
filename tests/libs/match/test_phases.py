"""Timed phases (libs/engines/base.py ``PhaseDeadline``; docs/match-runtime.md, "Phases"): a phase of the
game that no clock times and that ends by itself at its own deadline, for any family.

The family here is a small "relay": the seats say "go" in turn; after every fourth "go" the game pauses
for a break that both seats end by saying "ready" (in either order) within 10 s. At the break's deadline
the seats that were not ready lose (both: the match is aborted), unless the options say ``lenient``, when
the game simply goes on. Every instant is explicit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest
from skillclassics.rules.v1 import rules_pb2

from libs.clocks import TimeControl
from libs.engines.base import (
    ActionContext,
    ChanceRequest,
    IllegalActionError,
    NotYourTurnError,
    Outcome,
    PhaseDeadline,
    Termination,
    TimesPhases,
)
from libs.match.actor import MatchActor, rebuild
from libs.match.family import JsonObject, LobbyClocks
from libs.match.model import Due, EventKind, MatchEvent, MatchRecord, created, resumed, step
from libs.runtime.timesource import ServiceTime
from tests.libs.match.stores import open_store
from tests.libs.match.test_actor import NoWakeUps

T0 = 1_700_000_000_000
BREAK_MS = 10_000
MINUTE = 60_000


@dataclass(frozen=True, slots=True)
class Relay:
    goes: int = 0
    ready: frozenset[int] = frozenset()
    lenient: bool = False
    outcome: Outcome | None = None

    @property
    def in_break(self) -> bool:
        return self.goes > 0 and self.goes % 4 == 0 and len(self.ready) < 2


class RelayEngine:
    family = "relay"

    def new_game(self, options: Any) -> Relay:
        return Relay(lenient=bool(options))

    def to_move(self, state: Relay) -> int | None:
        if state.outcome is not None:
            return None
        if state.in_break:
            return min({0, 1} - state.ready)
        return state.goes % 2

    def apply(self, state: Relay, seat: int, action: Any, context: ActionContext) -> Relay:
        if state.in_break:
            if action != "ready" or seat in state.ready:
                raise IllegalActionError("say ready")
            ready = state.ready | {seat}
            return replace(
                state, ready=frozenset() if len(ready) == 2 else ready, goes=state.goes + (len(ready) == 2)
            )
        if seat != self.to_move(state):
            raise NotYourTurnError("not your turn")
        if action != "go":
            raise IllegalActionError("say go")
        return replace(state, goes=state.goes + 1)

    def legal_actions(self, state: Relay, seat: int) -> Sequence[str]:
        return ["ready"] if state.in_break else ["go"]

    def outcome(self, state: Relay) -> Outcome | None:
        if state.outcome is not None:
            return state.outcome
        if state.goes >= 11:
            return Outcome(Termination.CHECKMATE, 0, score=(1.0, 0.0))
        return None

    def timeout_outcome(self, state: Relay, seat: int) -> Outcome:
        return Outcome(Termination.TIMEOUT, 1 - seat)

    def resignation_outcome(self, state: Relay, seat: int) -> Outcome:
        return Outcome(Termination.RESIGNATION, 1 - seat)

    def view(self, state: Relay, seat: int | None) -> Relay:
        return state

    def chance_needed(self, state: Relay) -> ChanceRequest | None:
        return None

    def apply_chance(self, state: Relay, request: ChanceRequest, values: tuple[int, ...]) -> Relay:
        raise AssertionError("no chance in a relay")

    def phase_deadline(self, state: Relay) -> PhaseDeadline | None:
        if state.outcome is None and state.in_break:
            missing = {0, 1} - state.ready
            return PhaseDeadline(BREAK_MS, min(missing) if len(missing) == 1 else None)
        return None

    def on_phase_deadline(self, state: Relay) -> Relay:
        if state.lenient:
            return replace(state, ready=frozenset(), goes=state.goes + 1)
        missing = {0, 1} - state.ready
        if len(missing) == 2:
            return replace(state, outcome=Outcome(Termination.ABORTED, None, detail="nobody came back"))
        (late,) = missing
        return replace(state, outcome=Outcome(Termination.TIMEOUT, 1 - late, score=(float(late), 1.0 - late)))


class RelayFamily:
    name = "relay"
    record_format = "txt"
    uses_chance = False
    hides_information = False
    engine = RelayEngine()
    lobby_clocks = LobbyClocks("relay", minutes=(1,))

    def options_from_proto(self, options: rules_pb2.MatchOptions) -> bool:
        return False

    def lobby_pool(self, options: Any) -> str:
        return "relay"

    def options_to_json(self, options: Any) -> JsonObject:
        return {"lenient": bool(options)}

    def options_to_proto(self, options: Any) -> rules_pb2.MatchOptions:
        return rules_pb2.MatchOptions()

    def options_from_json(self, data: JsonObject) -> bool:
        return bool(data["lenient"])

    def action_from_proto(self, action: rules_pb2.Action) -> str:
        return "go"

    def action_to_json(self, action: Any) -> JsonObject:
        return {"say": action}

    def action_from_json(self, data: JsonObject) -> str:
        return str(data["say"])

    def describe(self, state_before: Any, action: Any) -> str:
        return str(action)

    def view_to_proto(self, view: Any) -> rules_pb2.View:
        return rules_pb2.View()

    def export_record(self, record: MatchRecord) -> str:
        return ""


FAMILY = RelayFamily()


def new_match(lenient: bool = False) -> MatchRecord:
    setup = {
        "match_id": "relay.0.phases",
        "family": "relay",
        "players": ["alice", "bob"],
        "options": {"lenient": lenient},
        "time_control": TimeControl.sudden_death(MINUTE).to_dict(),
        "fairness_commitment": "",
        "first_move_timeout_ms": MINUTE,
        "disconnect_forfeit_ms": MINUTE,
        "created_at_ms": T0,
    }
    return created(FAMILY, MatchEvent(1, EventKind.CREATED, T0, setup, None, "create"))


def say(record: MatchRecord, seat: int, word: str, at_ms: int) -> MatchRecord:
    event = MatchEvent(
        record.sequence + 1, EventKind.ACTION, at_ms, {"action": {"say": word}}, seat, f"k{record.sequence}"
    )
    return step(FAMILY, record, event)


def deadline(record: MatchRecord, at_ms: int) -> MatchRecord:
    event = MatchEvent(record.sequence + 1, EventKind.DEADLINE, at_ms, {"due": "phase"}, None)
    return step(FAMILY, record, event)


def connected(record: MatchRecord, at_ms: int) -> MatchRecord:
    for seat in (0, 1):
        event = MatchEvent(record.sequence + 1, EventKind.PRESENCE, at_ms, {"connected": True}, seat)
        record = step(FAMILY, record, event)
    return record


def to_the_break(lenient: bool = False) -> tuple[MatchRecord, int]:
    """Both seats connected, then four goes, one second each: the break begins at the fourth, T0 + 4 s."""
    record = connected(new_match(lenient), T0)
    for n in range(4):
        record = say(record, n % 2, "go", T0 + (n + 1) * 1_000)
    return record, T0 + 4_000


def test_the_engine_says_it_times_phases() -> None:
    assert isinstance(FAMILY.engine, TimesPhases)


def test_a_break_stops_every_clock_and_only_its_own_deadline_is_due() -> None:
    record, began = to_the_break()
    assert record.phase_since_ms == began
    assert not record.clock.is_running
    left = [record.clock.remaining_ms(seat, began) for seat in (0, 1)]
    much_later = began + BREAK_MS - 1
    assert [record.clock.remaining_ms(seat, much_later) for seat in (0, 1)] == left  # nobody's time runs
    assert record.due(FAMILY) == [Due(began + BREAK_MS, "phase", 0)]  # no flag while it lasts
    assert record.overdue(FAMILY, began + BREAK_MS - 1) is None
    assert record.overdue(FAMILY, began + BREAK_MS) == (Due(began + BREAK_MS, "phase", 0), None)


def test_readiness_in_either_order_ends_the_break_and_the_next_mover_is_timed_from_then() -> None:
    record, began = to_the_break()
    record = say(record, 1, "ready", began + 3_000)  # the seat not to move first: accepted
    assert record.phase_since_ms == began  # the deadline still counts from the break's start
    assert record.due(FAMILY) == [Due(began + BREAK_MS, "phase", 0)]
    assert record.moves_made == (2, 2)  # readiness is not a move
    ended = began + 5_000
    record = say(record, 0, "ready", ended)
    assert record.phase_since_ms is None
    assert record.clock.is_running
    mover = FAMILY.engine.to_move(record.game)
    assert mover is not None
    before = record.clock.remaining_ms(mover, ended)
    assert record.clock.remaining_ms(mover, ended + 2_000) == before - 2_000  # timed from the break's end
    assert [d.kind for d in record.due(FAMILY)] == ["flag"]


def test_at_the_deadline_the_engine_decides_a_late_seat_loses() -> None:
    record, began = to_the_break()
    record = say(record, 1, "ready", began + 1_000)
    record = deadline(record, began + BREAK_MS)
    assert record.outcome is not None
    assert (record.outcome.termination, record.outcome.winner) == (Termination.TIMEOUT, 1)
    assert record.phase_since_ms is None
    assert record.due(FAMILY) == []


def test_at_the_deadline_the_game_may_simply_go_on() -> None:
    record, began = to_the_break(lenient=True)
    at = began + BREAK_MS
    record = deadline(record, at)
    assert record.outcome is None
    assert record.phase_since_ms is None
    assert record.clock.is_running  # handed over to the next mover at the deadline
    mover = FAMILY.engine.to_move(record.game)
    assert mover is not None
    assert record.clock.remaining_ms(mover, at + 1_000) == record.clock.remaining_ms(mover, at) - 1_000


def test_a_deadline_event_outside_a_phase_is_refused() -> None:
    with pytest.raises(ValueError, match="no timed phase"):
        deadline(new_match(), T0 + 1_000)


def test_a_shard_outage_during_a_break_moves_its_deadline() -> None:
    record, began = to_the_break()
    credited = resumed(record, began + 2_000, began + 7_000)  # down 5 s in the middle of the break
    assert credited.phase_since_ms == began + 5_000
    assert credited.due(FAMILY) == [Due(began + 5_000 + BREAK_MS, "phase", 0)]


def test_replaying_the_log_gives_the_same_record() -> None:
    record, began = to_the_break(lenient=True)
    events = [record.last_event]
    record = say(record, 0, "ready", began + 500)
    events.append(record.last_event)
    record = deadline(record, began + BREAK_MS)
    events.append(record.last_event)
    replayed, _ = to_the_break(lenient=True)
    for event in events[1:]:
        replayed = step(FAMILY, replayed, event)
    assert replayed == record


# -- through the match actor: a wake-up after the deadline logs it, durably ----------------------------


class SteppedTime(ServiceTime):
    """The service's time, moved by the test."""

    def __init__(self, now_ms: int) -> None:
        super().__init__()
        self.at_ms = now_ms

    def now_ms(self) -> int:
        return self.at_ms


async def test_the_actor_logs_the_deadline_when_it_wakes_and_the_log_replays_it(migrated_url: str) -> None:
    time = SteppedTime(T0)
    wake_ups = NoWakeUps()
    store = open_store(migrated_url, "relay")
    created_event = new_match().last_event
    await store.create(created_event)
    actor = MatchActor(FAMILY, [created_event], store, wake_ups, time)  # type: ignore[arg-type]
    await actor.start()
    for n in range(4):
        time.at_ms = T0 + (n + 1) * 1_000
        await actor.submit(n % 2, f"k{n}", EventKind.ACTION, {"action": {"say": "go"}})
    began = T0 + 4_000
    assert actor.record.phase_since_ms == began
    assert wake_ups.armed["relay.0.phases"] == began + BREAK_MS  # the wake-up is armed at the break's end
    time.at_ms = began + BREAK_MS + 3
    await actor.wake()
    assert (await actor.log())[-1].kind is EventKind.DEADLINE
    assert actor.record.outcome is not None
    assert actor.record.outcome.termination is Termination.ABORTED  # nobody came back
    stored = await store.load_log("relay.0.phases")
    assert [e.kind for e in stored][-1] is EventKind.DEADLINE
    assert rebuild(FAMILY, stored) == actor.record
