"""Migration 0008 on SQLite and PostgreSQL: it creates matchmaking's formations table (keyed by player and
name) and its downgrade removes it, leaving the rest."""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, insert, inspect, select
from sqlalchemy.exc import IntegrityError

from libs.persistence import Database
from libs.persistence.migrate import migrate
from libs.persistence.schema import mm_formations
from tests.libs.persistence.migrations import downgrade_to


def _tables(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())


def _primary_key(connection: Connection) -> list[str]:
    return list(inspect(connection).get_pk_constraint("mm_formations")["constrained_columns"])


async def test_0008_creates_the_formations_table_and_its_downgrade_removes_it(database_url: str) -> None:
    await migrate(database_url, "0007_shard_owners")
    db = Database(database_url)
    try:
        async with db.connect() as conn:
            assert "mm_formations" not in await conn.run_sync(_tables)
        await migrate(database_url, "0008_formations")
        async with db.connect() as conn:
            assert "mm_formations" in await conn.run_sync(_tables)
            assert await conn.run_sync(_primary_key) == ["player_id", "name"]
        row = {"player_id": "alice", "name": "Wall", "text": "a1=FLG", "created_at_ms": 1, "updated_at_ms": 1}
        async with db.begin() as conn:
            await conn.execute(insert(mm_formations).values(row))
            await conn.execute(insert(mm_formations).values({**row, "player_id": "bob"}))
        with pytest.raises(IntegrityError):  # one formation of a name per player
            async with db.begin() as conn:
                await conn.execute(insert(mm_formations).values(row))
        async with db.connect() as conn:
            assert len((await conn.execute(select(mm_formations))).all()) == 2

        await downgrade_to(db, database_url, "0007_shard_owners")
        async with db.connect() as conn:
            tables = await conn.run_sync(_tables)
        assert "mm_formations" not in tables
        assert {"mm_ratings", "shard_owners"} <= tables
    finally:
        await db.dispose()
