"""Chance in the match runtime: draws are obtained, logged before anyone sees them, replayed from the log
(never drawn again), and a fairness outage makes the match wait instead of losing an action."""

from __future__ import annotations

import asyncio
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
    Outcome,
    Termination,
)
from libs.match import actor as actor_module
from libs.match.actor import MatchActor, rebuild
from libs.match.chance import ChanceUnavailable
from libs.match.family import JsonObject, LobbyClocks
from libs.match.model import EventKind, MatchEvent, MatchRecord, MatchSetup
from libs.runtime.errors import FailedPrecondition
from libs.runtime.timesource import ServiceTime
from tests.libs.match.stores import open_store
from tests.libs.match.test_actor import NoWakeUps


@dataclass(frozen=True)
class Race:
    """A toy dice race: each player rolls twice; the higher total wins (ties go to seat 1)."""

    rolls: tuple[tuple[int, int], ...] = ()
    pending: int | None = None
    """The seat whose roll waits for its die."""


class RaceEngine:
    family = "race"

    def new_game(self, options: Any) -> Race:
        return Race()

    def to_move(self, state: Race) -> int | None:
        """The turn passes with the roll; the die comes from the fairness stream just after it."""
        made = len(state.rolls) + (state.pending is not None)
        return None if made == 4 else made % 2

    def apply(self, state: Race, seat: int, action: Any, context: ActionContext) -> Race:
        if state.pending is not None:
            raise IllegalActionError("the die is being rolled")
        if seat != self.to_move(state):
            raise IllegalActionError("not your turn")
        # (to_move already names the next seat while a die is pending: the check above comes first)
        return replace(state, pending=seat)

    def chance_needed(self, state: Race) -> ChanceRequest | None:
        if state.pending is None:
            return None
        return ChanceRequest("dice", len(state.rolls), "dice", 1, 0)

    def apply_chance(self, state: Race, request: ChanceRequest, values: tuple[int, ...]) -> Race:
        assert state.pending is not None
        return Race(rolls=(*state.rolls, (state.pending, values[0])))

    def legal_actions(self, state: Race, seat: int) -> Sequence[str]:
        return ["roll"] if seat == self.to_move(state) and state.pending is None else []

    def outcome(self, state: Race) -> Outcome | None:
        if len(state.rolls) < 4:
            return None
        totals = [sum(v for s, v in state.rolls if s == seat) for seat in (0, 1)]
        winner = 0 if totals[0] > totals[1] else 1
        return Outcome(Termination.CHECKMATE, winner, score=(1.0 - winner, float(winner)))

    def timeout_outcome(self, state: Race, seat: int) -> Outcome:
        return Outcome(Termination.TIMEOUT, 1 - seat)

    def resignation_outcome(self, state: Race, seat: int) -> Outcome:
        return Outcome(Termination.RESIGNATION, 1 - seat)

    def view(self, state: Race, seat: int | None) -> Race:
        return state


class RaceFamily:
    name = "race"
    record_format = "txt"
    uses_chance = True
    hides_information = False
    engine = RaceEngine()
    lobby_clocks = LobbyClocks("race", minutes=(5,))

    def options_from_proto(self, options: rules_pb2.MatchOptions) -> None:
        return None

    def lobby_pool(self, options: Any) -> str:
        return "race"

    def options_to_json(self, options: Any) -> JsonObject:
        return {}

    def options_to_proto(self, options: Any) -> rules_pb2.MatchOptions:
        return rules_pb2.MatchOptions()

    def options_from_json(self, data: JsonObject) -> None:
        return None

    def action_from_proto(self, action: rules_pb2.Action) -> str:
        return "roll"

    def action_to_json(self, action: Any) -> JsonObject:
        return {"roll": True}

    def action_from_json(self, data: JsonObject) -> str:
        return "roll"

    def describe(self, state_before: Any, action: Any) -> str:
        return "roll"

    def view_to_proto(self, view: Any) -> rules_pb2.View:
        return rules_pb2.View()

    def export_record(self, record: MatchRecord) -> str:
        return repr(record.game.rolls)


FAMILY = RaceFamily()


class Dice:
    """A stand-in for the fairness service: die ``index`` shows ``index % 6 + 1``; can be switched off."""

    def __init__(self) -> None:
        self.calls: list[ChanceRequest] = []
        self.down = False
        self.seeded = 0
        """How many seats have added a client seed."""
        self.asks = 0
        """How many times the actor asked how many seeds are in."""

    async def draw(self, match_id: str, request: ChanceRequest) -> tuple[int, ...]:
        self.calls.append(request)
        if self.down:
            raise ChanceUnavailable("fairness is down")
        return (request.index % 6 + 1,)

    async def seeds(self, match_id: str) -> int:
        self.asks += 1
        return self.seeded

    async def close(self) -> None:
        return None


def _created(match_id: str, now: int, seed_window_ms: int = 0) -> MatchEvent:
    setup = MatchSetup(
        match_id=match_id,
        family="race",
        players=("alice", "bob"),
        options={},
        time_control=TimeControl.sudden_death(60_000),
        fairness_commitment="c" * 64,
        first_move_timeout_ms=60_000,
        disconnect_forfeit_ms=60_000,
        created_at_ms=now,
        client_seed_window_ms=seed_window_ms,
    )
    return MatchEvent(1, EventKind.CREATED, now, setup.to_json(), None, "create")


async def _actor(url: str, match_id: str, dice: Dice, seed_window_ms: int = 0) -> MatchActor:
    store = open_store(url, "race")
    event = _created(match_id, ServiceTime().now_ms(), seed_window_ms)
    await store.create(event)
    actor = MatchActor(FAMILY, [event], store, NoWakeUps(), ServiceTime(), chance=dice)  # type: ignore[arg-type]
    await actor.start()
    return actor


async def test_draws_are_logged_after_the_action_and_replayed_without_a_new_draw(migrated_url: str) -> None:
    dice = Dice()
    actor = await _actor(migrated_url, "race.0.logged", dice)
    after_roll = await actor.submit(0, "k1", EventKind.ACTION, {"action": {"roll": True}})
    # The answer is the action itself; the draw follows it in the log.
    assert after_roll.last_event.kind is EventKind.ACTION
    assert [e.kind for e in await actor.log()] == [EventKind.CREATED, EventKind.ACTION, EventKind.CHANCE]
    assert actor.record.game.rolls == ((0, 1),)
    for seat, key in ((1, "k2"), (0, "k3"), (1, "k4")):
        await actor.submit(seat, key, EventKind.ACTION, {"action": {"roll": True}})
    assert actor.record.game.rolls == ((0, 1), (1, 2), (0, 3), (1, 4))
    assert actor.record.outcome is not None
    assert actor.record.outcome.winner == 1
    assert [c.index for c in dice.calls] == [0, 1, 2, 3]
    # The stored log rebuilds the same game; the source is not asked again.
    stored = await open_store(migrated_url, "race").load_log("race.0.logged")
    assert rebuild(FAMILY, stored).game == actor.record.game
    assert len(dice.calls) == 4
    # What a watcher sees of a draw is its description, never more than the engine's view.
    chance = stored[2]
    assert chance.payload["description"] == "dice #0 drawn"


async def test_a_fairness_outage_keeps_the_action_and_the_match_waits_for_the_draw(
    migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(actor_module, "CHANCE_RETRY_SECONDS", 0.05)
    dice = Dice()
    dice.down = True
    actor = await _actor(migrated_url, "race.0.outage", dice)
    await actor.submit(0, "k1", EventKind.ACTION, {"action": {"roll": True}})
    assert actor.record.game.pending == 0  # acknowledged and durable, the die still to come
    with pytest.raises(FailedPrecondition, match="being rolled"):
        await actor.submit(1, "k2", EventKind.ACTION, {"action": {"roll": True}})
    await asyncio.sleep(0.2)
    assert actor.record.game.pending == 0  # still down: retried, still waiting
    dice.down = False
    for _ in range(50):
        await asyncio.sleep(0.02)
        if not actor.record.game.pending and actor.record.game.rolls:
            break
    assert actor.record.game.rolls == ((0, 1),)
    assert all(c.index == 0 for c in dice.calls)  # the same draw asked for each time, never a new index
    actor.close()


async def test_a_restart_with_a_draw_pending_obtains_it_on_start(migrated_url: str) -> None:
    dice = Dice()
    dice.down = True
    actor = await _actor(migrated_url, "race.0.restart", dice)
    await actor.submit(0, "k1", EventKind.ACTION, {"action": {"roll": True}})
    actor.close()
    store = open_store(migrated_url, "race")
    events = await store.load_log("race.0.restart")
    assert [e.kind for e in events] == [EventKind.CREATED, EventKind.ACTION]
    back = Dice()
    recovered = MatchActor(FAMILY, events, store, NoWakeUps(), ServiceTime(), chance=back)  # type: ignore[arg-type]
    await recovered.start()
    assert recovered.record.game.rolls == ((0, 1),)
    assert [c.index for c in back.calls] == [0]


async def test_readers_racing_a_creation_share_its_one_actor(migrated_url: str) -> None:
    from libs.match.runtime import MatchRuntime
    from libs.runtime.errors import NotFound

    store = open_store(migrated_url, "race")
    runtime = MatchRuntime(FAMILY, 0, store, NoWakeUps(), ServiceTime(), chance=Dice())  # type: ignore[arg-type]
    setup = MatchSetup.from_json(_created("race.0.racing", ServiceTime().now_ms()).payload)

    async def reader() -> MatchActor | None:
        for _ in range(200):
            try:
                return await runtime.get(setup.match_id)
            except NotFound:
                await asyncio.sleep(0)
        return None

    created = asyncio.ensure_future(runtime.create(setup, "create"))
    read = await asyncio.gather(*(reader() for _ in range(5)))
    actor = await created
    assert all(found is actor for found in read)
    await actor.set_presence(0, True)  # one writer: no clash on sequence numbers
    assert [e.sequence for e in await actor.log()] == list(range(1, len(await actor.log()) + 1))


async def test_the_first_draw_waits_for_both_seeds_then_goes_at_once(migrated_url: str) -> None:
    dice = Dice()
    actor = await _actor(migrated_url, "race.0.seeds", dice, seed_window_ms=10_000)
    await actor.submit(0, "k1", EventKind.ACTION, {"action": {"roll": True}})
    await asyncio.sleep(0.3)
    assert dice.calls == []  # no seed yet: nothing drawn, the match waits
    dice.seeded = 1
    await asyncio.sleep(0.3)
    assert dice.calls == []  # one seed of two
    dice.seeded = 2
    for _ in range(100):
        await asyncio.sleep(0.02)
        if actor.record.game.rolls:
            break
    assert actor.record.game.rolls == ((0, 1),)  # both in: drawn at the next ask
    # Later draws do not wait again.
    await actor.submit(1, "k2", EventKind.ACTION, {"action": {"roll": True}})
    assert actor.record.game.rolls == ((0, 1), (1, 2))
    actor.close()


async def test_without_seeds_the_first_draw_is_made_when_the_window_ends(migrated_url: str) -> None:
    dice = Dice()
    loop = asyncio.get_running_loop()
    started = loop.time()
    actor = await _actor(migrated_url, "race.0.noseeds", dice, seed_window_ms=400)
    await actor.submit(0, "k1", EventKind.ACTION, {"action": {"roll": True}})
    for _ in range(100):
        await asyncio.sleep(0.02)
        if actor.record.game.rolls:
            break
    assert actor.record.game.rolls == ((0, 1),)
    assert loop.time() - started >= 0.35  # it did wait for the window
    actor.close()


async def test_the_seed_asks_back_off(migrated_url: str) -> None:
    dice = Dice()
    actor = await _actor(migrated_url, "race.0.backoff", dice, seed_window_ms=60_000)
    await actor.submit(0, "k1", EventKind.ACTION, {"action": {"roll": True}})
    await asyncio.sleep(3.0)
    # Asked at about 0, 0.1, 0.3, 0.7, 1.5, 2.3 s: each wait twice the last, up to 0.8 s (a fixed
    # 0.1 s poll would have asked about thirty times).
    assert 4 <= dice.asks <= 8, dice.asks
    assert dice.calls == []  # still waiting for the seeds
    actor.close()


async def test_the_wait_for_a_draw_is_charged_to_nobody_and_nothing_falls_due_meanwhile(
    migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once play has begun, nobody can act while a draw is awaited (the fairness service slow or down): the
    side to move's clock does not run for it, no flag or forfeit falls due meanwhile, and a replay of the
    log gives the same clock."""
    monkeypatch.setattr(actor_module, "CHANCE_RETRY_SECONDS", 0.05)
    dice = Dice()
    actor = await _actor(migrated_url, "race.0.waited", dice)
    await actor.submit(0, "k1", EventKind.ACTION, {"action": {"roll": True}})  # play begins; 1 to move
    await actor.submit(1, "k2", EventKind.ACTION, {"action": {"roll": True}})
    dice.down = True
    await actor.submit(0, "k3", EventKind.ACTION, {"action": {"roll": True}})  # seat 1 to move, die pending
    before = actor.record.clock.remaining_ms(1, actor.record.last_at_ms)
    assert actor.record.due(FAMILY) == []  # waiting for the draw: no flag can fall
    await asyncio.sleep(0.6)
    dice.down = False
    for _ in range(100):
        await asyncio.sleep(0.02)
        if actor.record.game.pending is None:
            break
    assert actor.record.game.pending is None
    drawn = (await actor.log())[-1]
    assert drawn.kind is EventKind.CHANCE
    assert drawn.at_ms - drawn.payload["waited_from_ms"] >= 500
    after = actor.record.clock.remaining_ms(1, drawn.at_ms)
    assert before - after <= 50, f"seat 1 was charged {before - after} ms for the wait"
    assert "flag" in [d.kind for d in actor.record.due(FAMILY)]  # counts go on after the draw
    assert rebuild(FAMILY, await actor.log()).clock == actor.record.clock
    actor.close()
