"""Group commit on SQLite and PostgreSQL: shared transactions, per-unit failures, durability."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import grpc
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import Connection, Engine, event, func, insert, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from libs.persistence import Database, group_commit
from libs.persistence.group_commit import CommitterClosed, GroupCommitter
from libs.persistence.schema import clock_timers
from libs.runtime.errors import Unavailable


def _timer(timer_id: str) -> dict[str, object]:
    return {
        "shard": "0",
        "owner": "o",
        "timer_id": timer_id,
        "arm_id": 1,
        "deadline_ms": 1,
        "payload": b"",
        "armed_at_ms": 1,
    }


def _insert(timer_id: str) -> Callable[[AsyncConnection], Awaitable[str]]:
    async def work(conn: AsyncConnection) -> str:
        await conn.execute(insert(clock_timers).values(_timer(timer_id)))
        return timer_id

    return work


def _insert_sync(timer_id: str, threads: list[str] | None = None) -> Callable[[Connection], str]:
    def work(conn: Connection) -> str:
        conn.execute(insert(clock_timers).values(_timer(timer_id)))
        if threads is not None:
            threads.append(threading.current_thread().name)
        return timer_id

    return work


Kind = Literal["async", "sync"]


def _unit(committer: GroupCommitter, kind: Kind, timer_id: str) -> Awaitable[str]:
    """An insert of ``timer_id`` as a unit of ``kind``."""
    if kind == "async":
        return committer.run(_insert(timer_id))
    return committer.run_sync(_insert_sync(timer_id))


async def _count(url: str) -> int:
    db = Database(url)
    try:
        async with db.connect() as conn:
            return int(await conn.scalar(select(func.count()).select_from(clock_timers)) or 0)
    finally:
        await db.dispose()


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_concurrent_units_share_commits_and_all_are_durable(migrated_url: str, kind: Kind) -> None:
    db = Database(migrated_url)
    committer = GroupCommitter(db)
    results = await asyncio.gather(*(_unit(committer, kind, f"t{i}") for i in range(300)))
    assert results == [f"t{i}" for i in range(300)]
    assert committer.units == 300
    assert committer.batches < 300  # grouping happened
    await committer.close()
    await db.dispose()
    assert await _count(migrated_url) == 300


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_failing_unit_rolls_back_alone(migrated_url: str, kind: Kind) -> None:
    db = Database(migrated_url)
    committer = GroupCommitter(db)
    outcomes = await asyncio.gather(
        _unit(committer, kind, "a"),
        _unit(committer, kind, "dup"),
        _unit(committer, kind, "dup"),  # violates the primary key (shard, owner, timer_id)
        _unit(committer, kind, "b"),
        return_exceptions=True,
    )
    assert [outcomes[i] for i in (0, 1, 3)] == ["a", "dup", "b"]
    assert isinstance(outcomes[2], IntegrityError)
    await committer.close()
    await db.dispose()
    assert await _count(migrated_url) == 3


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_close_finishes_queued_work_then_refuses_more(migrated_url: str, kind: Kind) -> None:
    db = Database(migrated_url)
    committer = GroupCommitter(db)
    pending = [asyncio.ensure_future(_unit(committer, kind, f"q{i}")) for i in range(20)]
    await asyncio.sleep(0)
    await committer.close()
    assert [await p for p in pending] == [f"q{i}" for i in range(20)]
    with pytest.raises(CommitterClosed) as caught:
        await _unit(committer, kind, "late")
    # An Unavailable: every service answers it UNAVAILABLE with the reason (the caller retries).
    assert isinstance(caught.value, Unavailable)
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE
    assert caught.value.message == group_commit.SHUTTING_DOWN
    await db.dispose()
    assert await _count(migrated_url) == 20


async def test_a_closed_committer_refuses_with_the_reason_it_was_given(migrated_url: str) -> None:
    db = Database(migrated_url)
    committer = GroupCommitter(db, closed_reason="this service is going away; try again")
    await committer.close()
    with pytest.raises(CommitterClosed) as caught:
        await _unit(committer, "sync", "late")
    assert caught.value.message == "this service is going away; try again"
    await db.dispose()
    assert await _count(migrated_url) == 0


async def test_rows_of_a_batch_go_in_together_and_a_bad_row_fails_only_its_unit(migrated_url: str) -> None:
    db = Database(migrated_url)
    committer = GroupCommitter(db)
    inserts: list[int] = []

    def count_inserts(conn: object, cursor: object, statement: str, *rest: object) -> None:
        if statement.lstrip().upper().startswith("INSERT"):
            inserts.append(1)

    event.listen(Engine, "before_cursor_execute", count_inserts)  # every engine: SQLite's writer too
    rows = [((clock_timers, _timer(f"r{i}")),) for i in range(100)]
    try:
        await asyncio.gather(*(committer.insert(r) for r in rows))
    finally:
        event.remove(Engine, "before_cursor_execute", count_inserts)
    assert await _count(migrated_url) == 100
    assert 0 < len(inserts) <= committer.batches < 100  # one statement per table per batch, not per row
    # A duplicate row fails its own unit only; the others of the batch are durable, and a unit's work
    # runs after its rows are in.
    seen: list[int] = []

    def after(conn: Connection) -> None:
        seen.append(int(conn.scalar(select(func.count()).select_from(clock_timers)) or 0))

    outcomes = await asyncio.gather(
        committer.insert(((clock_timers, _timer("r5")),)),
        committer.insert(((clock_timers, _timer("s1")),), after),
        committer.insert(((clock_timers, _timer("s2")),)),
        return_exceptions=True,
    )
    assert isinstance(outcomes[0], IntegrityError)
    assert list(outcomes[1:]) == [None, None]
    assert seen
    assert seen[-1] >= 101  # s1 was in when its work ran
    await committer.close()
    await db.dispose()
    assert await _count(migrated_url) == 102


async def test_on_sqlite_a_batch_of_synchronous_units_is_one_trip_to_the_writer_thread(
    migrated_url: str,
) -> None:
    """SQLite: the batch runs in the committer's writer thread, one trip per transaction, and what it
    committed is what the service's own (async) engine reads. PostgreSQL: on the async connection."""
    db = Database(migrated_url)
    committer = GroupCommitter(db)
    threads: list[str] = []
    results = await asyncio.gather(*(committer.run_sync(_insert_sync(f"w{i}", threads)) for i in range(200)))
    assert results == [f"w{i}" for i in range(200)]
    assert committer.batches < 200
    if db.is_sqlite:
        assert committer.thread_trips == committer.batches
        assert {name.split("_")[0] for name in threads} == {"sqlite-writer"}
    else:
        assert committer.thread_trips == 0
        assert set(threads) == {threading.current_thread().name}
    async with db.connect() as conn:  # read back through the async engine, before the committer closes
        assert await conn.scalar(select(func.count()).select_from(clock_timers)) == 200
    await committer.close()
    await db.dispose()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the writer thread is SQLite's
async def test_on_sqlite_the_writer_thread_keeps_its_connection_until_a_batch_fails(
    migrated_url: str,
) -> None:
    """One connection serves batch after batch (no pool checkout per batch); a batch that fails closes
    it, and the next batch opens another and commits as before."""
    db = Database(migrated_url)
    assert db.is_sqlite
    committer = GroupCommitter(db)
    checkouts: list[int] = []

    def count(*args: object) -> None:
        checkouts.append(1)

    event.listen(Engine, "checkout", count)  # every engine's pool: the writer's too
    try:
        for i in range(5):  # one at a time: five batches
            await committer.run_sync(_insert_sync(f"k{i}"))
        assert (committer.thread_trips, len(checkouts)) == (5, 1)
        with pytest.raises(IntegrityError):
            await committer.run_sync(_insert_sync("k0"))  # a duplicate: its batch fails
        assert len(checkouts) == 2  # the failed batch's connection was closed; its unit ran alone on another
        await committer.run_sync(_insert_sync("k5"))
        assert len(checkouts) == 3  # which failed too and was closed: a new one for the next batch
    finally:
        event.remove(Engine, "checkout", count)
    await committer.close()
    await db.dispose()
    assert await _count(migrated_url) == 6


async def test_a_batch_mixing_async_and_synchronous_units_is_one_transaction_in_order(
    migrated_url: str,
) -> None:
    db = Database(migrated_url)
    committer = GroupCommitter(db)
    seen: list[int] = []

    def count(conn: Connection) -> int:
        seen.append(int(conn.scalar(select(func.count()).select_from(clock_timers)) or 0))
        return seen[-1]

    outcomes = await asyncio.gather(
        committer.run(_insert("m1")),
        committer.run_sync(_insert_sync("m2")),
        committer.run_sync(count),  # sees both inserts of its batch, made before it
        committer.run(_insert("m3")),
    )
    assert list(outcomes) == ["m1", "m2", 2, "m3"]
    assert committer.batches == 1
    assert committer.thread_trips == 0  # an async unit in the batch: the async connection for all
    await committer.close()
    await db.dispose()
    assert await _count(migrated_url) == 3


async def test_a_write_does_not_meet_a_read_in_sqlites_busy_handler(
    migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite: the writer thread's connection and the async engine's take turns through the database's
    gate, as the async engine's one connection did alone, so a write waits for a read in progress
    before it starts its transaction (never inside SQLite's busy handler, which sleeps in steps of up to
    100 ms). PostgreSQL has a pool: the write goes ahead during the read."""
    trips: list[bool] = []
    reading = False
    run_in_thread = group_commit._SqliteWriter.run

    def spy(writer: Any, batch: list[Any]) -> list[Any]:
        trips.append(reading)
        return run_in_thread(writer, batch)

    monkeypatch.setattr(group_commit._SqliteWriter, "run", spy)
    db = Database(migrated_url)
    committer = GroupCommitter(db)
    async with db.connect() as conn:
        reading = True
        assert await conn.scalar(select(func.count()).select_from(clock_timers)) == 0
        write = asyncio.ensure_future(committer.run_sync(_insert_sync("during")))
        await asyncio.sleep(0.2)
        assert write.done() is not db.is_sqlite  # SQLite: held back while the read's connection is in use
        reading = False
    assert await asyncio.wait_for(write, 5) == "during"
    assert trips == ([False] if db.is_sqlite else [])  # the trip began after the read ended
    await committer.close()
    await db.dispose()
    assert await _count(migrated_url) == 1


async def test_a_read_sees_every_write_committed_before_it_and_writes_nothing(migrated_url: str) -> None:
    """``read``: SQLite runs it in the writer thread's next batch (one trip, beside the writes queued
    with it); PostgreSQL in a batch of reads, outside the committer's write batches. Either way
    it sees what was committed before it was called, and it still reads once the committer is closed."""
    db = Database(migrated_url)
    committer = GroupCommitter(db)
    threads: list[str] = []

    def count(conn: Connection) -> int:
        threads.append(threading.current_thread().name)
        return int(conn.scalar(select(func.count()).select_from(clock_timers)) or 0)

    await asyncio.gather(*(committer.run_sync(_insert_sync(f"r{i}")) for i in range(10)))
    units, batches = committer.units, committer.batches
    assert await committer.read(count) == 10
    # A read queued with writes: it runs after those queued before it, before those queued after it.
    first = asyncio.ensure_future(committer.run_sync(_insert_sync("before")))
    reading = asyncio.ensure_future(committer.read(count))
    after = asyncio.ensure_future(committer.run_sync(_insert_sync("after")))
    await asyncio.gather(first, after)
    seen = await reading
    if db.is_sqlite:
        assert seen == 11
        assert committer.units == units + 4  # both reads were units of a batch
        assert {name.split("_")[0] for name in threads} == {"sqlite-writer"}
    else:
        assert seen in (10, 11, 12)  # beside the batches, at once
        assert committer.units == units + 2  # the reads are not counted as units of a write batch
        assert committer.batches > batches
    await committer.close()
    assert await committer.read(count) == 12  # a closed committer refuses writes, not reads
    await db.dispose()
    assert await _count(migrated_url) == 12


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)  # a pool: SQLite's reads are above
async def test_reads_arriving_together_share_a_few_connections_and_fail_alone(migrated_url: str) -> None:
    """PostgreSQL: 300 reads at once run in at most ``READ_BATCHES`` batches at a time, each on one
    pooled connection in autocommit (no overflow connection is opened, whatever arrives); a read that
    fails (a bad statement) fails alone, the reads after it in its batch still answer, and a read whose
    caller gave up is not run."""
    db = Database(migrated_url)
    committer = GroupCommitter(db)
    await asyncio.gather(*(committer.run_sync(_insert_sync(f"c{i}")) for i in range(3)))
    checkouts: list[object] = []
    event.listen(db.engine.sync_engine, "checkout", lambda dbapi, record, proxy: checkouts.append(dbapi))
    ran: list[int] = []

    def count(i: int) -> Callable[[Connection], int]:
        def read(conn: Connection) -> int:
            ran.append(i)
            return int(conn.scalar(select(func.count()).select_from(clock_timers)) or 0) + i

        return read

    def broken(conn: Connection) -> int:
        return int(conn.scalar(select(func.count()).select_from(clock_timers).where(func.nosuch())) or 0)

    reads = [asyncio.ensure_future(committer.read(count(i))) for i in range(150)]
    bad = asyncio.ensure_future(committer.read(broken))
    reads += [asyncio.ensure_future(committer.read(count(i))) for i in range(150, 300)]
    given_up = asyncio.ensure_future(committer.read(count(-1)))
    await asyncio.sleep(0)  # every read is queued; the reader tasks start on the loop's next turn
    given_up.cancel()
    results = await asyncio.gather(*reads)
    assert results == [3 + i for i in range(300)]
    with pytest.raises(Exception, match="nosuch"):
        await bad
    assert given_up.cancelled()
    assert -1 not in ran
    assert 1 <= len(checkouts) <= 2 * group_commit.READ_BATCHES  # a batch per checkout, not a read
    pool: Any = db.engine.pool
    assert pool.checkedout() == 1  # only the writer's own connection, kept between its batches
    assert pool.overflow() <= 0
    assert committer._readers == 0  # every reader task ended once nothing waited
    assert await committer.read(count(0)) == 3  # and a later read starts one again
    await committer.close()
    await db.dispose()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_on_postgresql_the_writer_keeps_its_connection_and_replaces_a_broken(migrated_url: str) -> None:
    """The writer's batches share one connection (one checkout for many batches); when the database
    drops it (its backend terminated, as in a restart), the batch in flight still commits, each unit
    alone on a fresh connection, and the writer keeps that one from then on."""
    db = Database(migrated_url)
    committer = GroupCommitter(db)
    checkouts: list[object] = []
    event.listen(db.engine.sync_engine, "checkout", lambda dbapi, record, proxy: checkouts.append(dbapi))
    for round_ in range(5):
        await asyncio.gather(*(committer.run_sync(_insert_sync(f"k{round_}-{i}")) for i in range(20)))
    assert committer.batches >= 5
    assert len(checkouts) == 1  # one checkout for every batch
    writer_pid = await committer.run_sync(lambda conn: conn.scalar(text("SELECT pg_backend_pid()")))
    admin = Database(migrated_url)
    async with admin.connect() as conn:
        await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": writer_pid})
    await admin.dispose()
    done = await asyncio.gather(*(committer.run_sync(_insert_sync(f"after{i}")) for i in range(10)))
    assert done == [f"after{i}" for i in range(10)]  # every caller answered with its own result
    new_pid = await committer.run_sync(lambda conn: conn.scalar(text("SELECT pg_backend_pid()")))
    assert new_pid != writer_pid
    assert await committer.run_sync(lambda conn: conn.scalar(text("SELECT pg_backend_pid()"))) == new_pid
    await committer.close()
    await db.dispose()
    assert await _count(migrated_url) == 110


def _sample(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


async def test_every_committed_transaction_is_measured(migrated_url: str) -> None:
    """The committer's Prometheus figures: one observation of each stage per committed transaction (the
    wait of its oldest unit, on every database: what the GroupCommitSlow alert watches), and the units it
    held."""
    db = Database(migrated_url)
    committer = GroupCommitter(db)
    transactions = _sample("skillclassics_group_commit_seconds_count", {"stage": "transaction"})
    waits = _sample("skillclassics_group_commit_seconds_count", {"stage": "wait"})
    units = _sample("skillclassics_group_commit_units_sum")
    await asyncio.gather(*(committer.run_sync(_insert_sync(f"m{i}")) for i in range(40)))
    assert _sample("skillclassics_group_commit_seconds_count", {"stage": "transaction"}) - transactions == (
        committer.batches
    )
    assert _sample("skillclassics_group_commit_units_sum") - units == 40
    assert _sample("skillclassics_group_commit_seconds_count", {"stage": "wait"}) - waits == committer.batches
    # A unit queued behind a slow transaction: the next batch's wait holds that transaction's time.
    waited = _sample("skillclassics_group_commit_seconds_sum", {"stage": "wait"})

    async def slow(conn: AsyncConnection) -> None:
        await asyncio.sleep(0.3)

    held = asyncio.ensure_future(committer.run(slow))
    await asyncio.sleep(0.05)  # the slow batch is under way
    await committer.run_sync(_insert_sync("behind"))
    await held
    assert _sample("skillclassics_group_commit_seconds_sum", {"stage": "wait"}) - waited >= 0.2
    await committer.close()
    await db.dispose()
