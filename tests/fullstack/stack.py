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

from libs.launcher import Stack, StartError, find_free_port_offset
from tests.conftest import BACKENDS, create_postgres_database, drop_postgres_database
from tests.fullstack.helpers import Platform
from tests.support import backend_channel

CORE_SERVICES = {"fairness", "clock", "rules-chess", "matchmaking", "gateway"}


async def _start(env: dict[str, str], data_dir: str) -> Stack:
    """The stack on a free port offset (once more if another test run took a port meanwhile)."""
    for attempt in range(3):
        stack = Stack(port_offset=find_free_port_offset(), data_dir=data_dir, echo=False, env=env)
        try:
            await stack.start()
        except StartError as error:
            if "already in use" in error.reason and attempt < 2:
                continue
            raise
        return stack
    raise AssertionError("unreachable")


@pytest_asyncio.fixture(scope="session", loop_scope="session", params=BACKENDS)
async def platform(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Platform]:
    backend: str = request.param
    name = database_url = ""
    if backend == "postgresql":
        name, database_url = await create_postgres_database("sc_fullstack")
    env = {
        # The services' own defaults, whatever the developer's shell exports.
        "SKILLCLASSICS_ENV": "development",
        "GRPC_HOST": "127.0.0.1",
        "MIGRATE_ON_START": "true",
        "LOG_FORMAT": "json",
        "DATABASE_URL": database_url,
    }
    try:
        stack = await _start(env, str(tmp_path_factory.mktemp(f"stack-{backend}")))
        try:
            assert {spec.name for spec in stack.services} >= CORE_SERVICES
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
        finally:
            exits = await stack.stop()
        assert all(code == 0 for code in exits.values()), f"a service did not stop cleanly: {exits}"
    finally:
        if database_url:
            await drop_postgres_database(name)
