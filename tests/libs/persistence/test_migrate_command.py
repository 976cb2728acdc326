"""``make migrate`` (``python -m libs.persistence.migrate``): every service's database, or the ones named."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from alembic.script import ScriptDirectory
from sqlalchemy import text

from libs.launcher.registry import ServiceSpec, available_services
from libs.persistence import Database
from libs.persistence.migrate import SERVICES_WITHOUT_DATABASE, alembic_config, database_services
from libs.runtime.config import sqlite_url
from tests.support import ROOT


def _head() -> str:
    head = ScriptDirectory.from_config(alembic_config("sqlite+aiosqlite://")).get_current_head()
    assert head is not None
    return head


async def _version(url: str) -> str | None:
    db = Database(url)
    try:
        async with db.connect() as conn:
            version = await conn.scalar(text("SELECT version_num FROM alembic_version"))
    finally:
        await db.dispose()
    return None if version is None else str(version)


async def _migrate_command(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m libs.persistence.migrate ARGS`` as ``make migrate`` runs it, with only ``env`` set
    among the variables that choose the databases."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "DATA_DIR", "SERVICE", "SKILLCLASSICS_ENV")
    }
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "libs.persistence.migrate", *args],
        cwd=ROOT,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _database_files(data_dir: Path) -> set[str]:
    return {p.name for p in data_dir.glob("*.db")} if data_dir.exists() else set()


async def test_without_arguments_every_service_database_is_migrated_to_head(tmp_path: Path) -> None:
    services = database_services()
    assert "fairness" in services
    assert "gateway" not in services

    done = await _migrate_command(DATA_DIR=str(tmp_path))

    assert done.returncode == 0, done.stderr
    assert _database_files(tmp_path) == {f"{name}.db" for name in services}
    for name in services:
        assert await _version(sqlite_url(tmp_path / f"{name}.db")) == _head(), name
        assert f"migrated {name}: " in done.stdout


async def test_a_named_service_or_service_variable_migrates_only_that_one(tmp_path: Path) -> None:
    named = await _migrate_command("clock", DATA_DIR=str(tmp_path / "named"))
    assert named.returncode == 0, named.stderr
    assert _database_files(tmp_path / "named") == {"clock.db"}
    assert await _version(sqlite_url(tmp_path / "named" / "clock.db")) == _head()

    variable = await _migrate_command(DATA_DIR=str(tmp_path / "variable"), SERVICE="fairness")
    assert variable.returncode == 0, variable.stderr
    assert _database_files(tmp_path / "variable") == {"fairness.db"}


async def test_an_unknown_service_or_one_without_a_database_is_refused(tmp_path: Path) -> None:
    done = await _migrate_command("fairnes", "gateway", DATA_DIR=str(tmp_path))
    assert done.returncode == 2
    assert "no database for fairnes, gateway" in done.stderr
    assert _database_files(tmp_path) == set()


async def test_one_database_url_for_every_service_is_migrated_once(database_url: str, tmp_path: Path) -> None:
    done = await _migrate_command(DATABASE_URL=database_url, DATA_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("migrated ") == 1
    assert f"migrated {', '.join(database_services())}: " in done.stdout
    assert await _version(database_url) == _head()
    assert _database_files(tmp_path) == set()


async def test_the_services_without_a_database_are_exactly_those_that_never_load_the_data_layer() -> None:
    """A service keeps a database when starting it loads the migrations (every service with one migrates
    at start); ``make migrate`` must cover exactly those."""

    async def loads_data_layer(spec: ServiceSpec) -> bool:
        probe = (
            "import importlib, sys\n"
            f"importlib.import_module({spec.module + '.__main__'!r})\n"
            "print('libs.persistence.migrate' in sys.modules)\n"
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", probe, cwd=ROOT, stdout=asyncio.subprocess.PIPE
        )
        stdout, _ = await asyncio.wait_for(process.communicate(), timeout=120)
        assert process.returncode == 0, spec.name
        return stdout.decode().strip() == "True"

    specs = available_services()
    found = await asyncio.gather(*(loads_data_layer(spec) for spec in specs))
    with_database = {spec.name for spec, loads in zip(specs, found, strict=True) if loads}
    assert with_database == set(database_services())
    assert {spec.name for spec in specs} - with_database <= SERVICES_WITHOUT_DATABASE
