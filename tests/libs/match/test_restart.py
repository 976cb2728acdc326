"""A restarted runtime ends what fell due while it was down, at the instant it fell due, and re-arms the
wake-ups of everything else. The time is the test's: no sleeping, every instant exact."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from libs.clocks import TimeControl
from libs.engines.base import Termination
from libs.engines.chess import ChessOptions
from libs.match.deadlines import OnWake
from libs.match.model import EventKind, MatchSetup, MatchStatus
from libs.match.runtime import MatchRuntime
from libs.match.store import MatchStore
from libs.persistence import Database
from libs.runtime.timesource import ServiceTime
from services.rules_chess.family import ChessFamily

FAMILY = ChessFamily()
BASE_MS = 30_000
FIRST_MOVE_MS = 60_000


class TestTime(ServiceTime):
    """A service time that moves only when the test says so."""

    __test__ = False

    def __init__(self, now_ms: int) -> None:
        super().__init__()
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now


class TestDeadlines:
    """Wake-ups as the clock service gives them: armed per match, delivered once their instant has come
    (here: when the test says the time has come)."""

    __test__ = False

    def __init__(self) -> None:
        self.armed: dict[str, int] = {}
        self._on_wake: OnWake | None = None

    async def start(self, on_wake: OnWake) -> None:
        self._on_wake = on_wake

    async def arm(self, match_id: str, deadline_ms: int) -> None:
        self.armed[match_id] = deadline_ms

    async def cancel(self, match_id: str) -> None:
        self.armed.pop(match_id, None)

    async def deliver_due(self, now_ms: int) -> list[str]:
        """Deliver every wake-up whose instant is ``now_ms`` or earlier; returns the matches woken."""
        assert self._on_wake is not None
        woken = [m for m, at in self.armed.items() if at <= now_ms]
        for match_id in woken:
            del self.armed[match_id]
            await self._on_wake(match_id)
        return woken

    async def close(self) -> None:
        return None


class Shard:
    """One rules shard's runtime on a database, restartable."""

    def __init__(self, url: str, time: TestTime) -> None:
        self.url = url
        self.time = time
        self.db = Database(url)
        self.deadlines = TestDeadlines()
        self.runtime: MatchRuntime | None = None

    async def start(self) -> MatchRuntime:
        self.deadlines = TestDeadlines()
        store = MatchStore(self.db, "chess", "0")
        self.runtime = MatchRuntime(FAMILY, 0, store, self.deadlines, self.time)  # type: ignore[arg-type]
        await self.runtime.start()
        for actor in self.runtime.live():
            await actor.deadline_sent()
        return self.runtime

    async def stop(self) -> None:
        assert self.runtime is not None
        await self.runtime.close()
        self.runtime = None


@pytest.fixture
async def shard(migrated_url: str) -> AsyncIterator[Shard]:
    running = Shard(migrated_url, TestTime(1_700_000_000_000))
    yield running
    if running.runtime is not None:
        await running.stop()
    await running.db.dispose()


async def _create(runtime: MatchRuntime, match_id: str, time: TestTime) -> None:
    setup = MatchSetup(
        match_id=match_id,
        family="chess",
        players=("alice", "bob"),
        options=FAMILY.options_to_json(ChessOptions()),
        time_control=TimeControl.sudden_death(BASE_MS),
        fairness_commitment="",
        first_move_timeout_ms=FIRST_MOVE_MS,
        disconnect_forfeit_ms=10 * 60_000,
        created_at_ms=time.now_ms(),
    )
    await runtime.create(setup, f"create-{match_id}")


def _move(notation: str) -> dict[str, object]:
    return {"action": dict(FAMILY.action_to_json(FAMILY.action_from_json({"notation": notation})))}


async def _connect_both(runtime: MatchRuntime, match_id: str) -> None:
    actor = await runtime.get(match_id)
    for seat in (0, 1):
        await actor.set_presence(seat, True)


async def test_a_flag_that_fell_while_down_ends_the_game_at_the_flag_instant(shard: Shard) -> None:
    runtime = await shard.start()
    match_id = "chess.0.outage"
    await _create(runtime, match_id, shard.time)
    await _connect_both(runtime, match_id)
    shard.time.now += 1_000
    await (await runtime.get(match_id)).submit(0, "k1", EventKind.ACTION, _move("e4"))
    e4_at = shard.time.now
    shard.time.now += 4_000
    await (await runtime.get(match_id)).submit(1, "k2", EventKind.ACTION, _move("e5"))
    e5_at = shard.time.now
    flag_at = e5_at + BASE_MS  # White's clock: the first move was not charged
    await shard.stop()

    shard.time.now = flag_at + 45_000  # the service was down when White's flag fell
    restarted_at = shard.time.now
    runtime = await shard.start()
    actor = await runtime.get(match_id)
    record = actor.record
    assert record.status is MatchStatus.FINISHED
    assert record.outcome is not None
    assert record.outcome.termination is Termination.TIMEOUT
    assert record.outcome.winner == 1
    assert record.ended_at_ms == flag_at  # not the restart instant
    assert record.last_event.kind is EventKind.END
    assert record.last_event.at_ms == restarted_at  # logged when it was noticed
    assert record.clock.remaining_ms(0, restarted_at) == 0
    assert record.clock.remaining_ms(1, restarted_at) == BASE_MS - (e5_at - e4_at)
    assert match_id not in shard.deadlines.armed  # nothing left to wake up for
    # The database says the same: the result row carries the flag instant.
    result = await MatchStore(shard.db, "chess", "0").result(match_id)
    assert result is not None
    assert result.result["ended_at_ms"] == flag_at
    assert result.result["termination"] == "timeout"


async def test_a_restart_re_arms_every_wake_up_and_an_untouched_flag_still_falls(shard: Shard) -> None:
    runtime = await shard.start()
    playing, waiting = "chess.0.playing", "chess.0.waiting"
    await _create(runtime, playing, shard.time)
    await _connect_both(runtime, playing)
    shard.time.now += 2_000
    await (await runtime.get(playing)).submit(0, "k1", EventKind.ACTION, _move("d4"))
    flag_at = shard.time.now + BASE_MS  # Black's flag
    await _create(runtime, waiting, shard.time)
    abort_at = shard.time.now + FIRST_MOVE_MS  # nobody moves in the second match: a no-show
    await shard.stop()

    shard.time.now += 10_000  # down for 10 s: nothing fell due meanwhile
    runtime = await shard.start()
    # Re-armed from the log alone: Black's flag, and the no-show abort of the match nobody played.
    assert shard.deadlines.armed == {playing: flag_at, waiting: abort_at}
    assert (await runtime.get(playing)).record.status is MatchStatus.LIVE

    # Nobody touches either match. A millisecond before the flag nothing is due yet...
    shard.time.now = flag_at - 1
    assert await shard.deadlines.deliver_due(shard.time.now) == []
    # ...then the wake-up comes and the flag falls, at its instant.
    shard.time.now = flag_at + 3  # (a wake-up is never early, and may be a little late)
    assert await shard.deadlines.deliver_due(shard.time.now) == [playing]
    record = (await runtime.get(playing)).record
    assert record.outcome is not None
    assert record.outcome.termination is Termination.TIMEOUT
    assert record.outcome.winner == 0
    assert record.ended_at_ms == flag_at

    shard.time.now = abort_at
    assert await shard.deadlines.deliver_due(shard.time.now) == [waiting]
    aborted = (await runtime.get(waiting)).record
    assert aborted.status is MatchStatus.ABORTED
    assert aborted.ended_at_ms == abort_at
    assert shard.deadlines.armed == {}


async def test_a_closed_runtime_hands_out_no_actor_and_a_closed_actor_takes_no_watcher(shard: Shard) -> None:
    """A shard that lost its ownership closes its runtime and serves a new one once it holds the shard
    again. A watch opened in between must be refused (the client retries and reaches the new runtime),
    never attached to an actor of the closed one, whose updates would never come: the stream would hang.
    """
    from libs.match.actor import MatchClosed
    from libs.runtime.errors import Unavailable

    runtime = await shard.start()
    match_id = "chess.0.closed"
    await _create(runtime, match_id, shard.time)
    actor = await runtime.get(match_id)
    assert runtime.live_count() == 1
    await runtime.close()
    shard.runtime = None
    with pytest.raises(Unavailable, match="not serving right now"):
        await runtime.get(match_id)
    with pytest.raises(Unavailable, match="not serving right now"):
        runtime.live_count()  # placement must not believe a load the closed runtime no longer serves
    with pytest.raises(Unavailable, match="not serving right now"):
        await runtime.get("chess.0.unknown")  # not even read from the log
    with pytest.raises(Unavailable):
        await _create(runtime, "chess.0.other", shard.time)
    with pytest.raises(MatchClosed):
        await anext(aiter(actor.watch(0)))

    runtime = await shard.start()  # the new runtime serves the match, watchers included
    assert runtime.live_count() == 1
    first = await anext(aiter((await runtime.get(match_id)).watch(0)))
    assert first.sequence >= 1
