"""The short chaos run (``make test-long``; the long one is ``make chaos``, docs/chaos.md): a few matches
of every family through the whole stack on a private PostgreSQL server, while a rules shard is killed
with SIGKILL, matchmaking is stopped with SIGTERM and the database is stopped for a few seconds; then every
check of tools/chaos/checks.py must hold. ``CHAOS_SEED`` repeats a run's strategies."""

from __future__ import annotations

import os

import pytest

from tools.chaos import FAMILIES, ChaosConfig, Fault, run_chaos
from tools.pgcluster import PostgresUnavailable, server_bin

SHORT_FAULTS = (
    Fault(6.0, "rules-chess", "SIGKILL", 1.0),
    Fault(12.0, "matchmaking", "SIGTERM", 1.0),
    Fault(18.0, "postgres", "stop-fast", 2.5),
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.long]


def _postgres_programs() -> str | None:
    try:
        server_bin()
    except PostgresUnavailable as error:
        return str(error)
    return None


async def test_a_short_chaos_run_keeps_every_promise(capsys: pytest.CaptureFixture[str]) -> None:
    missing = _postgres_programs()
    if missing:
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    config = ChaosConfig(
        seed=int(os.environ.get("CHAOS_SEED", "17")),
        seconds=30.0,
        matches_per_family=2,
        families=tuple(FAMILIES),
        faults=SHORT_FAULTS,
        drain_s=30.0,
    )
    report = await run_chaos(config, say=lambda line: None)
    with capsys.disabled():
        print("\n" + report.text())
    figures = report.figures()
    assert figures["actions_acknowledged"] > 0
    assert {target.split()[0] for target in figures["faults"]} == {"rules-chess", "matchmaking", "postgres"}
    failed = [check for check in report.checks if not check.ok]
    assert not failed, "\n".join(f"{c.name}: {c.summary}\n  " + "\n  ".join(c.details) for c in failed)
