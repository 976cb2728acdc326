"""The chess rules service in this process on each database, and a stub for it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from skillclassics.rules.v1 import rules_pb2_grpc

from libs.runtime import RunningServer
from services.rules_chess.service import chess_rules_service
from tests.callers import RULES_CALLERS, Callers
from tests.support import start_in_process


async def start_rules_chess(url: str, env: dict[str, str] | None = None) -> RunningServer:
    return await start_in_process("rules-chess", chess_rules_service, url, env)


@pytest.fixture
async def server(database_url: str) -> AsyncIterator[RunningServer]:
    running = await start_rules_chess(database_url)
    yield running
    await running.stop(grace=0.5)


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[rules_pb2_grpc.RulesServiceStub]:
    """Each method called as its real caller: matchmaking creates, the gateway plays, the operator lists."""
    async with Callers(server.address) as callers:
        yield callers.stub(rules_pb2_grpc.RulesServiceStub, RULES_CALLERS)
