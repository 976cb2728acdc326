"""What the migration tests share: downgrading a database to a revision, comparing its schema with the
one the code declares, and reading a table's columns."""

from __future__ import annotations

from collections.abc import Callable

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, inspect

from libs.persistence import Database
from libs.persistence.migrate import alembic_config
from libs.persistence.schema import metadata


async def downgrade_to(db: Database, url: str, revision: str) -> None:
    """Run alembic's downgrade of ``url`` to ``revision`` (``"base"``: nothing) on one of ``db``'s
    connections, in one transaction."""

    def downgrade(connection: Connection) -> None:
        config = alembic_config(url)
        config.attributes["connection"] = connection
        command.downgrade(config, revision)

    async with db.begin() as conn:
        await conn.run_sync(downgrade)


def schema_diff(connection: Connection) -> list[object]:
    """How the database's schema differs from the one the code declares (empty: not at all)."""
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, metadata))


def columns(table: str) -> Callable[[Connection], set[str]]:
    """A reader (for ``run_sync``) of the names of ``table``'s columns."""

    def read(connection: Connection) -> set[str]:
        return {column["name"] for column in inspect(connection).get_columns(table)}

    return read
