"""Fixtures of the matchmaking tests: its store on a migrated database on each backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from libs.persistence import Database
from services.matchmaking.store import MatchmakingStore


@pytest.fixture
async def store(migrated_url: str) -> AsyncIterator[MatchmakingStore]:
    db = Database(migrated_url)
    store = MatchmakingStore(db)
    yield store
    await store.close()
    await db.dispose()
