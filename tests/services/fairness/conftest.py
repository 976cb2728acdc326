"""Fixtures of the fairness service tests: the service in this event loop on each backend, and a stub
calling each method as its real caller: matchmaking commits, the gateway adds client seeds, and
rules-gin-0, which owns every match here (``gin.0.*``), draws, finishes and reveals (so a refusal is the
stream's own rule, which holds even for the rightful caller)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from skillclassics.fairness.v1 import fairness_pb2_grpc

from libs.runtime import RunningServer
from tests.callers import Callers, fairness_callers
from tests.support import start_fairness


@pytest.fixture
async def server(database_url: str, tmp_path: Path) -> AsyncIterator[RunningServer]:
    running = await start_fairness(database_url, tmp_path)
    yield running
    await running.stop(grace=1)


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[fairness_pb2_grpc.FairnessServiceStub]:
    async with Callers(server.address) as callers:
        yield callers.stub(fairness_pb2_grpc.FairnessServiceStub, fairness_callers("rules-gin-0"))
