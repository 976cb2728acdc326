"""The stack for the full-stack tests: started once per database backend for the whole folder.

On SQLite each service has its own file under the stack's data folder (as ``make run`` does); on
PostgreSQL every service shares one fresh database, as in production (one schema for the shared store,
one ``DATABASE_URL`` secret). The services migrate at start.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import AsyncIterator

import grpc
import pytest
import pytest_asyncio
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.rules.v1 import rules_pb2_grpc
from sqlalchemy.engine import make_url

from libs.launcher import Stack, StartError, find_free_port_offset
from tests.conftest import BACKENDS, _admin_execute, _postgres_unreachable_reason, postgres_admin_url
from tests.fullstack.helpers import Platform

TOKEN_KEY = bytes(range(7, 39))
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
        reason = await _postgres_unreachable_reason()
        if reason is not None:
            message = f"PostgreSQL not reachable at {postgres_admin_url()} ({reason}); set TEST_POSTGRES_URL"
            if os.environ.get("REQUIRE_POSTGRES") == "1":
                pytest.fail(message + " (REQUIRE_POSTGRES=1)")
            pytest.skip(message)
        name = f"sc_fullstack_{uuid.uuid4().hex[:16]}"
        await _admin_execute(f'CREATE DATABASE "{name}"')
        database_url = make_url(postgres_admin_url()).set(database=name).render_as_string(hide_password=False)
    env = {
        # The services' own defaults, whatever the developer's shell exports.
        "SKILLCLASSICS_ENV": "development",
        "GRPC_HOST": "127.0.0.1",
        "MIGRATE_ON_START": "true",
        "LOG_FORMAT": "json",
        "DATABASE_URL": database_url,
        "GATEWAY_TOKEN_KEY": base64.b64encode(TOKEN_KEY).decode(),
    }
    try:
        stack = await _start(env, str(tmp_path_factory.mktemp(f"stack-{backend}")))
        try:
            assert {spec.name for spec in stack.services} >= CORE_SERVICES
            async with (
                grpc.aio.insecure_channel(stack.address("gateway")) as gateway,
                grpc.aio.insecure_channel(stack.address("rules-chess")) as rules,
            ):
                yield Platform(
                    stack,
                    backend,
                    database_url,
                    TOKEN_KEY,
                    gateway_pb2_grpc.GatewayServiceStub(gateway),
                    rules_pb2_grpc.RulesServiceStub(rules),
                )
        finally:
            exits = await stack.stop()
        assert all(code == 0 for code in exits.values()), f"a service did not stop cleanly: {exits}"
    finally:
        if database_url:
            await _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
