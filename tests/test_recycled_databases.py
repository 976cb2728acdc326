"""The databases ``database_url`` hands out on PostgreSQL are recycled (tests/conftest.py,
:class:`~tests.conftest.RecycledDatabases`): each test's must still be as empty as a new one, under a name no
test had before, and out of reach of whatever kept the old name."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from tests.conftest import RecycledDatabases, _database_url, create_postgres_database, drop_postgres_database

pytestmark = pytest.mark.postgres


async def _connect(name: str) -> Any:
    url = make_url(_database_url(name))
    return await asyncpg.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 5432,
        user=url.username or "postgres",
        password=url.password,
        database=name,
        timeout=5,
    )


async def _contents(name: str) -> dict[str, Any]:
    """What a test could see of a database: its schemas (with owner and privileges), relations, functions,
    types, extensions, large objects and per-database settings."""
    connection = await _connect(name)
    try:
        return {
            "schemas": [
                tuple(row)
                for row in await connection.fetch(
                    "SELECT nspname, pg_get_userbyid(nspowner), nspacl::text, "
                    "obj_description(oid, 'pg_namespace') FROM pg_namespace "
                    "WHERE nspname NOT LIKE 'pg\\_%' ORDER BY nspname"
                )
            ],
            "relations": await connection.fetchval(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'"
            ),
            "functions": await connection.fetchval(
                "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'"
            ),
            "types": await connection.fetchval(
                "SELECT count(*) FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
                "WHERE n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'"
            ),
            "extensions": [row[0] for row in await connection.fetch("SELECT extname FROM pg_extension")],
            "large_objects": await connection.fetchval("SELECT count(*) FROM pg_largeobject_metadata"),
            "settings": await connection.fetchval(
                "SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase "
                "WHERE d.datname = current_database()"
            ),
        }
    finally:
        await connection.close()


async def test_a_recycled_database_is_as_empty_as_a_new_one_under_a_new_name() -> None:
    databases = RecycledDatabases("sc_recycled")
    new_name, _ = await create_postgres_database("sc_recycled_new")
    try:
        new = await _contents(new_name)
        name = await databases.take()
        assert await _contents(name) == new

        # Everything a test might leave behind, and a session it left open.
        connection = await _connect(name)
        left_open = await _connect(name)
        try:
            await connection.execute(
                "CREATE TABLE public.t (id serial PRIMARY KEY, v text);"
                "INSERT INTO public.t (v) VALUES ('x');"
                "CREATE SCHEMA other; CREATE TABLE other.u (id int);"
                "CREATE TYPE public.mood AS ENUM ('ok');"
                "CREATE FUNCTION public.f() RETURNS int LANGUAGE sql AS 'SELECT 1';"
                "CREATE VIEW public.v AS SELECT 1 AS one;"
                "SELECT lo_create(0);"
                f"ALTER DATABASE \"{name}\" SET work_mem = '8MB';"
            )
            await left_open.execute("BEGIN; LOCK TABLE public.t; SELECT pg_advisory_lock(42)")
        finally:
            await connection.close()

        await databases.give_back(name)
        assert left_open.is_closed() or not await _still_answers(left_open)
        again = await databases.take()
        assert again != name  # a new name: whatever still had the old one cannot reach it
        with pytest.raises(asyncpg.InvalidCatalogNameError):
            await (await _connect(name)).close()
        assert await _contents(again) == new
        await databases.give_back(again)
    finally:
        await databases.drop_all()
        await drop_postgres_database(new_name)


async def _still_answers(connection: Any) -> bool:
    try:
        await connection.fetchval("SELECT 1", timeout=2)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ConnectionError):
        return False
    return True
