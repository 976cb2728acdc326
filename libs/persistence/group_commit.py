"""Group commit: many callers' small writes share one transaction and one durable commit.

A service that must make every accepted action durable before answering pays one commit (an fsync)
per action if each runs alone. :class:`GroupCommitter` queues units of work and runs everything that
queued while the previous commit was in flight in a single transaction. If any unit fails, the batch is
rolled back and each unit is run again in a transaction of its own, so one unit's error fails only that
unit. Every caller is answered only after the commit that holds its unit returned, so durability is
unchanged and throughput grows with concurrency. Units must therefore be safe to run again after a
rollback (plain database work is).

A unit is either asynchronous (:meth:`GroupCommitter.run`: it may await anything on its
``AsyncConnection``) or synchronous (:meth:`GroupCommitter.run_sync`: plain statements on a
``Connection``, no awaiting). On SQLite a batch of synchronous units runs in one trip to a writer thread
of the committer's own, on a synchronous engine configured like the async one
(:func:`~libs.persistence.database.sqlite_writer_engine`), instead of about eight trips to the async
driver's thread per transaction; elsewhere (PostgreSQL), and in a batch that holds an asynchronous unit,
synchronous units run on the async connection through SQLAlchemy's ``run_sync``. Either way they see the
same transaction as the rest of their batch.

A unit may also carry rows to insert (:meth:`GroupCommitter.insert`): the rows of every unit in a batch
go into their tables with one multi-row statement per table, before the units' other work, instead of
one statement (and one trip to the database driver) per row.

Reads (:meth:`GroupCommitter.read`) are batched too. On SQLite they join the next group transaction;
elsewhere (PostgreSQL) the reads that arrive together run one after another on one connection in
autocommit mode, at most :data:`READ_BATCHES` batches at once: one checkout from the pool (and its
liveness ping) per batch instead of a checkout, ``BEGIN`` and ``ROLLBACK`` per read, and never more
connections than that for reads, however many calls arrive at once (a hundred concurrent lobby calls
used to open and close the pool's overflow connections, TLS handshake and all, over and over). Each
statement sees what was committed before it ran, as in a ``READ COMMITTED`` transaction, so a read
sees every write committed before it was called; one read's error fails only that read.

Once closed (the service is shutting down), the committer refuses new units with
:class:`CommitterClosed`, an :class:`~libs.runtime.errors.Unavailable`: every service whose writes go
through a committer answers such a call ``UNAVAILABLE`` with a readable reason, so the caller retries
(elsewhere, or once the service is back), instead of ``INTERNAL``.

A committer may be *fenced* (:class:`WriteFence`, :class:`~libs.persistence.ownership.Fence` for a
shard's data): then a write is refused before it is queued while the fence knows its shard is lost, and
every transaction that writes begins with the fence's conditional statement, which aborts it when another
process owns the shard now. One statement per batch, whatever the batch holds; a batch of reads only
(:meth:`GroupCommitter.read` on SQLite) is not fenced. A fenced batch fails as a whole with the fence's
error (no unit is run again alone: none of them may commit).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection, Engine, Table, insert
from sqlalchemy.ext.asyncio import AsyncConnection

from libs.persistence.database import Database, sqlite_writer_engine
from libs.runtime.errors import ErrorReason, Unavailable
from libs.runtime.metrics import GROUP_COMMIT_SECONDS, GROUP_COMMIT_UNITS

T = TypeVar("T")
Work = Callable[[AsyncConnection], Awaitable[Any]]
SyncWork = Callable[[Connection], Any]
Row = tuple[Table, dict[str, Any]]
DEFAULT_MAX_BATCH = 256
READ_BATCHES = 4
"""Batches of reads running at once on a database with a connection pool (each holds one connection)."""
SHUTTING_DOWN = "the service is shutting down and takes no more writes; retry on another instance"
"""Why a write is refused once the committer is closed, unless the service words it itself."""
_WAITED = GROUP_COMMIT_SECONDS.labels("wait")
_TRANSACTION = GROUP_COMMIT_SECONDS.labels("transaction")


class Fenced(Unavailable):
    """A write refused by the committer's fence: another process owns the data now (or the owner knows it
    lost it). Nothing of the batch committed; the caller retries, and reaches the owner."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reason=ErrorReason.ERROR_REASON_SHARD_NOT_SERVING)


class WriteFence(Protocol):
    """What makes a committer's writes conditional on still owning their data (a shard's epoch)."""

    def check(self) -> None:
        """Raise :class:`Fenced` when the owner knows it lost the data."""

    def guard(self, conn: Connection) -> None:
        """The first statement of a writing transaction: raise :class:`Fenced`, aborting it, unless the
        data is still owned."""


class CommitterClosed(Unavailable):
    """The committer was closed (the service is shutting down); the unit of work was not run.

    An :class:`~libs.runtime.errors.Unavailable`: the runtime answers the call ``UNAVAILABLE`` with the
    reason, and the caller may retry."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN)


@dataclass(slots=True)
class _Unit:
    work: Work | None
    done: asyncio.Future[Any]
    rows: tuple[Row, ...] = ()
    sync_work: SyncWork | None = None
    writes: bool = True
    """False for a read (:meth:`GroupCommitter.read`): a batch of reads only is not fenced."""
    queued_at: float = field(default_factory=time.perf_counter)
    """When it was queued: a batch's wait is its oldest unit's, from here until the transaction begins."""

    @property
    def is_sync(self) -> bool:
        return self.work is None


class GroupCommitter:
    """Runs units of work in shared transactions; one writer task per committer."""

    def __init__(
        self,
        db: Database,
        max_batch: int = DEFAULT_MAX_BATCH,
        *,
        closed_reason: str = SHUTTING_DOWN,
        fence: WriteFence | None = None,
    ) -> None:
        self._db = db
        self._fence = fence
        self._max_batch = max_batch
        self._closed_reason = closed_reason
        """The reason of the :class:`CommitterClosed` that refuses a unit after :meth:`close`."""
        self._queue: asyncio.Queue[_Unit | None] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._closed = False
        self._reads: list[_Unit] = []
        """Reads waiting for a batch (not on SQLite)."""
        self._readers = 0
        self._kept: AsyncConnection | None = None
        """PostgreSQL: the writer's connection, kept between batches."""
        engine = sqlite_writer_engine(db.url)
        self._sqlite: _SqliteWriter | None = None if engine is None else _SqliteWriter(engine, fence)
        self._thread: ThreadPoolExecutor | None = None
        self.batches = 0
        self.units = 0
        self.thread_trips = 0
        """Transactions run in one trip to the SQLite writer thread."""

    async def run(self, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """Run ``work(connection)`` in the next group transaction; return its result once committed."""
        result: T = await self._enqueue(_Unit(work, self._future()))
        return result

    async def run_sync(self, work: Callable[[Connection], T]) -> T:
        """Run the synchronous ``work(connection)`` (statements only: it must not block on anything else)
        in the next group transaction; return its result once committed."""
        result: T = await self._enqueue(_Unit(None, self._future(), sync_work=work))
        return result

    async def read(self, work: Callable[[Connection], T]) -> T:
        """Run the synchronous, read-only ``work(connection)`` and return its result; it sees every write
        committed before it was called. On SQLite it joins the next group transaction (one trip to the
        writer thread, which holds the process's connections to the file one at a time anyway, instead
        of several through the async driver), or, once the committer is closed (reads are not refused
        while the database is open), runs on a connection of its own; elsewhere it joins the next batch
        of reads (see the module's notes)."""
        if self._db.is_sqlite:
            if not self._closed:
                result: T = await self._enqueue(_Unit(None, self._future(), sync_work=work, writes=False))
                return result
            async with self._db.connect() as conn:
                read: T = await conn.run_sync(work)
            return read
        unit = _Unit(None, self._future(), sync_work=work, writes=False)
        self._reads.append(unit)
        if self._readers < READ_BATCHES:
            self._readers += 1
            asyncio.get_running_loop().create_task(self._read_forever())
        batched: T = await unit.done  # not shielded: a caller that gives up takes its read out of the batch
        return batched

    async def _read_forever(self) -> None:
        """Run waiting reads in batches until none wait (one of at most :data:`READ_BATCHES` tasks)."""
        try:
            while self._reads:
                batch, self._reads = self._reads[: self._max_batch], self._reads[self._max_batch :]
                await self._read_batch(batch)
        finally:
            self._readers -= 1

    async def _read_batch(self, batch: list[_Unit]) -> None:
        try:
            async with self._db.connect() as conn:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                outcomes = await conn.run_sync(_run_reads, batch)
        except Exception as error:  # no connection (or it broke): every read of the batch fails with it
            for unit in batch:
                if not unit.done.done():
                    unit.done.set_exception(error)
            return
        for unit, (failed, value) in zip(batch, outcomes, strict=True):
            if unit.done.done():
                continue
            if failed:
                unit.done.set_exception(value)
            else:
                unit.done.set_result(value)

    async def insert(self, rows: tuple[Row, ...], work: SyncWork | None = None) -> None:
        """Insert ``rows`` (each a table and its values), then run the synchronous ``work`` if given, in
        the next group transaction; return once committed. Rows of one table from the whole batch share
        one statement."""
        await self._enqueue(_Unit(None, self._future(), rows, work))

    def _future(self) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()

    async def _enqueue(self, unit: _Unit) -> Any:
        if self._fence is not None and unit.writes:
            self._fence.check()
        if self._closed:
            raise CommitterClosed(self._closed_reason)
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_forever())
        self._queue.put_nowait(unit)
        return await asyncio.shield(unit.done)

    async def close(self) -> None:
        """Finish what is queued, then stop the writer (and its thread); later units are refused with
        :class:`CommitterClosed`."""
        self._closed = True
        if self._writer is not None:
            self._queue.put_nowait(None)
            await self._writer
        kept, self._kept = self._kept, None
        if kept is not None:
            await _close_quietly(kept)
        sqlite, self._sqlite = self._sqlite, None
        if self._thread is not None:
            if sqlite is not None:  # its connection was made in the thread: closed there too
                await asyncio.get_running_loop().run_in_executor(self._thread, sqlite.close)
            self._thread.shutdown(wait=False)
            self._thread = None
        elif sqlite is not None:
            sqlite.close()

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
            results = await self._transaction(batch)
        except Fenced as error:
            # Another process owns the data now: no unit of the batch may commit, alone or not.
            for unit in batch:
                if not unit.done.done():
                    unit.done.set_exception(error)
            return
        except Exception:
            # Some unit failed (or the commit did): nothing of the batch is durable. Run each unit in a
            # transaction of its own, so only the failing one fails. Failures are rare (requests are
            # validated first), so the common path pays no per-unit SAVEPOINT.
            for unit in batch:
                await self._run_alone(unit)
            return
        self.batches += 1
        self.units += len(batch)
        GROUP_COMMIT_UNITS.observe(len(batch))
        for unit, result in zip(batch, results, strict=True):
            if not unit.done.done():
                unit.done.set_result(result)

    async def _run_alone(self, unit: _Unit) -> None:
        try:
            (result,) = await self._transaction([unit])
        except Exception as error:
            if not unit.done.done():
                unit.done.set_exception(error)
            return
        self.batches += 1
        self.units += 1
        GROUP_COMMIT_UNITS.observe(1)
        if not unit.done.done():
            unit.done.set_result(result)

    async def _transaction(self, batch: list[_Unit]) -> list[Any]:
        """Run ``batch`` in one transaction and commit it: in one trip to the writer thread when it can."""
        sqlite = self._sqlite
        if sqlite is not None and all(unit.is_sync for unit in batch):
            if self._thread is None:
                self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-writer")
            async with self._db.exclusive():  # the process's SQLite connections one at a time
                turn = time.perf_counter()
                _WAITED.observe(turn - batch[0].queued_at)
                results = await asyncio.get_running_loop().run_in_executor(self._thread, sqlite.run, batch)
            _TRANSACTION.observe(time.perf_counter() - turn)
            self.thread_trips += 1
            return results
        began = time.perf_counter()  # (on SQLite the wait for the file's turn is inside begin)
        _WAITED.observe(began - batch[0].queued_at)
        if self._db.is_sqlite:  # an async unit on SQLite: through the database's gate
            async with self._db.begin() as conn:
                results = await self._batch_on(conn, batch)
        else:
            results = await self._on_kept_connection(batch)
        _TRANSACTION.observe(time.perf_counter() - began)
        return results

    async def _on_kept_connection(self, batch: list[_Unit]) -> list[Any]:
        """PostgreSQL: ``batch`` in one transaction on the writer's own connection, kept from one batch to
        the next like the SQLite writer thread's: no checkout from the pool and no liveness ping per batch
        (on a busy box each round trip waits for the CPU twice, so a transaction's latency is its round
        trips'). A connection that broke (the database restarted) is dropped; the batch fails, its units
        run again alone on a fresh one from the pool (which pings it first)."""
        conn = self._kept
        if conn is None:
            conn = self._kept = await self._db.engine.connect()
        try:
            async with conn.begin():
                return await self._batch_on(conn, batch)
        except BaseException as error:
            # A unit's own error leaves a healthy connection (its transaction rolled back); anything else
            # (a disconnection, a failed rollback, a cancellation) does not keep it.
            if not isinstance(error, Exception) or conn.invalidated or conn.closed or conn.in_transaction():
                if self._kept is conn:
                    self._kept = None
                await _close_quietly(conn)
            raise

    async def _batch_on(self, conn: AsyncConnection, batch: list[_Unit]) -> list[Any]:
        if self._fence is not None and any(unit.writes for unit in batch):
            await conn.run_sync(self._fence.guard)
        rows = _by_table(row for unit in batch for row in unit.rows)
        if rows:
            await conn.run_sync(_insert_rows, rows)
        return [await _run_unit(conn, unit) for unit in batch]


async def _close_quietly(conn: AsyncConnection) -> None:
    """Close ``conn`` for good; a connection that broke may fail to close, which changes nothing."""
    with contextlib.suppress(Exception):
        await conn.invalidate()
        await conn.close()


def _run_reads(conn: Connection, batch: list[_Unit]) -> list[tuple[bool, Any]]:
    """Each read of ``batch`` in turn on ``conn`` (autocommit): (failed, its error) or (ok, its result)."""
    outcomes: list[tuple[bool, Any]] = []
    for unit in batch:
        if unit.done.done() or unit.sync_work is None:  # its caller gave up (cancelled) meanwhile
            outcomes.append((False, None))
            continue
        try:
            outcomes.append((False, unit.sync_work(conn)))
        except Exception as error:
            outcomes.append((True, error))
    return outcomes


async def _run_unit(conn: AsyncConnection, unit: _Unit) -> Any:
    if unit.work is not None:
        return await unit.work(conn)
    if unit.sync_work is not None:
        return await conn.run_sync(unit.sync_work)
    return None


class _SqliteWriter:
    """The committer's side in its SQLite writer thread: a synchronous engine on the file, and one
    connection kept from one batch to the next (a checkout from the pool and its return on every batch
    cost about as much CPU as a lone commit's insert). A batch that fails closes it; the next opens
    another. Between batches it is outside any transaction and holds no lock (WAL)."""

    __slots__ = ("_conn", "_fence", "engine")

    def __init__(self, engine: Engine, fence: WriteFence | None = None) -> None:
        self.engine = engine
        self._fence = fence
        self._conn: Connection | None = None

    def run(self, batch: list[_Unit]) -> list[Any]:
        """The whole batch in one transaction, committed before returning."""
        conn = self._conn
        if conn is None:
            conn = self._conn = self.engine.connect()
        try:
            with conn.begin():
                if self._fence is not None and any(unit.writes for unit in batch):
                    self._fence.guard(conn)
                rows = _by_table(row for unit in batch for row in unit.rows)
                if rows:
                    _insert_rows(conn, rows)
                return [None if unit.sync_work is None else unit.sync_work(conn) for unit in batch]
        except BaseException:
            self._conn = None
            conn.close()
            raise

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        self.engine.dispose()


def _by_table(rows: Any) -> dict[Table, list[dict[str, Any]]]:
    """``rows`` grouped by table, tables in the order they first appear."""
    by_table: dict[Table, list[dict[str, Any]]] = {}
    for table, values in rows:
        by_table.setdefault(table, []).append(values)
    return by_table


def _insert_rows(conn: Connection, by_table: dict[Table, list[dict[str, Any]]]) -> None:
    """One multi-row insert per table."""
    for table, values_list in by_table.items():
        conn.execute(insert(table), values_list)
