"""The migrations on SQLite and PostgreSQL: they apply, re-apply, match the schema and downgrade."""

from __future__ import annotations

import asyncio

from sqlalchemy import Connection, insert, inspect, select, text

from libs.persistence import Database
from libs.persistence.migrate import migrate
from libs.persistence.schema import fairness_commitments, metadata
from tests.libs.persistence.migrations import downgrade_to, schema_diff


def _table_names(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())


async def test_migrations_create_exactly_the_schema(migrated_url: str) -> None:
    db = Database(migrated_url)
    try:
        async with db.connect() as conn:
            assert await conn.run_sync(schema_diff) == []
            assert {t.name for t in metadata.sorted_tables} <= await conn.run_sync(_table_names)
    finally:
        await db.dispose()


async def test_migrating_twice_and_concurrently_is_harmless(database_url: str) -> None:
    await asyncio.gather(migrate(database_url), migrate(database_url))
    await migrate(database_url)
    db = Database(database_url)
    try:
        async with db.connect() as conn:
            version = await conn.scalar(text("SELECT version_num FROM alembic_version"))
        assert version is not None
    finally:
        await db.dispose()


async def test_downgrade_to_base_removes_the_tables(migrated_url: str) -> None:
    db = Database(migrated_url)
    try:
        await downgrade_to(db, migrated_url, "base")
        async with db.connect() as conn:
            assert "fairness_commitments" not in await conn.run_sync(_table_names)
    finally:
        await db.dispose()


async def test_a_committed_row_is_visible_to_a_new_engine(migrated_url: str) -> None:
    row = {
        "match_id": "m-1",
        "commitment": "0" * 64,
        "seed_ciphertext": b"c",
        "seed_nonce": b"n",
        "seed_key_id": "k",
        "idempotency_key": "i",
        "state": "open",
        "committed_at_ms": 1,
        "finished_at_ms": None,
    }
    first = Database(migrated_url)
    async with first.begin() as conn:
        await conn.execute(insert(fairness_commitments).values(row))
    await first.dispose()
    second = Database(migrated_url)
    try:
        async with second.connect() as conn:
            found = (await conn.execute(select(fairness_commitments))).one()
        assert found.match_id == "m-1"
        assert bytes(found.seed_ciphertext) == b"c"
    finally:
        await second.dispose()
