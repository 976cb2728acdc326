"""Group commit on SQLite and PostgreSQL: shared transactions, per-unit failures, durability."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy import event, func, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from libs.persistence import Database
from libs.persistence.group_commit import CommitterClosed, GroupCommitter
from libs.persistence.schema import clock_timers


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


async def _count(url: str) -> int:
    db = Database(url)
    try:
        async with db.connect() as conn:
            return int(await conn.scalar(select(func.count()).select_from(clock_timers)) or 0)
    finally:
        await db.dispose()


async def test_concurrent_units_share_commits_and_all_are_durable(migrated_url: str) -> None:
    db = Database(migrated_url)
    committer = GroupCommitter(db)
    results = await asyncio.gather(*(committer.run(_insert(f"t{i}")) for i in range(300)))
    assert results == [f"t{i}" for i in range(300)]
    assert committer.units == 300
    assert committer.batches < 300  # grouping happened
    await committer.close()
    await db.dispose()
    assert await _count(migrated_url) == 300


async def test_a_failing_unit_rolls_back_alone(migrated_url: str) -> None:
    db = Database(migrated_url)
    committer = GroupCommitter(db)
    outcomes = await asyncio.gather(
        committer.run(_insert("a")),
        committer.run(_insert("dup")),
        committer.run(_insert("dup")),  # violates the primary key (shard, owner, timer_id)
        committer.run(_insert("b")),
        return_exceptions=True,
    )
    assert [outcomes[i] for i in (0, 1, 3)] == ["a", "dup", "b"]
    assert isinstance(outcomes[2], IntegrityError)
    await committer.close()
    await db.dispose()
    assert await _count(migrated_url) == 3


async def test_close_finishes_queued_work_then_refuses_more(migrated_url: str) -> None:
    db = Database(migrated_url)
    committer = GroupCommitter(db)
    pending = [asyncio.ensure_future(committer.run(_insert(f"q{i}"))) for i in range(20)]
    await asyncio.sleep(0)
    await committer.close()
    assert [await p for p in pending] == [f"q{i}" for i in range(20)]
    with pytest.raises(CommitterClosed):
        await committer.run(_insert("late"))
    await db.dispose()
    assert await _count(migrated_url) == 20


async def test_rows_of_a_batch_go_in_together_and_a_bad_row_fails_only_its_unit(migrated_url: str) -> None:
    db = Database(migrated_url)
    committer = GroupCommitter(db)
    inserts: list[int] = []

    def count_inserts(conn: object, cursor: object, statement: str, *rest: object) -> None:
        if statement.lstrip().upper().startswith("INSERT"):
            inserts.append(1)

    event.listen(db.engine.sync_engine, "before_cursor_execute", count_inserts)
    rows = [((clock_timers, _timer(f"r{i}")),) for i in range(100)]
    await asyncio.gather(*(committer.insert(r) for r in rows))
    assert await _count(migrated_url) == 100
    assert 0 < len(inserts) <= committer.batches < 100  # one statement per table per batch, not per row
    # A duplicate row fails its own unit only; the others of the batch are durable, and a unit's work
    # runs after its rows are in.
    seen: list[int] = []

    async def after(conn: AsyncConnection) -> None:
        seen.append(int(await conn.scalar(select(func.count()).select_from(clock_timers)) or 0))

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
