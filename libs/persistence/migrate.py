"""Apply the Alembic migrations: ``python -m libs.persistence.migrate`` (or ``make migrate``).

Services call :func:`migrate` at start. On PostgreSQL a transaction-scoped advisory lock makes replicas
that start together migrate one at a time.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url

from libs.persistence.database import create_engine

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_ADVISORY_LOCK_ID = 0x5C_1A55_1C5  # "SkillClassics", as far as hex goes


def alembic_config(url: str) -> Config:
    """An Alembic configuration for ``url`` without an ini file."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


async def migrate(url: str, revision: str = "head") -> None:
    """Upgrade the database at ``url`` to ``revision``."""
    engine = create_engine(url)
    try:
        async with engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                await connection.execute(text(f"SELECT pg_advisory_xact_lock({_ADVISORY_LOCK_ID})"))
            await connection.run_sync(_upgrade, url, revision)
    finally:
        await engine.dispose()


def _upgrade(connection: Connection, url: str, revision: str) -> None:
    config = alembic_config(url)
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


def main() -> int:
    from libs.runtime.config import ServiceConfig  # the default URL is the runtime's, per service

    service = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SERVICE", "fairness")
    url = ServiceConfig.from_env(service).database_url
    asyncio.run(migrate(url))
    print(f"migrated {make_url(url).render_as_string(hide_password=True)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
