"""The match actor without a server: the clock is checked on every action, wake-ups or not."""

from __future__ import annotations

import asyncio
import json

import pytest

from libs.clocks import TimeControl
from libs.engines.base import Termination
from libs.engines.chess import ChessOptions
from libs.match.actor import MatchActor, rebuild
from libs.match.model import EventKind, MatchEvent, MatchSetup
from libs.match.store import MatchStore
from libs.persistence import Database
from libs.runtime.errors import FailedPrecondition
from libs.runtime.timesource import ServiceTime
from services.rules_chess.family import ChessFamily

FAMILY = ChessFamily()


class NoWakeUps:
    """Deadlines that never fire: only the actor's own checks can end a match."""

    def __init__(self) -> None:
        self.armed: dict[str, int] = {}

    async def start(self, on_wake: object) -> None:
        return None

    async def arm(self, match_id: str, deadline_ms: int) -> None:
        self.armed[match_id] = deadline_ms

    async def cancel(self, match_id: str) -> None:
        self.armed.pop(match_id, None)

    async def close(self) -> None:
        return None


def _created(match_id: str, now: int, base_ms: int) -> MatchEvent:
    setup = MatchSetup(
        match_id=match_id,
        family="chess",
        players=("alice", "bob"),
        options=FAMILY.options_to_json(ChessOptions()),
        time_control=TimeControl.sudden_death(base_ms),
        fairness_commitment="",
        first_move_timeout_ms=60_000,
        disconnect_forfeit_ms=60_000,
        created_at_ms=now,
    )
    return MatchEvent(1, EventKind.CREATED, now, setup.to_json(), None, "create")


def _move(notation: str) -> dict[str, object]:
    return {"action": dict(FAMILY.action_to_json(FAMILY.action_from_json({"notation": notation})))}


async def test_a_move_after_the_flag_loses_even_without_a_wake_up(migrated_url: str) -> None:
    db = Database(migrated_url)
    store = MatchStore(db, "chess", "0")
    time = ServiceTime()
    deadlines = NoWakeUps()
    event = _created("chess.0.late", time.now_ms(), base_ms=200)
    await store.create(event)
    actor = MatchActor(FAMILY, [event], store, deadlines, time)  # type: ignore[arg-type]
    await actor.start()
    await actor.submit(0, "k1", EventKind.ACTION, _move("e4"))
    await actor.deadline_sent()
    assert deadlines.armed["chess.0.late"] >= time.now_ms()  # Black's flag
    await asyncio.sleep(0.3)
    with pytest.raises(FailedPrecondition, match="over"):
        await actor.submit(1, "k2", EventKind.ACTION, _move("e5"))
    outcome = actor.record.outcome
    assert outcome is not None
    assert outcome.termination is Termination.TIMEOUT
    assert outcome.winner == 0
    assert actor.record.ended_at_ms == actor.record.clock_marks[0].at_ms + 200
    # the log says the same after a restart
    log = await store.load_log("chess.0.late")
    assert [e.kind for e in log] == [EventKind.CREATED, EventKind.ACTION, EventKind.END]
    assert rebuild(FAMILY, log).outcome == outcome
    assert "e5" not in json.dumps([dict(e.payload) for e in log])
    await store.close()
    await db.dispose()


async def test_a_slow_watcher_is_cut_off_and_never_blocks_the_match(
    migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from libs.match import actor as actor_module
    from libs.runtime.errors import ResourceExhausted

    monkeypatch.setattr(actor_module, "WATCHER_QUEUE_LIMIT", 3)
    db = Database(migrated_url)
    store = MatchStore(db, "chess", "0")
    time = ServiceTime()
    event = _created("chess.0.slow", time.now_ms(), base_ms=60_000)
    await store.create(event)
    actor = MatchActor(FAMILY, [event], store, NoWakeUps(), time)  # type: ignore[arg-type]
    stream = actor.watch(1)
    first = asyncio.ensure_future(stream.__anext__())  # registered, then never read again
    await asyncio.sleep(0)
    for ply, notation in enumerate(["e4", "e5", "Nf3", "Nc6", "Bb5", "a6"]):
        await asyncio.wait_for(actor.submit(ply % 2, f"k{ply}", EventKind.ACTION, _move(notation)), 2)
    assert actor.record.sequence == 7
    received = [await first]

    async def drain() -> None:
        while True:
            received.append(await stream.__anext__())

    with pytest.raises(ResourceExhausted, match="reconnect"):
        await drain()
    # the one it was waiting for, then the three the queue held; the rest it must catch up on by reconnecting
    assert [r.sequence for r in received] == [2, 3, 4, 5]
    await store.close()
    await db.dispose()


async def test_an_overflowed_watcher_queue_stops_growing(monkeypatch: pytest.MonkeyPatch) -> None:
    from libs.match import actor as actor_module

    monkeypatch.setattr(actor_module, "WATCHER_QUEUE_LIMIT", 3)
    record = rebuild(FAMILY, [_created("chess.0.queue", 1_000, base_ms=60_000)])
    watcher = actor_module._Watcher()
    for _ in range(3):
        watcher.offer(record)
    assert (watcher.queue.qsize(), watcher.overflowed) == (3, False)
    for _ in range(500):  # a match that goes on while nobody reads
        watcher.offer(record)
    assert watcher.overflowed
    assert watcher.queue.qsize() == 4  # the three updates and the one end marker, nothing more
    items = [watcher.queue.get_nowait() for _ in range(4)]
    assert items == [record, record, record, None]


class CountingWakeUps(NoWakeUps):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int | None]] = []

    async def arm(self, match_id: str, deadline_ms: int) -> None:
        self.calls.append(("arm", deadline_ms))
        await super().arm(match_id, deadline_ms)

    async def cancel(self, match_id: str) -> None:
        self.calls.append(("cancel", None))
        await super().cancel(match_id)


async def test_an_earlier_wake_up_is_kept_a_sooner_one_is_armed_and_the_end_cancels(
    migrated_url: str,
) -> None:
    db = Database(migrated_url)
    store = MatchStore(db, "chess", "0")
    time = ServiceTime()
    deadlines = CountingWakeUps()
    event = _created("chess.0.wakes", time.now_ms(), base_ms=600_000)
    await store.create(event)
    actor = MatchActor(FAMILY, [event], store, deadlines, time)  # type: ignore[arg-type]
    await actor.start()
    await actor.deadline_sent()
    first_move_due = event.at_ms + 60_000
    assert deadlines.calls == [("arm", first_move_due)]  # White's first-move timeout
    for ply, notation in enumerate(["e4", "e5", "Nf3", "Nc6"]):
        await actor.submit(ply % 2, f"k{ply}", EventKind.ACTION, _move(notation))
    await actor.deadline_sent()
    # Every later due instant (the flags, minutes away) keeps the earlier wake-up.
    assert deadlines.calls == [("arm", first_move_due)]
    # Black disconnects: the forfeit (60 s from now) is later than the armed instant too, so still no
    # call. A match that ends cancels its wake-up.
    await actor.set_presence(1, False)
    await actor.submit(0, "resign", EventKind.RESIGN, {})
    await actor.deadline_sent()
    assert deadlines.calls == [("arm", first_move_due), ("cancel", None)]
    # A wake-up that fires re-arms for what is due then (here: nothing, the match is over).
    await actor.wake()
    await actor.deadline_sent()
    assert deadlines.calls[-1] == ("cancel", None)
    await store.close()
    await db.dispose()


async def test_a_sooner_deadline_than_the_armed_one_is_armed_at_once(migrated_url: str) -> None:
    db = Database(migrated_url)
    store = MatchStore(db, "chess", "0")
    time = ServiceTime()
    deadlines = CountingWakeUps()
    event = _created("chess.0.sooner", time.now_ms(), base_ms=10_000)
    await store.create(event)
    actor = MatchActor(FAMILY, [event], store, deadlines, time)  # type: ignore[arg-type]
    await actor.start()
    await actor.submit(0, "k0", EventKind.ACTION, _move("e4"))
    await actor.submit(1, "k1", EventKind.ACTION, _move("e5"))
    await actor.deadline_sent()
    # After e4 Black's 10 s flag was sooner than the 60 s first-move timeout that was armed: armed then;
    # White's flag after e5 is later still, so that earlier wake-up is kept.
    e4_at = actor.record.clock_marks[0].at_ms
    assert deadlines.calls == [("arm", event.at_ms + 60_000), ("arm", e4_at + 10_000)]
    flag_at = actor.record.clock.flag_at_ms()
    assert flag_at is not None
    assert e4_at + 10_000 <= flag_at
    await store.close()
    await db.dispose()


async def test_a_caller_who_goes_away_mid_commit_leaves_the_match_consistent(migrated_url: str) -> None:
    """The write is done but the caller was cancelled before the match took it in: the match must still
    take it in, or the next event would reuse its sequence number (a client hanging up mid-call)."""
    db = Database(migrated_url)
    store = MatchStore(db, "chess", "0")
    written = asyncio.Event()
    real_append = store.append

    async def append_then_linger(*args: object) -> None:
        await real_append(*args)  # type: ignore[arg-type]
        written.set()
        await asyncio.sleep(0.2)  # the caller is cancelled here, after the commit

    store.append = append_then_linger  # type: ignore[method-assign,assignment]
    time = ServiceTime()
    event = _created("chess.0.hangup", time.now_ms(), base_ms=60_000)
    await store.create(event)
    actor = MatchActor(FAMILY, [event], store, NoWakeUps(), time)  # type: ignore[arg-type]
    await actor.start()
    call = asyncio.ensure_future(actor.submit(0, "k0", EventKind.ACTION, _move("e4")))
    await written.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    reply = await actor.submit(1, "k1", EventKind.ACTION, _move("e5"))
    assert reply.sequence == 3
    retried = await actor.submit(0, "k0", EventKind.ACTION, _move("e4"))  # the hung-up client retries
    assert retried.sequence == 2
    log = await store.load_log("chess.0.hangup")
    assert [e.sequence for e in log] == [1, 2, 3]
    await store.close()
    await db.dispose()


async def test_retries_are_answered_from_the_store_the_log_is_not_held_in_memory(migrated_url: str) -> None:
    """The actor keeps only a hash of each idempotency key (docs/match-runtime.md, "Memory"): a retry of an
    old action, even one reloaded after a restart, gets its original answer from the log in the store; a
    key reused for another action is refused; and a new key whose hash collides with a logged one is a
    new action, not mistaken for a retry."""
    from libs.runtime.errors import AlreadyExists

    db = Database(migrated_url)
    store = MatchStore(db, "chess", "0")
    event = _created("chess.0.keys", ServiceTime().now_ms(), base_ms=600_000)
    await store.create(event)
    actor = MatchActor(FAMILY, [event], store, NoWakeUps(), ServiceTime())  # type: ignore[arg-type]
    await actor.start()
    moves = ["e4", "e5", "Nf3", "Nc6", "Bb5", "a6"]
    answers = [await actor.submit(n % 2, f"k{n}", EventKind.ACTION, _move(m)) for n, m in enumerate(moves)]
    assert not hasattr(actor, "events")
    # The retry of the second move: its original answer, replayed from the store, nothing logged.
    again = await actor.submit(1, "k1", EventKind.ACTION, _move("e5"))
    assert again == answers[1]
    assert actor.record.sequence == answers[-1].sequence
    with pytest.raises(AlreadyExists, match="different action"):
        await actor.submit(1, "k1", EventKind.ACTION, _move("d5"))
    # A new key that collides (by hash) with a logged one: looked up, not found, played.
    actor._keys.append(hash("fresh"))
    played = await actor.submit(0, "fresh", EventKind.ACTION, _move("Ba4"))
    assert played.sequence == answers[-1].sequence + 1
    # Reloaded from the log (a restart): the same answers to the same retries.
    reloaded = MatchActor(FAMILY, await store.load_log("chess.0.keys"), store, NoWakeUps(), ServiceTime())  # type: ignore[arg-type]
    assert await reloaded.submit(0, "k0", EventKind.ACTION, _move("e4")) == answers[0]
    assert await reloaded.submit(0, "fresh", EventKind.ACTION, _move("Ba4")) == played
    assert (await reloaded.record_at(1)).sequence == 1
    await store.close()
    await db.dispose()
