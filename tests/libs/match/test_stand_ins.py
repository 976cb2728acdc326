"""Stand-ins (docs/match-runtime.md, "Stand-ins"; seed 002's ghost player): with a match's disconnect
policy ``stand_in_after_ms``, a seat away that long is played by its family's stand-in on its turns, and
nobody forfeits for being away; the result's settlement says whether the stakes are paid or refunded.

Backgammon and gin rummy both have a stand-in; the mechanism is the runtime's, not either family's.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from skillclassics.rules.v1 import rules_pb2

from libs.clocks import TimeControl
from libs.engines.backgammon import BACKGAMMON, BackgammonOptions
from libs.engines.backgammon.standin import stand_in_action as backgammon_stand_in
from libs.engines.base import ActionContext, ChanceRequest, Outcome, Termination
from libs.engines.gin import GIN, GinOptions
from libs.engines.gin.standin import stand_in_action as gin_stand_in
from libs.match.actor import MatchActor, rebuild
from libs.match.family import PlaysForAbsentSeats
from libs.match.model import EventKind, MatchEvent, MatchRecord, MatchSetup, created, step
from libs.match.results import result_proto, settlement
from services.rules_backgammon.family import BackgammonFamily
from services.rules_chess.family import ChessFamily
from services.rules_gin.family import GinFamily
from tests.libs.match.stores import open_store
from tests.libs.match.test_actor import NoWakeUps
from tests.libs.match.test_phases import SteppedTime

FAMILY = BackgammonFamily()
T0 = 1_700_000_000_000
AWAY_MS = 120_000
CLOCKS = ActionContext(remaining_ms=(600_000, 600_000))


def setup(
    stand_in_after_ms: int = AWAY_MS, match_to: int = 0, match_id: str = "backgammon.0.ghost"
) -> MatchSetup:
    return MatchSetup(
        match_id=match_id,
        family="backgammon",
        players=("alice", "bob"),
        options=dict(FAMILY.options_to_json(BackgammonOptions(match_to=match_to))),
        time_control=TimeControl.sudden_death(10 * 60_000),
        fairness_commitment="c" * 64,
        first_move_timeout_ms=60_000,
        disconnect_forfeit_ms=60_000,
        created_at_ms=T0,
        stand_in_after_ms=stand_in_after_ms,
    )


def new_match(**options: Any) -> MatchRecord:
    return created(FAMILY, MatchEvent(1, EventKind.CREATED, T0, setup(**options).to_json(), None, "create"))


def chance(record: MatchRecord, values: tuple[int, int], at_ms: int) -> MatchRecord:
    request = record.chance_needed(FAMILY)
    assert request is not None
    payload = {"request": request.to_json(), "values": list(values)}
    return step(FAMILY, record, MatchEvent(record.sequence + 1, EventKind.CHANCE, at_ms, payload))


def act(record: MatchRecord, seat: int, text: str, at_ms: int, *, stand_in: bool = False) -> MatchRecord:
    payload: dict[str, Any] = {
        "action": dict(FAMILY.action_to_json(FAMILY.action_from_json({"notation": text})))
    }
    if stand_in:
        payload["stand_in"] = True
    event = MatchEvent(
        record.sequence + 1,
        EventKind.ACTION,
        at_ms,
        payload,
        seat,
        None if stand_in else f"k{record.sequence}",
    )
    return step(FAMILY, record, event)


def presence(record: MatchRecord, seat: int, connected: bool, at_ms: int) -> MatchRecord:
    event = MatchEvent(record.sequence + 1, EventKind.PRESENCE, at_ms, {"connected": connected}, seat)
    return step(FAMILY, record, event)


def live_match(**options: Any) -> MatchRecord:
    """Both connected; White won the opening roll (5-3) and played it; Black rolled 4-2 and is to move."""
    record = presence(presence(new_match(**options), 0, True, T0), 1, True, T0)
    record = chance(record, (5, 3), T0 + 100)  # White's 5 against Black's 3: White plays 5-3
    assert FAMILY.engine.to_move(record.game) == 0
    record = act(record, 0, record.game.plays[0].notation, T0 + 1_000)
    if record.chance_needed(FAMILY) is not None:  # no cube: Black's dice are rolled at once
        record = chance(record, (4, 2), T0 + 1_001)
    return record


def test_the_families_with_a_bot_have_a_stand_in_and_chess_has_none() -> None:
    assert isinstance(BackgammonFamily(), PlaysForAbsentSeats)
    assert isinstance(GinFamily(), PlaysForAbsentSeats)
    assert not isinstance(ChessFamily(), PlaysForAbsentSeats)


def test_with_the_policy_an_absent_seat_never_forfeits_its_stand_in_falls_due_on_its_turn() -> None:
    record = live_match()
    black_turn = record.last_at_ms
    assert FAMILY.engine.to_move(record.game) == 1
    gone = T0 + 2_000
    record = presence(record, 1, False, gone)
    kinds = [d.kind for d in record.due(FAMILY)]
    assert "disconnect" not in kinds  # no forfeit under this policy
    (stand_in,) = [d for d in record.due(FAMILY) if d.kind == "stand_in"]
    assert (stand_in.at_ms, stand_in.seat) == (gone + AWAY_MS, 1)
    assert record.overdue(FAMILY, gone + AWAY_MS) == (stand_in, None)  # not an end
    # White away while it is Black's turn: nothing is due for White until its own turn.
    white_away = presence(presence(record, 1, True, gone + 10), 0, False, gone + 20)
    assert [d.kind for d in white_away.due(FAMILY)] == ["flag"]
    assert black_turn < gone


def test_without_the_policy_the_platform_rule_forfeits_an_absent_seat() -> None:
    record = presence(live_match(stand_in_after_ms=0), 1, False, T0 + 2_000)
    assert "disconnect" in [d.kind for d in record.due(FAMILY)]
    assert "stand_in" not in [d.kind for d in record.due(FAMILY)]


def test_a_stand_in_action_is_the_seats_own_move_and_is_remembered() -> None:
    record = presence(live_match(), 1, False, T0 + 2_000)
    at = T0 + 2_000 + AWAY_MS
    action = FAMILY.stand_in(record.game, 1)
    assert action is not None
    assert str(action) in FAMILY.engine.legal_actions(record.game, 1)
    payload = {"action": dict(FAMILY.action_to_json(action)), "stand_in": True}
    played = step(FAMILY, record, MatchEvent(record.sequence + 1, EventKind.ACTION, at, payload, 1))
    assert played.stood_in == (False, True)
    assert played.moves_made[1] == record.moves_made[1] + (played.clock_marks != record.clock_marks)


@pytest.mark.parametrize(
    ("winner", "stood_in", "expected"),
    [
        (0, (), rules_pb2.SETTLEMENT_STAKES_PAID),
        (0, (1,), rules_pb2.SETTLEMENT_STAKES_PAID),  # the present player beat the stand-in: a normal loss
        (1, (1,), rules_pb2.SETTLEMENT_REFUNDED),  # the stand-in (or its late returner) won
        (0, (0, 1), rules_pb2.SETTLEMENT_REFUNDED),  # both were away
        (None, (1,), rules_pb2.SETTLEMENT_STAKES_PAID),  # an abort refunds as always
    ],
)
def test_settlement_follows_seed_002(winner: int | None, stood_in: tuple[int, ...], expected: int) -> None:
    termination = Termination.ABORTED if winner is None else Termination.BEAR_OFF
    outcome = Outcome(termination, winner)
    assert settlement(outcome, stood_in) == expected
    result = result_proto(outcome, T0, stood_in)
    assert (list(result.stood_in), result.settlement) == (sorted(stood_in), expected)


def test_in_a_match_the_points_a_stand_in_won_do_not_count() -> None:
    state = BACKGAMMON.new_game(BackgammonOptions(match_to=3))
    ghost = ActionContext(remaining_ms=CLOCKS.remaining_ms, stand_in=True)
    rng = random.Random(7)
    while BACKGAMMON.outcome(state) is None and state.phase.value != "between_games":
        request = BACKGAMMON.chance_needed(state)
        if request is not None:
            state = BACKGAMMON.apply_chance(state, request, (rng.randint(1, 6), rng.randint(1, 6)))
            continue
        seat = BACKGAMMON.to_move(state)
        assert seat is not None
        if seat == 1:  # Black is away all game: its stand-in plays every turn
            action = backgammon_stand_in(state, seat)
            assert action is not None
            state = BACKGAMMON.apply(state, seat, action, ghost)
        else:
            state = BACKGAMMON.apply(state, seat, BACKGAMMON.legal_actions(state, seat)[0], CLOCKS)
    (game,) = state.games
    if game.winner == 1:
        assert state.match.score == (0, 0)
        assert "no points counted" in game.detail
    else:
        assert state.match.score[0] == game.points > 0


@pytest.mark.parametrize("family", ["backgammon", "gin"])
def test_the_stand_ins_always_choose_a_legal_action(family: str) -> None:
    rng = random.Random(11)
    chosen = 0
    for _ in range(6):
        if family == "backgammon":
            engine: Any = BACKGAMMON
            state: Any = BACKGAMMON.new_game(BackgammonOptions(cube=True, match_to=3))
            stand_in: Any = backgammon_stand_in
        else:
            engine, state, stand_in = GIN, GIN.new_game(GinOptions()), gin_stand_in
        for _ in range(3_000):
            if engine.outcome(state) is not None:
                break
            request: ChanceRequest | None = engine.chance_needed(state)
            if request is not None:
                state = engine.apply_chance(state, request, _draw(rng, request))
                continue
            seat = engine.to_move(state)
            action = stand_in(state, seat)
            if action is None:  # only the continue step between backgammon games is the player's own
                assert engine.legal_actions(state, seat) == ["continue"]
                action = "continue"
            else:
                assert action in engine.legal_actions(state, seat)
                chosen += 1
            state = engine.apply(state, seat, action, CLOCKS)
        assert engine.outcome(state) is not None
    assert chosen > 200


def _draw(rng: random.Random, request: ChanceRequest) -> tuple[int, ...]:
    if request.kind == "shuffle":
        return tuple(rng.sample(range(request.bound), request.bound))
    if request.kind == "coin":
        return (rng.randint(0, 1),)
    return (rng.randint(1, 6), rng.randint(1, 6))


# -- through the actor: the wake-up plays the absent seat's turns, durably ------------------------------


class SixFive:
    """A fairness stand-in: the opening roll gives White 6 and Black 5, every later roll 6-5."""

    async def draw(self, match_id: str, request: ChanceRequest) -> tuple[int, ...]:
        return (6, 5)

    async def seeds(self, match_id: str) -> int:
        return 2

    async def close(self) -> None:
        return None


async def test_the_actor_plays_an_absent_seat_until_its_player_is_back(migrated_url: str) -> None:
    time = SteppedTime(T0)
    store = open_store(migrated_url, "backgammon")
    event = MatchEvent(
        1, EventKind.CREATED, T0, setup(match_id="backgammon.0.actor").to_json(), None, "create"
    )
    await store.create(event)
    actor = MatchActor(FAMILY, [event], store, NoWakeUps(), time, chance=SixFive())  # type: ignore[arg-type]
    await actor.start()
    for seat in (0, 1):
        await actor.set_presence(seat, True)
    assert FAMILY.engine.to_move(actor.record.game) == 0  # White opened with 6-5
    time.at_ms = T0 + 1_000
    play = actor.record.game.plays[0].notation
    await actor.submit(0, "w1", EventKind.ACTION, {"action": {"notation": play}})
    time.at_ms = T0 + 2_000
    await actor.set_presence(1, False)  # Black goes away on its turn
    time.at_ms = T0 + 2_000 + AWAY_MS - 1
    await actor.wake()
    assert not actor.record.stood_in[1]  # not yet
    time.at_ms = T0 + 2_000 + AWAY_MS
    for _ in range(4):  # roll, then the play (each a wake-up: the dice come in between)
        await actor.wake()
    ghost = [e for e in await actor.log() if e.payload.get("stand_in")]
    assert ghost
    assert all(e.seat == 1 and e.idempotency_key is None and e.payload.get("description") for e in ghost)
    assert actor.record.stood_in == (False, True)
    assert FAMILY.engine.to_move(actor.record.game) == 0  # the stand-in played Black's turn
    # Black comes back: from now on its turns are its own.
    await actor.set_presence(1, True)
    assert [d.kind for d in actor.record.due(FAMILY)] == ["flag"]
    stored = await store.load_log("backgammon.0.actor")
    assert rebuild(FAMILY, stored) == actor.record


class Deals:
    """A fairness stand-in for gin rummy: seat 0 deals first, every shuffle is the deck in order."""

    async def draw(self, match_id: str, request: ChanceRequest) -> tuple[int, ...]:
        return tuple(range(request.bound)) if request.kind == "shuffle" else (0,)

    async def seeds(self, match_id: str) -> int:
        return 2

    async def close(self) -> None:
        return None


async def test_the_same_mechanism_plays_gin_rummy_for_an_absent_seat(migrated_url: str) -> None:
    gin = GinFamily()
    time = SteppedTime(T0)
    store = open_store(migrated_url, "gin")
    gin_setup = MatchSetup(
        match_id="gin.0.ghost",
        family="gin",
        players=("alice", "bob"),
        options=dict(gin.options_to_json(GinOptions())),
        time_control=TimeControl.sudden_death(10 * 60_000),
        fairness_commitment="c" * 64,
        first_move_timeout_ms=600_000,
        disconnect_forfeit_ms=60_000,
        created_at_ms=T0,
        stand_in_after_ms=AWAY_MS,
    )
    event = MatchEvent(1, EventKind.CREATED, T0, gin_setup.to_json(), None, "create")
    await store.create(event)
    actor = MatchActor(gin, [event], store, NoWakeUps(), time, chance=Deals())  # type: ignore[arg-type]
    await actor.start()
    for seat in (0, 1):
        await actor.set_presence(seat, True)
    first = gin.engine.to_move(actor.record.game)
    assert first is not None
    time.at_ms = T0 + 1_000
    await actor.set_presence(first, False)  # the seat to act first is away from the start of play...
    time.at_ms = T0 + 1_000 + AWAY_MS
    await actor.wake()
    assert not actor.record.stood_in[first]  # ...but play has not begun: the no-show rule applies first
    assert [d.kind for d in actor.record.due(gin)] == ["first_move"]
    await actor.set_presence(first, True)
    answer = gin.engine.legal_actions(actor.record.game, first)[0]
    await actor.submit(first, "a1", EventKind.ACTION, {"action": {"notation": answer}})
    other = 1 - first
    if gin.engine.to_move(actor.record.game) != other:  # (the upcard offer passed back, say)
        nxt = gin.engine.to_move(actor.record.game)
        assert nxt is not None
        await actor.submit(
            nxt,
            "a2",
            EventKind.ACTION,
            {"action": {"notation": gin.engine.legal_actions(actor.record.game, nxt)[0]}},
        )
    away_at = time.at_ms = time.at_ms + 1_000
    mover = gin.engine.to_move(actor.record.game)
    assert mover is not None
    await actor.set_presence(mover, False)
    time.at_ms = away_at + AWAY_MS
    for _ in range(3):
        await actor.wake()
    ghost = [e for e in await actor.log() if e.payload.get("stand_in")]
    assert ghost
    assert all(e.seat == mover for e in ghost)
    assert actor.record.stood_in[mover]
    assert rebuild(gin, await store.load_log("gin.0.ghost")) == actor.record
