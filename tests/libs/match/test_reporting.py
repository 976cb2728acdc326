"""The result outbox (``libs.match.reporting``) on SQLite and PostgreSQL: what it delivers, what it marks,
and that its database work goes through the shard's group committer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import insert, select

from libs.match.reporting import ResultReporter
from libs.match.store import MatchStore
from libs.persistence import Database
from libs.persistence.schema import match_results, matches
from libs.runtime.timesource import ServiceTime


class Recording:
    """A recipient that keeps what it was given; refuses the match ids in ``refuse``."""

    name = "recording"

    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        self.delivered: list[str] = []
        self.refuse = refuse

    async def deliver(self, result: dict[str, Any]) -> None:
        if result["match_id"] in self.refuse:
            raise ConnectionError("the recipient is down")
        self.delivered.append(result["match_id"])

    async def close(self) -> None:
        return None


async def _finished(
    db: Database, match_id: str, ended_at_ms: int, family: str = "chess", shard: str = "0"
) -> None:
    """A finished match with its result row, not yet reported."""
    async with db.begin() as conn:
        await conn.execute(
            insert(matches).values(
                match_id=match_id,
                family=family,
                shard=shard,
                status="finished",
                created_at_ms=1,
                ended_at_ms=ended_at_ms,
            )
        )
        await conn.execute(
            insert(match_results).values(
                match_id=match_id,
                family=family,
                termination="resignation",
                winner=0,
                result={},
                seats=[],
                record="",
                record_format="pgn",
                clock_history=[],
                fairness_commitment="",
                ended_at_ms=ended_at_ms,
                reported_at_ms=None,
            )
        )


async def _reported(db: Database) -> dict[str, int | None]:
    async with db.connect() as conn:
        rows = await conn.execute(select(match_results.c.match_id, match_results.c.reported_at_ms))
        return {row.match_id: row.reported_at_ms for row in rows}


async def test_the_outbox_delivers_this_shards_results_oldest_first_and_marks_only_the_accepted(
    migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = Database(migrated_url)
    store = MatchStore(db, "chess", "0")
    try:
        await _finished(db, "chess.0.late", ended_at_ms=30)
        await _finished(db, "chess.0.early", ended_at_ms=10)
        await _finished(db, "chess.0.refused", ended_at_ms=20)
        await _finished(db, "chess.1.other-shard", ended_at_ms=5, shard="1")
        await _finished(db, "gin.0.other-family", ended_at_ms=5, family="gin")
        recipient = Recording(refuse=frozenset({"chess.0.refused"}))
        reporter = ResultReporter(store, [recipient], ServiceTime())
        if db.is_sqlite:
            # On SQLite the outbox makes no transaction of its own on the service's async engine: its scan
            # and its marks are units of the shard's committer, so they never hold the file's one turn
            # while every move's commit waits behind them.
            def refused(*args: object, **kwargs: object) -> Any:
                raise AssertionError("the outbox opened a connection of its own")

            monkeypatch.setattr(Database, "connect", refused)
            monkeypatch.setattr(Database, "begin", refused)
        units = store._writer.units
        assert await reporter.deliver_pending() == 2
        assert recipient.delivered == ["chess.0.early", "chess.0.late"]
        assert await reporter._has_pending()  # the refused one stays for the retry
        if db.is_sqlite:
            assert store._writer.units - units == 4  # the scan, two marks, the pending check
        monkeypatch.undo()
        reported = await _reported(db)
        assert reported["chess.0.early"] is not None
        assert reported["chess.0.late"] is not None
        assert reported["chess.0.refused"] is None
        assert reported["chess.1.other-shard"] is None
        assert reported["gin.0.other-family"] is None
        recipient.refuse = frozenset()
        assert await reporter.deliver_pending() == 1
        assert not await reporter._has_pending()
    finally:
        await store.close()
        await db.dispose()


async def test_a_move_is_not_held_up_while_the_outbox_waits_for_a_recipient(migrated_url: str) -> None:
    """Delivery happens outside any transaction: while a recipient takes its time, the shard's own
    writes commit."""
    db = Database(migrated_url)
    store = MatchStore(db, "chess", "0")
    release = asyncio.Event()

    class Slow(Recording):
        async def deliver(self, result: dict[str, Any]) -> None:
            await release.wait()
            await super().deliver(result)

    try:
        await _finished(db, "chess.0.slow", ended_at_ms=10)
        recipient = Slow()
        reporter = ResultReporter(store, [recipient], ServiceTime())
        delivering = asyncio.ensure_future(reporter.deliver_pending())
        await asyncio.sleep(0.05)
        await asyncio.wait_for(store.mark_reported("chess.0.other", 1), 5)  # a write meanwhile commits
        assert not delivering.done()
        release.set()
        assert await asyncio.wait_for(delivering, 5) == 1
        assert recipient.delivered == ["chess.0.slow"]
    finally:
        await store.close()
        await db.dispose()
