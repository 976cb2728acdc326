"""The async engine and session factory, set up so that a commit is durable when it returns.

SQLite runs in WAL mode with ``synchronous=FULL`` (a committed transaction survives a power cut, not just
a crash) and every transaction begins with ``BEGIN IMMEDIATE``, so two writers queue on the busy timeout
instead of failing with "database is locked" when a read turns into a write.

For SQLite, :func:`sqlite_writer_engine` also gives a synchronous engine on the same file, configured the
same way, for the group committer's writes: through the async driver (aiosqlite) every statement is three
trips to its thread (cursor, execute, close) and a transaction about eight, which cost about 1.3 ms of CPU
per commit against 0.08 ms for SQLite itself (docs/performance.md, "Fourth round"); a batch of plain
writes runs instead as one trip to a writer thread of the committer's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, async_sessionmaker, create_async_engine

SQLITE_BUSY_TIMEOUT_MS = 30_000


def is_sqlite(url: str) -> bool:
    """Whether ``url`` names a SQLite database."""
    return make_url(url).get_backend_name() == "sqlite"


def create_engine(url: str, **kwargs: Any) -> AsyncEngine:
    """An async engine for ``url``; for SQLite the folder is created and the pragmas set."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        kwargs.setdefault("pool_pre_ping", True)
        kwargs.setdefault("pool_size", 10)
        return create_async_engine(url, **kwargs)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    # One connection per process: SQLite has one writer anyway, and queueing in the pool is fair and
    # cheap where contending on the file lock means sleeping in the busy handler (long tail latency).
    kwargs.setdefault("pool_size", 1)
    kwargs.setdefault("max_overflow", 0)
    engine = create_async_engine(url, **kwargs)
    _configure_sqlite(engine.sync_engine)
    return engine


def sqlite_writer_url(url: str) -> URL | None:
    """The synchronous driver's URL for ``url``'s SQLite file; ``None`` when ``url`` is not a SQLite file."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return parsed.set(drivername="sqlite+pysqlite")


def sqlite_writer_engine(url: str) -> Engine | None:
    """A synchronous engine on ``url``'s SQLite file, configured like :func:`create_engine`'s (WAL,
    ``synchronous=FULL``, ``BEGIN IMMEDIATE``), with one connection, for one writer thread; ``None``
    when ``url`` is not a SQLite file (another database, or ``:memory:``, which a second engine would not
    share)."""
    parsed = sqlite_writer_url(url)
    if parsed is None:
        return None
    Path(str(parsed.database)).parent.mkdir(parents=True, exist_ok=True)
    engine = create_sync_engine(
        parsed,
        pool_size=1,
        max_overflow=0,
        connect_args={"check_same_thread": False},  # made and used in the writer thread; disposed after it
    )
    _configure_sqlite(engine)
    return engine


def _ensure_wal(cursor: Any) -> None:
    """Put the database in WAL mode (persistent, so this is done once per file).

    Two processes opening a brand-new file at once both try; the loser is refused at once ("database is
    locked": SQLite does not wait on its busy handler to change the journal mode) while the winner has
    already done it, so the mode is read again before trying again.
    """
    for attempt in range(100):
        cursor.execute("PRAGMA journal_mode")
        if str(cursor.fetchone()[0]).lower() == "wal":
            return
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except Exception as error:  # the driver's OperationalError, wrapped differently per adapter
            if "locked" not in str(error) or attempt == 99:
                raise
            time.sleep(0.01)  # only while a new file is being created by someone else


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy emit BEGIN itself (below) instead of the driver's implicit deferred BEGIN.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        # The busy timeout first, so that what follows waits for another connection's lock.
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        # Switching to WAL needs the database to itself: do it only once per file (the mode is
        # persistent), never while another connection is, say, migrating it.
        _ensure_wal(cursor)
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


class Database:
    """A service's database: the engine plus helpers for short transactions."""

    def __init__(self, url: str, **engine_kwargs: Any) -> None:
        self.url = url
        self.engine = create_engine(url, **engine_kwargs)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        # On a SQLite file, the group committer's writer thread has a connection of its own: the gate
        # keeps the process at one connection in use at a time, as the async engine's one-connection
        # pool alone did before. Without it a read (which begins IMMEDIATE too) and the thread's write
        # would meet in SQLite's busy handler, which sleeps in steps of up to 100 ms.
        self._gate: asyncio.Lock | None = asyncio.Lock() if sqlite_writer_url(url) else None

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    def begin(self) -> Any:
        """``async with db.begin() as conn:`` runs a transaction that commits on success."""
        return self.engine.begin() if self._gate is None else self._gated(self._gate, self.engine.begin)

    def connect(self) -> Any:
        """``async with db.connect() as conn:`` a connection without an implicit commit (reads)."""
        return self.engine.connect() if self._gate is None else self._gated(self._gate, self.engine.connect)

    def exclusive(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """Hold the SQLite gate (no connection): for the group committer's writer thread."""
        return self._gate if self._gate is not None else contextlib.nullcontext()

    @staticmethod
    @contextlib.asynccontextmanager
    async def _gated(
        gate: asyncio.Lock, open_connection: Callable[[], Any]
    ) -> AsyncIterator[AsyncConnection]:
        async with gate, open_connection() as conn:
            yield conn

    async def dispose(self) -> None:
        await self.engine.dispose()


__all__ = ["AsyncConnection", "Database", "create_engine", "is_sqlite", "sqlite_writer_engine"]
