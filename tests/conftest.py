"""Shared fixtures: databases on SQLite and on a real PostgreSQL.

The PostgreSQL server comes from ``TEST_POSTGRES_URL`` (default: the local server CI runs,
``postgresql+asyncpg://postgres@127.0.0.1:5432/postgres``). Each test gets an empty database of its own,
under a name no test had before: recycled, emptied and renamed, rather than created and dropped for each
test (:class:`RecycledDatabases`). Where no server is reachable those tests are skipped with a message
saying so, unless ``REQUIRE_POSTGRES=1`` (CI sets it), which makes that a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy.engine import make_url

from libs.persistence.migrate import migrate
from libs.runtime.config import sqlite_url
from tools.pgcluster import PostgresUnavailable, PrivatePostgres, server_bin

DEFAULT_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]

# The full-stack ``platform`` fixture (one stack per backend for the whole session): defined once, here, for
# both folders that use it (tests/fullstack and tests/examples), so they share its stacks.
pytest_plugins = ["tests.fullstack.stack"]


def postgres_admin_url() -> str:
    return os.environ.get("TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)


async def _admin_connect() -> Any:
    import asyncpg  # the driver itself: CREATE/DROP DATABASE cannot run inside a transaction

    url = make_url(postgres_admin_url())
    return await asyncpg.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 5432,
        user=url.username or "postgres",
        password=url.password,
        database=url.database or "postgres",
        timeout=5,
    )


async def _admin_execute(statement: str) -> None:
    connection = await _admin_connect()
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


async def _postgres_unreachable_reason() -> str | None:
    try:
        await asyncio.wait_for(_admin_execute("SELECT 1"), timeout=6)
    except (OSError, TimeoutError, Exception) as error:  # any failure to connect means "not here"
        return f"{type(error).__name__}: {error}"
    return None


def pytest_configure(config: pytest.Config) -> None:
    """Every service a test starts runs with mutual TLS: one development PKI for the whole session."""
    import tempfile
    from pathlib import Path

    from tests.support import use_session_pki

    if not os.environ.get("TLS_DIR"):
        use_session_pki(Path(tempfile.mkdtemp(prefix="skillclassics-pki-")))


@pytest.fixture(params=BACKENDS)
async def database_url(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    recycled_postgres_databases: RecycledDatabases,
) -> AsyncIterator[str]:
    """An empty database on each backend, as an async SQLAlchemy URL. On PostgreSQL a database of its own,
    under a name no other test has had, emptied as if new (:class:`RecycledDatabases`)."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path_factory.mktemp("db") / "test.db")
        return
    name = await recycled_postgres_databases.take()
    try:
        yield _database_url(name)
    finally:
        await recycled_postgres_databases.give_back(name)


def _database_url(name: str) -> str:
    return make_url(postgres_admin_url()).set(database=name).render_as_string(hide_password=False)


_EMPTY_THE_DATABASE = """
DO $$
DECLARE found record;
BEGIN
    FOR found IN SELECT extname FROM pg_extension WHERE extname <> 'plpgsql' LOOP
        EXECUTE format('DROP EXTENSION IF EXISTS %I CASCADE', found.extname);
    END LOOP;
    FOR found IN
        SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'
    LOOP
        EXECUTE format('DROP SCHEMA %I CASCADE', found.nspname);
    END LOOP;
    PERFORM lo_unlink(oid) FROM pg_largeobject_metadata;
END $$;
"""
"""Everything a test can leave in a database of its own: every schema but the system ones (``public``
included, with every table, sequence, type, function and view in them), extensions and large objects."""


class RecycledDatabases:
    """Empty PostgreSQL databases for the tests, one per test, recycled instead of created and dropped
    each time: ``CREATE DATABASE`` copies ``template1`` and takes about 0.4 s on the test machines, and
    some 300 test instances run on PostgreSQL, while emptying one takes some 30 ms.

    When a test is done with its database, every session still connected to it is ended (a service the
    test left running, a pool it did not dispose), the database is renamed to a name never used before
    (so nothing that still has the old URL, a process that outlived its test, can reach it again), and
    everything in it is dropped: every non-system schema, ``public`` included, with all it holds, every
    extension, every large object and every per-database setting; then ``public`` is made again as
    ``CREATE DATABASE`` makes it. So the next test gets a database as empty as a new one, under its own
    name. Whenever any of this fails the database is dropped instead (``DROP DATABASE ... WITH (FORCE)``,
    as before) and the next test gets a new one."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._free: list[str] = []

    def _new_name(self) -> str:
        return f"{self._prefix}_{uuid.uuid4().hex[:16]}"

    async def take(self) -> str:
        """The name of an empty database for one test (a new one when none is free)."""
        if self._free:
            return self._free.pop()
        name, _ = await create_postgres_database(self._prefix)
        return name

    async def give_back(self, name: str) -> None:
        """Empty ``name`` under a new name and keep it for the next test; drop it if that fails."""
        import asyncpg

        fresh = self._new_name()
        try:
            admin = await _admin_connect()
            try:
                await self._rename_when_free(admin, name, fresh)
                name = fresh
                await admin.execute(f'ALTER DATABASE "{fresh}" RESET ALL')
            finally:
                await admin.close()
            url = make_url(_database_url(fresh))
            connection = await asyncpg.connect(
                host=url.host or "127.0.0.1",
                port=url.port or 5432,
                user=url.username or "postgres",
                password=url.password,
                database=fresh,
                timeout=5,
            )
            try:
                await connection.execute(_EMPTY_THE_DATABASE)
                if connection.get_server_version().major >= 15:  # as CREATE DATABASE makes it since 15
                    await connection.execute(
                        "CREATE SCHEMA public AUTHORIZATION pg_database_owner;"
                        "GRANT USAGE ON SCHEMA public TO PUBLIC;"
                        "COMMENT ON SCHEMA public IS 'standard public schema'"
                    )
                else:
                    await connection.execute(
                        "CREATE SCHEMA public; GRANT ALL ON SCHEMA public TO PUBLIC;"
                        "COMMENT ON SCHEMA public IS 'standard public schema'"
                    )
                left = await connection.fetchval(
                    "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'"
                )
                assert left == 0, f"{left} relations left in {fresh}"
            finally:
                await connection.close()
        except Exception:
            await drop_postgres_database(name)
            return
        self._free.append(fresh)

    @staticmethod
    async def _rename_when_free(admin: Any, name: str, fresh: str) -> None:
        """End every session on ``name``, then rename it (which PostgreSQL refuses while any is left)."""
        import asyncpg

        for _ in range(100):  # pg_terminate_backend only signals: the sessions end a moment later
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = $1 AND pid <> pg_backend_pid()",
                name,
            )
            try:
                await admin.execute(f'ALTER DATABASE "{name}" RENAME TO "{fresh}"')
            except asyncpg.ObjectInUseError:
                await asyncio.sleep(0.02)
                continue
            return
        raise TimeoutError(f"sessions on {name} did not end")

    async def drop_all(self) -> None:
        while self._free:
            await drop_postgres_database(self._free.pop())


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def recycled_postgres_databases() -> AsyncIterator[RecycledDatabases]:
    """The databases ``database_url`` hands out on PostgreSQL, dropped at the end of the session."""
    databases = RecycledDatabases("sc_test")
    try:
        yield databases
    finally:
        with contextlib.suppress(Exception):
            await databases.drop_all()


async def create_postgres_database(prefix: str) -> tuple[str, str]:
    """A fresh, empty PostgreSQL database: its name and async URL. Skips the test when no server is
    reachable (fails instead with ``REQUIRE_POSTGRES=1``, as in CI)."""
    reason = await _postgres_unreachable_reason()
    if reason is not None:
        message = f"PostgreSQL not reachable at {postgres_admin_url()} ({reason}); set TEST_POSTGRES_URL"
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            pytest.fail(message + " (REQUIRE_POSTGRES=1)")
        pytest.skip(message)
    name = f"{prefix}_{uuid.uuid4().hex[:16]}"
    await _admin_execute(f'CREATE DATABASE "{name}"')
    return name, _database_url(name)


async def drop_postgres_database(name: str) -> None:
    await _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """A PostgreSQL server of the test's own (tools.pgcluster), which the test may stop, crash and restart:
    never the shared server. Marked postgres by the test that uses it. Skips when PostgreSQL's server
    programs are not installed (fails instead with ``REQUIRE_POSTGRES=1``, as in CI, which installs them)."""
    try:
        server_bin()
    except PostgresUnavailable as error:
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            pytest.fail(f"{error} (REQUIRE_POSTGRES=1)")
        pytest.skip(str(error))
    cluster = PrivatePostgres.create()
    try:
        yield cluster
    finally:
        cluster.remove()


@pytest.fixture
async def migrated_url(database_url: str) -> str:
    """A database on each backend with every migration applied."""
    await migrate(database_url)
    return database_url


# -- leaving the process --------------------------------------------------------------------------------
#
# grpc.aio leaves a poller thread behind once the event loops of the tests have closed. At the end of the
# session pytest's unraisable-exception plugin runs gc.collect(), a finalizer of grpc's then joins that
# thread, and the join can wait for many minutes (seen: 12) although every test has passed. So once the
# session has finished and reported, the process leaves at once with the session's exit status.

_exit_status: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status.append(int(exitstatus))


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if _exit_status and os.environ.get("PYTEST_KEEP_PROCESS") != "1":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[-1])
