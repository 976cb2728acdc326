"""The stack for the full-stack tests and the examples: started once per database backend for the whole
session, whichever folders use it (a pytest plugin that ``tests/conftest.py`` loads, so that
``tests/fullstack`` and ``tests/examples`` share one fixture, and with it one stack per backend, instead of
each folder starting its own).

On SQLite each service has its own file under the stack's data folder (as ``make run`` does); on
PostgreSQL every service shares one fresh database, as in production (one schema for the shared store,
one ``DATABASE_URL`` secret). The services migrate at start.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
import pytest_asyncio
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.rules.v1 import rules_pb2_grpc

from libs.launcher import ServiceSpec, Stack, start_on_free_ports
from tests.conftest import BACKENDS, create_postgres_database, drop_postgres_database
from tests.fullstack.helpers import Platform
from tests.support import backend_channel, stack_port_offset

CORE_SERVICES = {"fairness", "clock", "rules-chess", "matchmaking", "gateway"}


def stack_env(database_url: str, **settings: str) -> dict[str, str]:
    """A test stack's environment: the services' own defaults, whatever the developer's shell exports,
    ``database_url`` (empty: a SQLite file per service) and ``settings``."""
    return {
        "SKILLCLASSICS_ENV": "development",
        "GRPC_HOST": "127.0.0.1",
        "MIGRATE_ON_START": "true",
        "LOG_FORMAT": "json",
        "DATABASE_URL": database_url,
        **settings,
    }


async def start_stack(
    env: dict[str, str], data_dir: str, services: tuple[ServiceSpec, ...] | None = None
) -> Stack:
    """The stack (of ``services``, default every one) on a free port offset in this worker's range
    (another if another test run took a port meanwhile)."""

    def build() -> Stack:
        if services is None:
            return Stack(port_offset=stack_port_offset(), data_dir=data_dir, echo=False, env=env)
        offset = stack_port_offset(services)
        return Stack(services, port_offset=offset, data_dir=data_dir, echo=False, env=env)

    return await start_on_free_ports(build)


class _Stacks:
    """Each backend's stack, started the first time a test asks for it and stopped when the session ends.

    ``platform`` is parametrized by backend, and pytest tears a session fixture down whenever the next test
    wants the other parameter; with ``--dist loadfile`` a worker runs each file's SQLite and PostgreSQL
    tests one after the other, so the stacks themselves live here, outside that fixture, or every file
    would start both again (about 15 s each)."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._tmp = tmp_path_factory
        self._started: dict[str, tuple[Stack, str]] = {}
        self._databases: list[str] = []

    async def get(self, backend: str) -> tuple[Stack, str]:
        """The stack of ``backend`` and its database URL (empty on SQLite: a file per service)."""
        if backend not in self._started:
            database_url = ""
            if backend == "postgresql":
                name, database_url = await create_postgres_database("sc_fullstack")
                self._databases.append(name)
            stack = await start_stack(stack_env(database_url), str(self._tmp.mktemp(f"stack-{backend}")))
            assert {spec.name for spec in stack.services} >= CORE_SERVICES
            self._started[backend] = (stack, database_url)
        return self._started[backend]

    async def close(self) -> None:
        try:
            for stack, _ in self._started.values():
                exits = await stack.stop()
                assert all(code == 0 for code in exits.values()), f"a service did not stop cleanly: {exits}"
        finally:
            for name in self._databases:
                await drop_postgres_database(name)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def _stacks(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[_Stacks]:
    stacks = _Stacks(tmp_path_factory)
    try:
        yield stacks
    finally:
        await stacks.close()


@pytest_asyncio.fixture(scope="session", loop_scope="session", params=BACKENDS)
async def platform(request: pytest.FixtureRequest, _stacks: _Stacks) -> AsyncIterator[Platform]:
    backend: str = request.param
    stack, database_url = await _stacks.get(backend)
    async with (
        grpc.aio.insecure_channel(stack.address("gateway")) as gateway,  # the players' door
        # rules-chess as matchmaking: creating matches the lobby would not make (the stack's
        # services use the session's PKI: TLS_DIR is in the environment they inherit)
        backend_channel(stack.address("rules-chess"), "matchmaking") as rules,
    ):
        yield Platform(
            stack,
            backend,
            database_url,
            gateway_pb2_grpc.GatewayServiceStub(gateway),
            rules_pb2_grpc.RulesServiceStub(rules),
        )
