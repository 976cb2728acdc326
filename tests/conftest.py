"""Shared fixtures: databases on SQLite and on a real PostgreSQL.

The PostgreSQL server comes from ``TEST_POSTGRES_URL`` (default: the local server CI runs,
``postgresql+asyncpg://postgres@127.0.0.1:5432/postgres``). Each test gets a fresh database that is
dropped afterwards. Where no server is reachable those tests are skipped with a message saying so,
unless ``REQUIRE_POSTGRES=1`` (CI sets it), which makes that a failure.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from sqlalchemy.engine import make_url

from libs.persistence.migrate import migrate
from libs.runtime.config import sqlite_url
from tools.pgcluster import PostgresUnavailable, PrivatePostgres, server_bin

DEFAULT_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


def postgres_admin_url() -> str:
    return os.environ.get("TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)


async def _admin_execute(statement: str) -> None:
    import asyncpg  # the driver itself: CREATE/DROP DATABASE cannot run inside a transaction

    url = make_url(postgres_admin_url())
    connection = await asyncpg.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 5432,
        user=url.username or "postgres",
        password=url.password,
        database=url.database or "postgres",
        timeout=5,
    )
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
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """An empty database on each backend, as an async SQLAlchemy URL."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path_factory.mktemp("db") / "test.db")
        return
    name, url = await create_postgres_database("sc_test")
    try:
        yield url
    finally:
        await drop_postgres_database(name)


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
    return name, make_url(postgres_admin_url()).set(database=name).render_as_string(hide_password=False)


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
