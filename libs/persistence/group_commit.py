"""Group commit: many callers' small writes share one transaction and one durable commit.

A service that must make every accepted action durable before answering pays one commit (an fsync)
per action if each runs alone. :class:`GroupCommitter` queues units of work and runs everything that
queued while the previous commit was in flight in a single transaction, each unit inside its own
SAVEPOINT so that one unit's error rolls back only that unit. Every caller is answered only after the
commit that holds its unit returned, so durability is unchanged and throughput grows with concurrency.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from libs.persistence.database import Database

T = TypeVar("T")
Work = Callable[[AsyncConnection], Awaitable[Any]]
DEFAULT_MAX_BATCH = 256


class CommitterClosed(Exception):
    """The committer was closed; the unit of work was not run."""


@dataclass(slots=True)
class _Unit:
    work: Work
    done: asyncio.Future[Any]


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
        if self._closed:
            raise CommitterClosed("the database writer is closed")
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_forever())
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Unit(work, done))
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
        results: list[tuple[_Unit, Any, BaseException | None]] = []
        try:
            async with self._db.begin() as conn:
                for unit in batch:
                    try:
                        async with conn.begin_nested():
                            results.append((unit, await unit.work(conn), None))
                    except Exception as error:  # this unit only: its savepoint was rolled back
                        results.append((unit, None, error))
        except Exception as error:  # the commit itself failed: nothing in the batch is durable
            for unit in batch:
                if not unit.done.done():
                    unit.done.set_exception(error)
            return
        self.batches += 1
        self.units += len(batch)
        for unit, result, failure in results:
            if unit.done.done():
                continue
            if failure is not None:
                unit.done.set_exception(failure)
            else:
                unit.done.set_result(result)
