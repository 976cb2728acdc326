"""The K = 10 rule across games, through the matchmaking store on SQLite and PostgreSQL: a player who
ever reached 2400 keeps K = 10 after dropping below it, because the peak is stored with the rating."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import insert

from libs.persistence import Database
from libs.persistence.schema import mm_ratings
from services.matchmaking.store import MatchmakingStore
from tests.services.matchmaking.rows import match_row

_ids = itertools.count()


@pytest.fixture
async def db(migrated_url: str) -> AsyncIterator[Database]:
    database = Database(migrated_url)
    yield database
    await database.dispose()


async def veteran(db: Database, player: str, rating: int) -> None:
    """A player past the provisional 30 games, who never held more than ``rating``."""
    async with db.begin() as conn:
        await conn.execute(
            insert(mm_ratings).values(player_id=player, family="chess", rating=rating, games=40, peak=rating)
        )


async def play(store: MatchmakingStore, white: str, black: str, winner: int | None) -> tuple[int, int]:
    """A rated chess game through the store (paired from the queue, result recorded); both changes."""
    match_id = f"chess.0.peak{next(_ids)}"
    for player in (white, black):
        await store.enter_queue(
            {
                "player_id": player,
                "pool": "p",
                "family": "chess",
                "request": b"",
                "rating": 0,
                "entered_at_ms": 1,
            }
        )
    match = match_row(match_id, white, black)
    assert await store.pair(white, black, match)
    recorded = await store.record_result(match_id, b"", winner, False, 2)
    assert recorded is not None
    first, second = recorded[1]
    return first.after - first.before, second.after - second.before


async def test_reaching_2400_keeps_k_10_after_dropping_below(db: Database) -> None:
    await veteran(db, "hero", 2395)
    for rival in ("r1", "r2", "r3"):
        await veteran(db, rival, 2395)
    await veteran(db, "r4", 2390)
    store = MatchmakingStore(db)

    assert await play(store, "hero", "r1", 0) == (10, -10)  # K = 20 both: 2405, the hero's peak
    assert await play(store, "hero", "r2", 1) == (-5, 10)  # now K = 10 for the hero (2400), 20 for r2
    assert await play(store, "hero", "r3", 1) == (-5, 10)  # 2395: below 2400 again
    await store.close()
    hero = await store.rating("hero", "chess")
    assert (hero.rating, hero.games, hero.peak) == (2395, 43, 2405)

    # A fresh store on a fresh engine reads the peak back from the database: K is still 10.
    fresh = Database(db.url)
    try:
        again = MatchmakingStore(fresh)
        # hero 2395 (K 10) vs r4 2390 (K 20); expected score of the hero 0.5072: a loss is 10 * -0.5072
        assert await play(again, "r4", "hero", 0) == (10, -5)  # (with K = 20 the hero would lose 10)
        current, history = await again.ratings("hero")
        await again.close()
    finally:
        await fresh.dispose()
    assert [(r["rating"], r["games"], r["peak"]) for r in current] == [(2390, 44, 2405)]
    assert [(c["before"], c["after"]) for c in history][-1] == (2395, 2390)


async def test_a_new_rating_row_starts_with_its_peak(db: Database) -> None:
    store = MatchmakingStore(db)
    assert await play(store, "n1", "n2", 1) == (-20, 20)  # provisional: K = 40
    await store.close()
    loser, winner = await store.rating("n1", "chess"), await store.rating("n2", "chess")
    assert (loser.rating, loser.peak) == (1480, 1500)  # the 1500 it started from was held
    assert (winner.rating, winner.peak) == (1520, 1520)
