"""The database-failure classifier against real exceptions from asyncpg, aiosqlite and SQLAlchemy: what
means "the database cannot serve now" (UNAVAILABLE, retry) and what stays a failure (INTERNAL).

Every exception here is produced by the real drivers (a refused port, a locked SQLite file, a PostgreSQL
server of the test's own that is stopped, crashed and restarted), not built by hand, because the
classifier's job is to recognise exactly what they raise, through SQLAlchemy's wrapping.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from sqlalchemy import text

from libs.persistence import database as database_module
from libs.persistence.database import create_engine
from libs.persistence.failures import DATABASE_RETRY_AFTER_MS, database_unavailable, describe
from libs.runtime.errors import Unavailable, translated
from tests.support import free_port
from tools.pgcluster import PrivatePostgres


async def _raised(work: Callable[[], Awaitable[Any]]) -> BaseException:
    """What ``work`` raises (it must raise)."""
    try:
        await work()
    except Exception as error:
        return error
    raise AssertionError("expected the database to fail")


def _unavailable(error: BaseException, *why: str) -> None:
    """``error`` is refused as an unavailable database, for one of the reasons ``why``."""
    refusal = database_unavailable(error)
    assert refusal is not None, f"{type(error).__name__}: {error}"
    assert isinstance(refusal, Unavailable)
    assert refusal.retry_after_ms == DATABASE_RETRY_AFTER_MS
    reasons = [f"the database is unavailable ({w}); retry in {DATABASE_RETRY_AFTER_MS} ms" for w in why]
    assert refusal.message in reasons
    assert translated(error) is not None, "the classifier is registered with the runtime"


def _not_unavailable(error: BaseException) -> None:
    assert describe(error) is None, f"{type(error).__name__}: {error} is a failure, not an outage"
    assert translated(error) is None


async def _select_one(url: str, **engine_kwargs: Any) -> None:
    engine = create_engine(url, **engine_kwargs)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("select 1"))
    finally:
        await engine.dispose()


async def test_a_refused_postgres_connection_is_unavailable() -> None:
    error = await _raised(lambda: _select_one(f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/x"))
    assert isinstance(error, ConnectionRefusedError)  # asyncpg's, unwrapped by SQLAlchemy
    _unavailable(error, "connection refused")


async def test_a_socket_error_that_is_not_the_databases_stays_a_failure() -> None:
    async def elsewhere() -> None:
        raise ConnectionRefusedError(111, "Connection refused")  # not raised in a database driver

    _not_unavailable(await _raised(elsewhere))
    _not_unavailable(await _raised(lambda: asyncio.sleep(0, result=1 // 0)))


async def test_sqlite_locked_past_its_busy_timeout_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("create table t (id integer primary key)")
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    try:
        monkeypatch.setattr(database_module, "SQLITE_BUSY_TIMEOUT_MS", 50)
        engine = create_engine(f"sqlite+aiosqlite:///{path}")

        async def write() -> None:
            async with engine.begin() as conn:
                await conn.execute(text("insert into t values (1)"))

        wrapped = await _raised(write)  # SQLAlchemy's OperationalError around sqlite3's
        await engine.dispose()
        _unavailable(wrapped, "it is locked by another writer")

        async def raw() -> None:
            async with aiosqlite.connect(path, timeout=0) as conn:
                await conn.execute("BEGIN IMMEDIATE")

        _unavailable(await _raised(raw), "it is locked by another writer")  # aiosqlite, unwrapped
    finally:
        holder.execute("ROLLBACK")
        holder.close()


async def test_a_sqlite_file_that_cannot_be_opened_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")

    async def open_it() -> None:
        async with aiosqlite.connect(tmp_path / "a-file" / "x.db") as conn:
            await conn.execute("select 1")

    _unavailable(await _raised(open_it), "its file cannot be opened")


async def test_sqlite_errors_of_the_request_or_the_code_stay_failures(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'plain.db'}")
    try:
        async with engine.begin() as conn:
            await conn.execute(text("create table t (id integer primary key)"))
            await conn.execute(text("insert into t values (1)"))

        async def duplicate() -> None:
            async with engine.begin() as conn:
                await conn.execute(text("insert into t values (1)"))

        async def no_table() -> None:
            async with engine.connect() as conn:
                await conn.execute(text("select * from nowhere"))

        _not_unavailable(await _raised(duplicate))  # IntegrityError
        _not_unavailable(await _raised(no_table))  # OperationalError "no such table": a bug, not an outage
    finally:
        await engine.dispose()


@pytest.mark.postgres
async def test_postgres_outages_are_unavailable_and_the_engine_recovers(
    private_postgres: PrivatePostgres,
) -> None:
    pg = private_postgres
    url = pg.url()
    stale = create_engine(url, pool_pre_ping=False)  # keeps a connection the restart ends
    engine = create_engine(url)  # as services make it: pre-ping on

    async def query(on: Any = engine) -> None:
        async with on.connect() as conn:
            await conn.execute(text("select 1"))

    try:
        await query(stale)
        await query()
        async with engine.begin() as conn:
            await conn.execute(text("create table t (id int primary key)"))
            await conn.execute(text("insert into t values (1)"))

        pg.stop(mode="fast")
        _unavailable(await _raised(query), "connection refused")  # pre-ping drops the dead connection
        pg.start()
        # The pooled connection the restart ended: "terminating connection due to administrator command"
        # on first use, or "connection is closed" when asyncpg saw it go first; either way SQLAlchemy
        # marks it connection_invalidated.
        stale_error = await _raised(lambda: query(stale))
        _unavailable(stale_error, "the server is shutting down", "the connection to it was lost")
        await query(stale)  # and the pool replaces it

        async with engine.connect() as held:  # a connection in use when the server crashes
            await held.execute(text("select 1"))
            pg.stop(mode="immediate")
            _unavailable(
                await _raised(lambda: held.execute(text("select 1"))), "the connection to it was lost"
            )
        pg.start()

        # A server shutting down (a smart stop waits for the sessions still open) refuses new ones.
        async with engine.connect() as held:
            await held.execute(text("select 1"))
            pg._run("pg_ctl", "-D", str(pg.data), "-m", "smart", "-W", "stop")  # no wait
            for _ in range(100):
                shutting = await _raised(lambda: _select_one(url))
                if "shutting down" in str(shutting):
                    break
                await asyncio.sleep(0.05)
            _unavailable(shutting, "the database system is shutting down")
            await held.rollback()
        await engine.dispose()  # the held session ends: the smart stop completes
        for _ in range(200):
            if not pg.running:
                break
            await asyncio.sleep(0.05)
        pg.start()

        # Every connection of the pool busy past its timeout.
        small = create_engine(url, pool_size=1, max_overflow=0, pool_timeout=0.2)
        try:
            async with small.connect() as busy:
                await busy.execute(text("select 1"))
                _unavailable(
                    await _raised(lambda: query(small)),
                    "no connection to it was free within the pool's timeout",
                )
        finally:
            await small.dispose()

        # What the request or the code did wrong stays a failure.
        async def duplicate() -> None:
            async with engine.begin() as conn:
                await conn.execute(text("insert into t values (1)"))

        async def no_table() -> None:
            async with engine.connect() as conn:
                await conn.execute(text("select * from nowhere"))

        _not_unavailable(await _raised(duplicate))
        _not_unavailable(await _raised(no_table))
        await query()  # and after all that the same engine serves again, without being made anew
    finally:
        await stale.dispose()
        await engine.dispose()
