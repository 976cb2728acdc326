"""The load harness through a short database outage under a live rules shard (issue #17): the shard's
SQLite file is locked by another writer for a few seconds, so the moves made meanwhile are refused
``UNAVAILABLE`` ("the database is unavailable (it is locked by another writer); retry in 1000 ms") and the
harness retries them instead of failing their matches. (Before, the shard answered ``INTERNAL`` and the
harness gave up: a PostgreSQL restart failed 4 of 4 live matches.)"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from clients.load.harness import FamilyPlan, LoadConfig, LoadRun, TokenMinter
from libs.persistence import database
from libs.runtime.config import sqlite_url
from services.gateway.service import GatewayService
from tests.support import start_backends, start_in_process

pytestmark = pytest.mark.slow


async def test_live_matches_ride_out_their_shards_database_being_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite waits this long for a lock before refusing (30 s in production, which would hide the outage).
    monkeypatch.setattr(database, "SQLITE_BUSY_TIMEOUT_MS", 100)
    backends = await start_backends(tmp_path)
    gateway = await start_in_process(
        "gateway",
        GatewayService,
        sqlite_url(tmp_path / "gateway.db"),
        backends.gateway_env(),
        DATA_DIR=str(tmp_path),
    )
    try:
        config = LoadConfig(
            families=(FamilyPlan("chess", 2),),
            gateway=gateway.address,
            matches=2,
            duration_s=None,
            think_ms=50,
            max_plies=60,
            progress_s=0,
            seed=5,
            outage_s=20,
        )
        run = asyncio.ensure_future(LoadRun(config, tokens=TokenMinter({"DATA_DIR": str(tmp_path)})).run())
        await asyncio.sleep(1.5)  # the matches are under way
        assert not run.done()
        holder = sqlite3.connect(tmp_path / "rules-chess.db", isolation_level=None)
        try:
            holder.execute("BEGIN EXCLUSIVE")  # the outage: no other writer gets in
            await asyncio.sleep(2.5)
            holder.execute("ROLLBACK")
        finally:
            holder.close()
        result = await asyncio.wait_for(run, 90)
    finally:
        await gateway.stop(grace=0.5)
        await backends.stop()
    metrics = result.metrics
    chess = metrics.families["chess"]
    assert (chess.finished, chess.failed) == (2, 0), dict(metrics.errors)
    assert sum(metrics.errors.values()) > 0, "the outage was not felt"
    for operation, label in metrics.errors:  # each counted by its code and the catalogue's reason
        assert operation == "SubmitAction", dict(metrics.errors)
        assert label.startswith("UNAVAILABLE/"), dict(metrics.errors)
