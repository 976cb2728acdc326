"""Fenced shard ownership (libs/persistence/ownership.py): epochs, stale writers refused, release that
never fails, and the keeper that notices a loss and takes the shard again.

A shard's stores write only under the epoch they were built with: once another process took a newer
epoch (after the first one's lock vanished with a database restart), the first one's commits roll back
with ``UNAVAILABLE``. Here another owner is simulated by moving the epoch on in ``shard_owners`` (what a
second process's acquisition does), and on PostgreSQL by ending the lock's session as a restart does.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select, text, update

from libs.match.model import EventKind, MatchEvent
from libs.match.store import MatchStore
from libs.persistence import Database
from libs.persistence.migrate import migrate
from libs.persistence.ownership import ShardFenced, ShardKeeper, ShardLock, ShardTaken
from libs.persistence.schema import clock_timers, match_events, matches, shard_owners
from libs.runtime.errors import Unavailable
from services.clock.store import TimerStore
from tests.conftest import create_postgres_database, drop_postgres_database


def _created(match_id: str, at_ms: int = 1_000) -> MatchEvent:
    payload = {"match_id": match_id, "players": ["alice", "bob"]}
    return MatchEvent(1, EventKind.CREATED, at_ms, payload, None, f"create-{match_id}")


async def _take_over(db: Database, shard: str) -> None:
    """What another process's acquisition does to the table: the shard's next epoch."""
    async with db.begin() as conn:
        await conn.execute(
            update(shard_owners).where(shard_owners.c.shard == shard).values(epoch=shard_owners.c.epoch + 1)
        )


async def _owner_row(db: Database, shard: str) -> tuple[int, str, int, int]:
    async with db.connect() as conn:
        row = (await conn.execute(select(shard_owners).where(shard_owners.c.shard == shard))).one()
    return int(row.epoch), str(row.owner), int(row.acquired_at_ms), int(row.alive_at_ms)


async def test_each_acquisition_takes_the_next_epoch_and_reads_when_the_last_owner_was_alive(
    migrated_url: str,
) -> None:
    db = Database(migrated_url)
    try:
        first = ShardLock(db, "rules-chess/0")
        await first.acquire()
        assert (first.epoch, first.previous_alive_at_ms) == (1, None)  # the shard never had an owner
        await asyncio.sleep(0.02)
        await first.renew()
        _, owner, acquired, alive = await _owner_row(db, "rules-chess/0")
        assert owner == first.instance
        assert alive > acquired
        await asyncio.sleep(0.02)
        await first.release()  # the last instant it was alive: when it let go
        _, _, _, released_alive = await _owner_row(db, "rules-chess/0")
        assert released_alive > alive
        second = ShardLock(db, "rules-chess/0")
        await second.acquire()
        assert (second.epoch, second.previous_alive_at_ms) == (2, released_alive)
        assert (await _owner_row(db, "rules-chess/0"))[1] == second.instance
        other = ShardLock(db, "clock/0")  # each shard has its own epochs
        await other.acquire()
        assert (other.epoch, other.previous_alive_at_ms) == (1, None)
        for lock in (second, other):
            await lock.release()
    finally:
        await db.dispose()


async def test_a_store_write_under_a_stale_epoch_is_refused_and_nothing_of_it_commits(
    migrated_url: str,
) -> None:
    db = Database(migrated_url)
    try:
        lock = ShardLock(db, "rules-chess/0")
        await lock.acquire()
        store = MatchStore(db, "chess", "0", fence=lock.fence())
        await store.create(_created("chess.0.before"))  # the epoch is the shard's: it commits
        await _take_over(db, "rules-chess/0")
        with pytest.raises(ShardFenced, match="shard rules-chess/0 lost its ownership; retry") as refused:
            await store.create(_created("chess.0.after"))
        assert isinstance(refused.value, Unavailable)  # answered UNAVAILABLE: the caller retries
        assert not lock.held  # the commit told the lock at once, before any heartbeat
        with pytest.raises(ShardFenced):  # and later writes are refused before reaching the database
            await store.create(_created("chess.0.later"))
        async with db.connect() as conn:
            ids = (await conn.execute(select(matches.c.match_id).order_by(matches.c.match_id))).scalars()
            assert list(ids) == ["chess.0.before"]
            assert len((await conn.execute(select(match_events))).all()) == 1
        assert await store.load_log("chess.0.before")  # reads of what is committed still answer
        await store.close()
        await lock.release()
    finally:
        await db.dispose()


async def test_a_batch_under_a_stale_epoch_fails_as_a_whole(migrated_url: str) -> None:
    """Every unit of a fenced group commit is refused; none is run again alone (none may commit)."""
    db = Database(migrated_url)
    try:
        lock = ShardLock(db, "rules-chess/0")
        await lock.acquire()
        store = MatchStore(db, "chess", "0", fence=lock.fence())
        await _take_over(db, "rules-chess/0")
        outcomes = await asyncio.gather(
            *(store.create(_created(f"chess.0.m{i}")) for i in range(20)), return_exceptions=True
        )
        assert all(isinstance(outcome, ShardFenced) for outcome in outcomes), outcomes
        async with db.connect() as conn:
            assert (await conn.execute(select(matches))).all() == []
        await store.close()
        await lock.release()
    finally:
        await db.dispose()


async def test_a_clock_store_write_under_a_stale_epoch_is_refused(migrated_url: str) -> None:
    db = Database(migrated_url)
    try:
        lock = ShardLock(db, "clock/0")
        await lock.acquire()
        store = TimerStore(db, "0", fence=lock.fence())
        await store.load()
        await store.arm("rules-chess-0", "a", 5_000, b"", 1_000)
        await _take_over(db, "clock/0")
        with pytest.raises(ShardFenced, match="shard clock/0 lost its ownership"):
            await store.arm("rules-chess-0", "b", 5_000, b"", 1_000)
        with pytest.raises(ShardFenced):
            await store.remove("rules-chess-0", "a")
        async with db.connect() as conn:
            assert list((await conn.execute(select(clock_timers.c.timer_id))).scalars()) == ["a"]
        await store.close()
        await lock.release()
    finally:
        await db.dispose()


async def test_a_store_of_an_earlier_epoch_stays_fenced_after_the_shard_is_taken_again(
    migrated_url: str,
) -> None:
    """The process itself took the shard again: only the store built under the new epoch writes."""
    db = Database(migrated_url)
    try:
        lock = ShardLock(db, "rules-chess/0")
        await lock.acquire()
        old = MatchStore(db, "chess", "0", fence=lock.fence())
        lock.lose("a test")
        await lock.release()
        await lock.acquire()
        assert lock.epoch == 2
        new = MatchStore(db, "chess", "0", fence=lock.fence())
        with pytest.raises(ShardFenced):
            await old.create(_created("chess.0.old"))
        await new.create(_created("chess.0.new"))
        for store in (old, new):
            await store.close()
        await lock.release()
    finally:
        await db.dispose()


async def test_the_keeper_notices_another_epoch_stops_and_takes_the_shard_again(migrated_url: str) -> None:
    db = Database(migrated_url)
    events: list[str] = []
    regained = asyncio.Event()
    try:
        lock = ShardLock(db, "rules-chess/0")
        await lock.acquire()

        async def lost(reason: str) -> None:
            events.append(f"lost: {reason}")

        async def taken_again() -> None:
            events.append(f"regained {lock.epoch}")
            regained.set()

        keeper = ShardKeeper(lock, lost, taken_again, heartbeat_s=0.05, retry_s=0.05)
        keeper.start()
        await asyncio.sleep(0.2)
        assert events == []  # heartbeats under its own epoch change nothing
        await _take_over(db, "rules-chess/0")  # epoch 2, as another process's acquisition would
        async with asyncio.timeout(10):
            await regained.wait()
        assert events == ["lost: epoch 1 was superseded: another process took the shard", "regained 3"]
        assert lock.held
        assert keeper.losses == 1
        await keeper.stop()
        await lock.release()
    finally:
        await db.dispose()


# -- PostgreSQL: the lock's session ends (as in a database restart) ---------------------------------------


async def _end_lock_sessions(db: Database) -> int:
    """Terminate every session holding an advisory lock in this test's database (only there: the server
    may be shared), as a restart does, and wait until they are gone; how many there were."""
    in_this_database = (
        "FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid() "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    async with db.begin() as conn:
        ended = len((await conn.execute(text(f"SELECT pg_terminate_backend(pid) {in_this_database}"))).all())
    async with asyncio.timeout(10):  # termination is a signal: the sessions end a moment later
        while True:
            async with db.connect() as conn:
                if not (await conn.execute(text(f"SELECT pid {in_this_database}"))).all():
                    return ended
            await asyncio.sleep(0.02)


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    """A migrated database of its own on the shared PostgreSQL server (only its sessions are ended)."""
    name, url = await create_postgres_database("sc_fencing")
    try:
        await migrate(url)
        yield url
    finally:
        await drop_postgres_database(name)


@pytest.mark.postgres
async def test_a_writer_whose_lock_session_ended_is_fenced_by_the_next_owner(postgres_url: str) -> None:
    """The split brain of issue #17: the first owner's lock vanished with its session, a second process
    took the shard, and the first one, not yet aware, writes: refused, nothing committed."""
    first_db, second_db = Database(postgres_url), Database(postgres_url)
    try:
        first = ShardLock(first_db, "rules-chess/0")
        await first.acquire()
        stale = MatchStore(first_db, "chess", "0", fence=first.fence())
        assert await _end_lock_sessions(second_db) == 1
        second = ShardLock(second_db, "rules-chess/0")
        await second.acquire()  # the lock is free again: without epochs, two writers from here on
        assert second.epoch == first.epoch + 1
        assert first.holds(first.epoch)  # no heartbeat has run: the first process does not know yet
        with pytest.raises(ShardFenced, match="lost its ownership"):
            await stale.create(_created("chess.0.stale"))
        fresh = MatchStore(second_db, "chess", "0", fence=second.fence())
        await fresh.create(_created("chess.0.fresh"))
        async with second_db.connect() as conn:
            assert list((await conn.execute(select(matches.c.match_id))).scalars()) == ["chess.0.fresh"]
        await first.release()  # its session is gone: nothing to unlock, and no error
        for store in (stale, fresh):
            await store.close()
        await second.release()
    finally:
        await first_db.dispose()
        await second_db.dispose()


@pytest.mark.postgres
async def test_a_heartbeat_on_an_ended_session_loses_the_shard_and_release_does_not_fail(
    postgres_url: str,
) -> None:
    db, admin = Database(postgres_url), Database(postgres_url)
    try:
        lock = ShardLock(db, f"clock/{uuid.uuid4().hex[:6]}")
        await lock.acquire()
        await lock.renew()
        assert lock.holds(1)
        await _end_lock_sessions(admin)
        await lock.renew()
        assert not lock.held
        assert "session failed" in lock.lost_because
        await lock.release()  # before: pg_advisory_unlock on a closed connection raised (exit 1)
        again = ShardLock(admin, lock.name)
        await again.acquire()
        assert again.epoch == 2
        with pytest.raises(ShardTaken):
            await ShardLock(db, lock.name).acquire()
        await again.release()
    finally:
        await db.dispose()
        await admin.dispose()
