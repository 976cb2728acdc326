"""Match stores for tests that make their own: each on a database handle of its own, closed (its group
committer, whose writer keeps a connection, and its pool) when the test ends, by the autouse fixture of
``tests/libs/match/conftest.py``. A test that closes its store itself changes nothing (closing twice is
harmless)."""

from __future__ import annotations

from libs.match.store import MatchStore
from libs.persistence import Database

OPENED: list[tuple[MatchStore, Database]] = []


def open_store(url: str, family: str, shard: str = "0") -> MatchStore:
    db = Database(url)
    store = MatchStore(db, family, shard)
    OPENED.append((store, db))
    return store


async def close_opened() -> None:
    while OPENED:
        store, db = OPENED.pop()
        await store.close()
        await db.dispose()
