"""Apply the Alembic migrations: ``python -m libs.persistence.migrate [SERVICE ...]`` (or ``make migrate``).

Each service keeps its own database (``DATA_DIR/<service>.db`` by default, or ``DATABASE_URL``). Without
arguments every service of the stack that has a database is migrated; naming services (or setting
``SERVICE``) migrates only those. Services also call :func:`migrate` at start. On PostgreSQL a
transaction-scoped advisory lock makes replicas that start together migrate one at a time.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
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


SERVICES_WITHOUT_DATABASE = frozenset({"gateway"})
"""Services of the stack that keep no database (``make migrate`` skips them)."""


def database_services() -> tuple[str, ...]:
    """The services of the local stack that exist and keep a database, in start order."""
    from libs.launcher.registry import available_services  # the stack's list of services

    return tuple(spec.name for spec in available_services() if spec.name not in SERVICES_WITHOUT_DATABASE)


def database_urls(services: Sequence[str], environ: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """Each database URL the ``services`` use, as the services themselves read it, with the services
    using it (several share one when ``DATABASE_URL`` is set for all of them)."""
    from libs.runtime.config import database_url_from_env  # the default URL is the runtime's, per service

    urls: dict[str, list[str]] = {}
    for service in services:
        urls.setdefault(database_url_from_env(service, environ), []).append(service)
    return urls


def main(argv: Sequence[str] | None = None) -> int:
    """Migrate the named services' databases (default: ``SERVICE``, else every service with one)."""
    from libs.launcher.registry import SERVICES

    services = list(sys.argv[1:] if argv is None else argv) or os.environ.get("SERVICE", "").split()
    known = [spec.name for spec in SERVICES if spec.name not in SERVICES_WITHOUT_DATABASE]
    unknown = [name for name in services if name not in known]
    if unknown:
        print(f"no database for {', '.join(unknown)}; services with one: {', '.join(known)}", file=sys.stderr)
        return 2
    for url, users in database_urls(services or database_services()).items():
        asyncio.run(migrate(url))
        print(f"migrated {', '.join(users)}: {make_url(url).render_as_string(hide_password=True)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
