"""Migration 0010 on SQLite and PostgreSQL: ``mm_tables`` and ``mm_matches`` get a ``disconnect_policy``
column; rows written before it read as ``forfeit`` (the rule their matches were created with), new rows
keep what they say, and the downgrade drops the column, keeping the rows."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, insert, inspect, select

from libs.persistence import Database
from libs.persistence.migrate import migrate
from libs.persistence.schema import mm_matches, mm_tables
from tests.libs.persistence.migrations import columns, downgrade_to, schema_diff
from tests.services.matchmaking.rows import match_row, table_row


def _indexes(connection: Connection) -> set[str]:
    return {str(index["name"]) for index in inspect(connection).get_indexes("mm_tables")}


_TABLE_POLICIES = select(mm_tables.c.table_id, mm_tables.c.disconnect_policy)
_MATCH_POLICIES = select(mm_matches.c.match_id, mm_matches.c.disconnect_policy)


def _before(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` as written before migration 0010: without the column."""
    return {key: value for key, value in row.items() if key != "disconnect_policy"}


async def test_0010_reads_existing_rows_as_forfeit_and_its_downgrade_drops_the_column(
    database_url: str,
) -> None:
    await migrate(database_url, "0009_mm_leases")
    db = Database(database_url)
    try:
        async with db.connect() as conn:
            assert "disconnect_policy" not in await conn.run_sync(columns("mm_tables"))
            assert "disconnect_policy" not in await conn.run_sync(columns("mm_matches"))
        async with db.begin() as conn:
            await conn.execute(insert(mm_tables).values(_before(table_row("t-old", "host"))))
            await conn.execute(insert(mm_matches).values(_before(match_row("chess.0.old", "a", "b"))))

        await migrate(database_url, "0010_mm_disconnect_policy")
        async with db.begin() as conn:
            tables = (await conn.execute(_TABLE_POLICIES)).all()
            matches = (await conn.execute(_MATCH_POLICIES)).all()
            assert [tuple(r) for r in tables] == [("t-old", "forfeit")]
            assert [tuple(r) for r in matches] == [("chess.0.old", "forfeit")]
            # a row written since says its policy; one that says none gets the default too
            await conn.execute(
                insert(mm_tables).values({**table_row("t-new", "guest"), "disconnect_policy": "stand_in"})
            )
            await conn.execute(
                insert(mm_matches).values(
                    {**match_row("chess.0.new", "c", "d"), "disconnect_policy": "stand_in"}
                )
            )
            await conn.execute(insert(mm_matches).values(_before(match_row("chess.0.plain", "e", "f"))))
        async with db.connect() as conn:
            tables = (await conn.execute(_TABLE_POLICIES)).all()
            matches = (await conn.execute(_MATCH_POLICIES)).all()
        assert dict(tuple(r) for r in tables) == {"t-old": "forfeit", "t-new": "stand_in"}
        assert dict(tuple(r) for r in matches) == {
            "chess.0.old": "forfeit",
            "chess.0.new": "stand_in",
            "chess.0.plain": "forfeit",
        }

        await downgrade_to(db, database_url, "0009_mm_leases")
        async with db.connect() as conn:
            assert "disconnect_policy" not in await conn.run_sync(columns("mm_tables"))
            assert "disconnect_policy" not in await conn.run_sync(columns("mm_matches"))
            tables = (await conn.execute(select(mm_tables.c.table_id))).scalars().all()
            matches = (await conn.execute(select(mm_matches.c.match_id))).scalars().all()
        assert sorted(tables) == ["t-new", "t-old"]
        assert sorted(matches) == ["chess.0.new", "chess.0.old", "chess.0.plain"]

        # up again: the tables (rebuilt by the batch operations on SQLite) are exactly the schema's, their
        # index and constraints kept
        await migrate(database_url)
        async with db.connect() as conn:
            assert await conn.run_sync(schema_diff) == []
            assert "ix_mm_tables_family_status" in await conn.run_sync(_indexes)
            policies = (await conn.execute(select(mm_tables.c.disconnect_policy))).scalars().all()
        assert policies == ["forfeit", "forfeit"]  # (the downgrade forgot t-new's stand-in)
    finally:
        await db.dispose()
