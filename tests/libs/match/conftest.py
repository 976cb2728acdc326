"""Every match store a test of this folder opened with :func:`tests.libs.match.stores.open_store` is closed
when the test ends (an unclosed PostgreSQL store leaves its writer's connection to the garbage collector)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from tests.libs.match.stores import close_opened


@pytest_asyncio.fixture(autouse=True)
async def _close_opened_stores() -> AsyncIterator[None]:
    yield
    await close_opened()
