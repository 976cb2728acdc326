"""Server downtime is not a player's time (the ``resumed`` event), and presence as leases: the pure model
on hand-built logs, the lease table, and the actor and runtime with the test's own time."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from libs.clocks import TimeControl
from libs.engines.base import Termination
from libs.engines.chess import ChessOptions
from libs.match.actor import rebuild
from libs.match.model import Due, EventKind, MatchEvent, MatchRecord, MatchSetup, MatchStatus, step
from libs.match.presence import DIRECT, RECOVERED, SeatLeases, clamp_lease_ms
from libs.match.runtime import MatchRuntime
from libs.match.store import MatchStore
from libs.persistence import Database
from services.rules_chess.family import ChessFamily
from tests.libs.match.test_model import FAMILY, T0, TIMEOUT, act, new_match, presence
from tests.libs.match.test_restart import TestDeadlines, TestTime

BASE = 5 * 60_000


def resumed(record: MatchRecord, down_from_ms: int, at_ms: int) -> MatchRecord:
    payload = {"down_from_ms": down_from_ms, "down_ms": at_ms - down_from_ms}
    return step(FAMILY, record, MatchEvent(record.sequence + 1, EventKind.RESUMED, at_ms, payload))


def gone(record: MatchRecord, seat: int, at_ms: int, since_ms: int) -> MatchRecord:
    payload = {"connected": False, "since_ms": since_ms}
    return step(FAMILY, record, MatchEvent(record.sequence + 1, EventKind.PRESENCE, at_ms, payload, seat))


# -- the model: a resumed event charges the outage to nobody ------------------------------------------------


def test_the_side_to_move_resumes_with_the_time_it_had_when_the_shard_went_down() -> None:
    record = act(act(new_match(), 0, "e4", T0 + 1_000), 1, "e5", T0 + 3_000)  # White to move from T0+3 s
    went_down, back = T0 + 10_000, T0 + 16_400  # down 6.4 s, White thinking since T0 + 3 s
    after = resumed(record, went_down, back)
    assert after.last_event.kind is EventKind.RESUMED
    assert after.sequence == record.sequence + 1
    # White's clock stood at 5 min - 7 s when the shard went down, and runs on from there at the restart.
    assert after.clock.remaining_ms(0, back) == BASE - 7_000
    assert after.clock.remaining_ms(0, back + 2_000) == BASE - 9_000
    assert after.clock.remaining_ms(1, back) == record.clock.remaining_ms(1, back)  # Black's did not run
    assert after.clock.flag_at_ms() == (record.clock.flag_at_ms() or 0) + 6_400
    # White's next move is charged its thinking time without the outage: the [%clk] mark shows it.
    moved = act(after, 0, "Nf3", back + 1_000)
    assert moved.clock_marks[-1].remaining_ms == BASE - 8_000
    # The same log replayed gives the same clocks.
    log = [new_match().last_event]
    for event in [*_events(record), after.last_event, moved.last_event]:
        log.append(event)
    assert rebuild(FAMILY, log).clock == moved.clock


def test_the_outage_starts_no_earlier_than_the_last_event() -> None:
    # A heartbeat taken before the last move cannot make the player who moved after it pay twice: the
    # shard was up when it logged the move.
    record = act(act(new_match(), 0, "e4", T0 + 1_000), 1, "e5", T0 + 3_000)
    after = resumed(record, T0 + 2_000, T0 + 9_000)
    assert after.clock.remaining_ms(0, T0 + 9_000) == BASE  # White's turn began at the move at T0 + 3 s


def test_a_disconnect_forfeit_count_stops_during_the_outage() -> None:
    record = act(act(new_match(), 0, "e4", T0 + 1_000), 1, "e5", T0 + 2_000)
    record = presence(record, 1, True, T0 + 2_100)
    record = gone(record, 1, T0 + 5_000, T0 + 4_000)  # Black's lease ran out: last seen at T0 + 4 s
    assert record.disconnected_since == (T0, T0 + 4_000)  # White never connected: since creation
    assert Due(T0 + 4_000 + TIMEOUT, "disconnect", 1) in record.due(FAMILY)
    after = resumed(record, T0 + 30_000, T0 + 40_000)  # down 10 s
    # White never connected (counted from the first move), Black from its last renewal: both 10 s later.
    forfeits = [d for d in after.due(FAMILY) if d.kind == "disconnect"]
    assert forfeits == [
        Due(T0 + 1_000 + TIMEOUT + 10_000, "disconnect", 0),
        Due(T0 + 4_000 + TIMEOUT + 10_000, "disconnect", 1),
    ]


def test_the_first_move_count_stops_during_the_outage() -> None:
    record = resumed(new_match(), T0 + 20_000, T0 + 25_000)
    assert record.status is MatchStatus.WAITING
    assert record.due(FAMILY) == [Due(T0 + TIMEOUT + 5_000, "first_move", 0)]


def test_a_resumed_event_without_an_outage_or_after_the_end_changes_nothing_but_the_sequence() -> None:
    record = act(new_match(), 0, "e4", T0 + 1_000)
    same = resumed(record, T0 + 1_000, T0 + 1_000)
    assert (same.clock, same.disconnected_since, same.turn_since_ms) == (
        record.clock,
        record.disconnected_since,
        record.turn_since_ms,
    )


def test_a_disconnection_is_dated_from_the_last_renewal_not_from_when_it_was_noticed() -> None:
    record = act(act(new_match(), 0, "e4", T0 + 1_000), 1, "e5", T0 + 2_000)
    record = presence(presence(record, 0, True, T0 + 2_100), 1, True, T0 + 2_100)
    record = gone(record, 0, T0 + 12_000, T0 + 6_000)
    assert record.disconnected_since == (T0 + 6_000, None)
    assert record.due(FAMILY)[0] == Due(T0 + 6_000 + TIMEOUT, "disconnect", 0)
    # A since_ms later than the event itself is read as the event's instant.
    later = gone(presence(record, 0, True, T0 + 13_000), 0, T0 + 14_000, T0 + 99_000)
    assert later.disconnected_since[0] == T0 + 14_000


def _events(record: MatchRecord) -> list[MatchEvent]:
    """The two moves that made ``record`` in the first test (e4 at T0 + 1 s, e5 at T0 + 3 s)."""
    first = act(new_match(), 0, "e4", T0 + 1_000)
    assert act(first, 1, "e5", T0 + 3_000).clock == record.clock
    return [first.last_event, record.last_event]


# -- the lease table -----------------------------------------------------------------------------------------


def test_a_seat_is_connected_while_any_lease_is_live() -> None:
    leases = SeatLeases(2)
    leases.renew(0, "gateway-a", 1_000, 6_000)
    leases.renew(0, "gateway-b", 2_000, 6_000)
    leases.release(0, "gateway-a", 3_000)
    assert leases.connected(0)
    assert leases.holders(0) == {"gateway-b"}
    leases.renew(0, "gateway-b", 4_000, 6_000)
    leases.expire(9_999)
    assert leases.connected(0)
    leases.expire(10_000)  # the lease renewed at 4 s runs out at 10 s
    assert not leases.connected(0)
    # Last vouched for at the renewal of 4 s (the release at 3 s was earlier).
    assert leases.since_ms(0, 10_000) == 4_000
    assert leases.next_expiry_ms() is None


def test_a_release_dates_the_disconnection_and_a_new_lease_starts_afresh() -> None:
    leases = SeatLeases(2)
    leases.renew(1, "gateway-a", 1_000, 6_000)
    leases.release(1, "gateway-a", 2_500)
    assert not leases.connected(1)
    assert leases.since_ms(1, 2_600) == 2_500
    leases.renew(1, "gateway-a", 3_000, 6_000)
    leases.renew(1, DIRECT, 3_100, None)  # SetPresence: never expires
    leases.expire(60_000)
    assert leases.holders(1) == {DIRECT}
    assert leases.next_expiry_ms() is None
    assert clamp_lease_ms(0, 6_000) == 6_000
    assert clamp_lease_ms(10, 6_000) == 1_000
    assert clamp_lease_ms(600_000, 6_000) == 60_000


# -- the actor and the runtime with the test's time ---------------------------------------------------------

CHESS = ChessFamily()


class Shard:
    def __init__(self, url: str, time: TestTime) -> None:
        self.time = time
        self.db = Database(url)
        self.deadlines = TestDeadlines()
        self.runtime: MatchRuntime | None = None

    async def start(self, down_since_ms: int | None = None) -> MatchRuntime:
        self.deadlines = TestDeadlines()
        store = MatchStore(self.db, "chess", "0")
        self.runtime = MatchRuntime(
            CHESS,
            0,
            store,
            self.deadlines,  # type: ignore[arg-type]
            self.time,
            down_since_ms=down_since_ms,
            lease_ms=6_000,
        )
        await self.runtime.start()
        return self.runtime

    async def stop(self) -> None:
        assert self.runtime is not None
        await self.runtime.close()
        self.runtime = None


@pytest.fixture
async def shard(migrated_url: str) -> AsyncIterator[Shard]:
    running = Shard(migrated_url, TestTime(T0))
    yield running
    if running.runtime is not None:
        await running.stop()
    await running.db.dispose()


async def _create(runtime: MatchRuntime, match_id: str, now: int, forfeit_ms: int = TIMEOUT) -> None:
    setup = MatchSetup(
        match_id=match_id,
        family="chess",
        players=("alice", "bob"),
        options=CHESS.options_to_json(ChessOptions()),
        time_control=TimeControl.sudden_death(BASE),
        fairness_commitment="",
        first_move_timeout_ms=TIMEOUT,
        disconnect_forfeit_ms=forfeit_ms,
        created_at_ms=now,
    )
    await runtime.create(setup, f"create-{match_id}")


def _move(notation: str) -> dict[str, object]:
    return {"action": dict(CHESS.action_to_json(CHESS.action_from_json({"notation": notation})))}


async def test_a_lease_that_runs_out_disconnects_the_seat_as_of_its_last_renewal(shard: Shard) -> None:
    runtime = await shard.start()
    match_id = "chess.0.lease"
    await _create(runtime, match_id, shard.time.now, forfeit_ms=10_000)
    actor = await runtime.get(match_id)
    held = [(match_id, 0), (match_id, 1)]
    await runtime.renew_presence("gateway-a", held, [], 6_000)
    assert actor.record.connected_seats() == (0, 1)
    sequence = actor.record.sequence
    await runtime.renew_presence("gateway-a", held, [], 6_000)  # a plain renewal logs nothing
    assert actor.record.sequence == sequence
    shard.time.now += 1_000
    await actor.submit(0, "k1", EventKind.ACTION, _move("e4"))
    await actor.submit(1, "k2", EventKind.ACTION, _move("e5"))
    # Gateway B also streams Black; gateway A stops renewing (it crashed) after its renewal at T0 + 2 s.
    shard.time.now = T0 + 2_000
    await runtime.renew_presence("gateway-a", held, [], 6_000)
    await runtime.renew_presence("gateway-b", [(match_id, 1)], [], 6_000)
    for now in (T0 + 4_000, T0 + 6_000, T0 + 7_000):
        shard.time.now = now
        await runtime.renew_presence("gateway-b", [(match_id, 1)], [], 6_000)
    shard.time.now = T0 + 7_999
    await actor.expire_presence()
    assert actor.record.connected_seats() == (0, 1)
    shard.time.now = T0 + 8_100  # A's lease ran out at T0 + 8 s: White is gone, Black stays (B)
    await actor.expire_presence()
    assert actor.record.connected_seats() == (1,)
    event = actor.record.last_event
    assert (event.kind, event.seat, event.at_ms) == (EventKind.PRESENCE, 0, T0 + 8_100)
    assert event.payload == {"connected": False, "since_ms": T0 + 2_000}
    # The forfeit falls due 10 s after the last renewal, not after the expiry was noticed.
    assert actor.record.due(CHESS)[0] == Due(T0 + 12_000, "disconnect", 0)
    shard.time.now = T0 + 12_000
    await shard.deadlines.deliver_due(shard.time.now)
    record = actor.record
    assert record.outcome is not None
    assert (record.outcome.termination, record.outcome.winner) == (Termination.DISCONNECT, 1)
    assert record.ended_at_ms == T0 + 12_000


async def test_a_release_from_one_gateway_leaves_a_seat_held_by_another_connected(shard: Shard) -> None:
    runtime = await shard.start()
    match_id = "chess.0.two"
    await _create(runtime, match_id, shard.time.now)
    actor = await runtime.get(match_id)
    await runtime.renew_presence("gateway-a", [(match_id, 0)], [], 6_000)
    await runtime.renew_presence("gateway-b", [(match_id, 0)], [], 6_000)
    shard.time.now += 500
    await runtime.renew_presence("gateway-a", [], [(match_id, 0)], 6_000)
    assert actor.record.connected_seats() == (0,)
    shard.time.now += 500
    await runtime.renew_presence("gateway-b", [], [(match_id, 0)], 6_000)
    assert actor.record.connected_seats() == ()
    assert actor.record.last_event.payload == {"connected": False, "since_ms": T0 + 1_000}
    # Unknown matches, other shards' matches and seats out of range are named back.
    _, ignored = await runtime.renew_presence(
        "gateway-a", [("chess.0.nope", 0), (match_id, 7), (match_id, 1)], [], 6_000
    )
    assert ignored == [("chess.0.nope", 0), (match_id, 7)]


async def test_a_restart_credits_the_outage_and_gives_connected_seats_a_fresh_lease(shard: Shard) -> None:
    runtime = await shard.start()
    match_id = "chess.0.restart"
    await _create(runtime, match_id, shard.time.now)
    actor = await runtime.get(match_id)
    await runtime.renew_presence("gateway-a", [(match_id, 0), (match_id, 1)], [], 6_000)
    shard.time.now += 1_000
    await actor.submit(0, "k1", EventKind.ACTION, _move("e4"))
    shard.time.now += 2_000  # Black thinks 2 s, then the shard dies: its last heartbeat 250 ms later
    went_down = shard.time.now + 250
    black_left = actor.record.clock.remaining_ms(1, went_down)
    await shard.stop()

    shard.time.now = went_down + 6_400
    runtime = await shard.start(down_since_ms=went_down)
    actor = await runtime.get(match_id)
    record = actor.record
    event = record.last_event
    assert event.kind is EventKind.RESUMED
    assert event.payload["down_from_ms"] == went_down
    assert event.payload["down_ms"] == 6_400
    assert event.at_ms == shard.time.now
    assert record.clock.remaining_ms(1, shard.time.now) == black_left  # nothing of the outage charged
    assert shard.deadlines.armed[match_id] == shard.time.now + black_left  # the flag re-armed
    # Both seats were connected in the log: each has a fresh lease of one period, in nobody's name.
    assert actor.leases.holders(0) == actor.leases.holders(1) == {RECOVERED}
    assert record.connected_seats() == (0, 1)
    # Only White's gateway renews: Black is logged gone when the recovered lease runs out, as of the
    # restart (the last instant anybody vouched for it).
    restarted = shard.time.now
    shard.time.now += 2_000
    await runtime.renew_presence("gateway-c", [(match_id, 0)], [], 6_000)
    shard.time.now = restarted + 6_000
    await actor.expire_presence()
    assert actor.record.connected_seats() == (0,)
    assert actor.record.last_event.payload == {"connected": False, "since_ms": restarted}
    # The log replays to the same record.
    log = await runtime.store.load_log(match_id)
    assert rebuild(CHESS, log).clock == actor.record.clock


async def test_a_flag_that_fell_before_the_outage_still_ends_the_game(shard: Shard) -> None:
    runtime = await shard.start()
    match_id = "chess.0.flagged"
    await _create(runtime, match_id, shard.time.now, forfeit_ms=10 * 60_000)
    actor = await runtime.get(match_id)
    await actor.submit(0, "k1", EventKind.ACTION, _move("e4"))
    flag_at = shard.time.now + BASE
    await shard.stop()
    # The shard was up (but never woke the match) until after Black's flag fell, then down for 5 s.
    shard.time.now = flag_at + 5_000
    runtime = await shard.start(down_since_ms=flag_at + 1_000)
    record = (await runtime.get(match_id)).record
    assert record.outcome is not None
    assert record.outcome.termination is Termination.TIMEOUT
    assert record.ended_at_ms == flag_at
    assert [e.kind for e in await runtime.store.load_log(match_id)][-1] is EventKind.END
