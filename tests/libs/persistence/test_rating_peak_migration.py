"""Migration 0005 on SQLite and PostgreSQL: existing ratings get their peak from their history."""

from __future__ import annotations

from sqlalchemy import insert, select

from libs.persistence import Database
from libs.persistence.migrate import migrate
from libs.persistence.schema import mm_rating_changes, mm_ratings


def _change(match: str, player: str, family: str, before: int, after: int) -> dict[str, object]:
    return {
        "match_id": match,
        "player_id": player,
        "family": family,
        "before": before,
        "after": after,
        "at_ms": 1,
    }


async def test_existing_ratings_get_the_highest_rating_their_history_shows(database_url: str) -> None:
    await migrate(database_url, "0004_matchmaking")
    db = Database(database_url)
    try:
        async with db.begin() as conn:
            # "fallen" climbed to 2410 and fell to 2390; "riser" only went up; "loser" only lost, so its
            # peak is the 1500 it started from; "quiet" has no recorded change. Rows as 0004 had them.
            await conn.execute(
                insert(mm_ratings),
                [
                    {"player_id": "fallen", "family": "chess", "rating": 2390, "games": 50},
                    {"player_id": "fallen", "family": "gin", "rating": 1600, "games": 1},
                    {"player_id": "riser", "family": "chess", "rating": 1540, "games": 2},
                    {"player_id": "loser", "family": "chess", "rating": 1460, "games": 2},
                    {"player_id": "quiet", "family": "chess", "rating": 1700, "games": 0},
                ],
            )
            await conn.execute(
                insert(mm_rating_changes),
                [
                    _change("m1", "fallen", "chess", 2398, 2410),
                    _change("m2", "fallen", "chess", 2410, 2400),
                    _change("m3", "fallen", "chess", 2400, 2390),
                    _change("m4", "fallen", "gin", 1580, 1600),  # another family's history does not mix
                    _change("m1", "riser", "chess", 1500, 1520),
                    _change("m5", "riser", "chess", 1520, 1540),
                    _change("m6", "loser", "chess", 1500, 1480),
                    _change("m7", "loser", "chess", 1480, 1460),
                ],
            )
        await migrate(database_url)
        async with db.connect() as conn:
            rows = await conn.execute(select(mm_ratings.c.player_id, mm_ratings.c.family, mm_ratings.c.peak))
            peaks = {(r.player_id, r.family): r.peak for r in rows}
        assert peaks == {
            ("fallen", "chess"): 2410,
            ("fallen", "gin"): 1600,
            ("riser", "chess"): 1540,
            ("loser", "chess"): 1500,
            ("quiet", "chess"): 1700,
        }
    finally:
        await db.dispose()
