"""Migration 0011 on SQLite and PostgreSQL: ``mm_tables`` gets ``updated_at_ms`` (when its status last
changed); rows from before it have none, new rows say it, the downgrade drops the column and keeps the
rows, and up again the schema is exactly the one the code declares."""

from __future__ import annotations

from sqlalchemy import insert, select

from libs.persistence import Database
from libs.persistence.migrate import migrate
from libs.persistence.schema import mm_tables
from tests.libs.persistence.migrations import columns, downgrade_to, schema_diff
from tests.services.matchmaking.rows import table_row

_UPDATED = select(mm_tables.c.table_id, mm_tables.c.updated_at_ms).order_by(mm_tables.c.table_id)


async def test_0011_adds_when_a_table_last_changed_and_its_downgrade_drops_it(database_url: str) -> None:
    await migrate(database_url, "0010_mm_disconnect_policy")
    db = Database(database_url)
    try:
        async with db.begin() as conn:
            assert "updated_at_ms" not in await conn.run_sync(columns("mm_tables"))
            await conn.execute(insert(mm_tables).values(table_row("t-old", "host")))

        await migrate(database_url, "0011_mm_table_updated")
        async with db.begin() as conn:
            await conn.execute(insert(mm_tables).values({**table_row("t-new", "guest"), "updated_at_ms": 42}))
        async with db.connect() as conn:
            assert [tuple(r) for r in (await conn.execute(_UPDATED)).all()] == [
                ("t-new", 42),
                ("t-old", None),
            ]

        await downgrade_to(db, database_url, "0010_mm_disconnect_policy")
        async with db.connect() as conn:
            assert "updated_at_ms" not in await conn.run_sync(columns("mm_tables"))
            kept = (await conn.execute(select(mm_tables.c.table_id))).scalars().all()
        assert sorted(kept) == ["t-new", "t-old"]

        await migrate(database_url)
        async with db.connect() as conn:
            assert await conn.run_sync(schema_diff) == []
    finally:
        await db.dispose()
