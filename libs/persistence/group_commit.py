"""Group commit: many callers' small writes share one transaction and one durable commit.

A service that must make every accepted action durable before answering pays one commit (an fsync)
per action if each runs alone. :class:`GroupCommitter` queues units of work and runs everything that
queued while the previous commit was in flight in a single transaction. If any unit fails, the batch is
rolled back and each unit is run again in a transaction of its own, so one unit's error fails only that
unit. Every caller is answered only after the commit that holds its unit returned, so durability is
unchanged and throughput grows with concurrency. Units must therefore be safe to run again after a
rollback (plain database work is).

A unit may also carry rows to insert (:meth:`GroupCommitter.insert`): the rows of every unit in a batch
go into their tables with one multi-row statement per table, before the units' other work, instead of
one statement (and one trip to the database driver) per row.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Table, insert
from sqlalchemy.ext.asyncio import AsyncConnection

from libs.persistence.database import Database

T = TypeVar("T")
Work = Callable[[AsyncConnection], Awaitable[Any]]
Row = tuple[Table, dict[str, Any]]
DEFAULT_MAX_BATCH = 256


class CommitterClosed(Exception):
    """The committer was closed; the unit of work was not run."""


@dataclass(slots=True)
class _Unit:
    work: Work | None
    done: asyncio.Future[Any]
    rows: tuple[Row, ...] = ()


class GroupCommitter:
    """Runs units of work in shared transactions; one writer task per committer."""

    def __init__(self, db: Database, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        self._db = db
        self._max_batch = max_batch
        self._queue: asyncio.Queue[_Unit | None] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._closed = False
        self.batches = 0
        self.units = 0

    async def run(self, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """Run ``work(connection)`` in the next group transaction; return its result once committed."""
        result: T = await self._enqueue(work, ())
        return result

    async def insert(self, rows: tuple[Row, ...], work: Work | None = None) -> None:
        """Insert ``rows`` (each a table and its values), then run ``work`` if given, in the next group
        transaction; return once committed. Rows of one table from the whole batch share one
        statement."""
        await self._enqueue(work, rows)

    async def _enqueue(self, work: Work | None, rows: tuple[Row, ...]) -> Any:
        if self._closed:
            raise CommitterClosed("the database writer is closed")
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_forever())
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Unit(work, done, rows))
        return await asyncio.shield(done)

    async def close(self) -> None:
        """Finish what is queued, then stop the writer."""
        self._closed = True
        if self._writer is not None:
            self._queue.put_nowait(None)
            await self._writer

    async def _write_forever(self) -> None:
        while True:
            first = await self._queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < self._max_batch and not self._queue.empty():
                unit = self._queue.get_nowait()
                if unit is None:
                    stop = True
                    break
                batch.append(unit)
            await self._commit(batch)
            if stop:
                return

    async def _commit(self, batch: list[_Unit]) -> None:
        try:
            results = await self._run_together(batch)
        except Exception:
            # Some unit failed (or the commit did): nothing of the batch is durable. Run each unit in a
            # transaction of its own, so only the failing one fails. Failures are rare (requests are
            # validated first), so the common path pays no per-unit SAVEPOINT.
            for unit in batch:
                await self._run_alone(unit)
            return
        self.batches += 1
        self.units += len(batch)
        for unit, result in zip(batch, results, strict=True):
            if not unit.done.done():
                unit.done.set_result(result)

    async def _run_together(self, batch: list[_Unit]) -> list[Any]:
        async with self._db.begin() as conn:
            await _insert_rows(conn, [row for unit in batch for row in unit.rows])
            return [None if unit.work is None else await unit.work(conn) for unit in batch]

    async def _run_alone(self, unit: _Unit) -> None:
        try:
            async with self._db.begin() as conn:
                await _insert_rows(conn, list(unit.rows))
                result = None if unit.work is None else await unit.work(conn)
        except Exception as error:
            if not unit.done.done():
                unit.done.set_exception(error)
            return
        self.batches += 1
        self.units += 1
        if not unit.done.done():
            unit.done.set_result(result)


async def _insert_rows(conn: AsyncConnection, rows: list[Row]) -> None:
    """Insert ``rows`` with one statement per table, tables in the order they first appear."""
    by_table: dict[Table, list[dict[str, Any]]] = {}
    for table, values in rows:
        by_table.setdefault(table, []).append(values)
    for table, values_list in by_table.items():
        await conn.execute(insert(table), values_list)
