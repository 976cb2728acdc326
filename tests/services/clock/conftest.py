"""Fixtures of the clock service tests: a clock service in this event loop on each backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from libs.runtime import RunningServer
from tests.services.clock.support import OWNER, Stub, start
from tests.support import backend_channel


@pytest.fixture
async def server(database_url: str) -> AsyncIterator[RunningServer]:
    running = await start(database_url)
    yield running
    await running.stop(grace=0.5)


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[Stub]:
    async with backend_channel(server.address, OWNER) as channel:  # a rules shard, calling for its timers
        yield Stub(channel)
