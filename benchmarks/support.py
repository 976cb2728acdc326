"""Helpers for benchmarks: percentiles, a service run as its own process, and its memory."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

from tests.support import ServiceProcess


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    rank = max(0, min(len(sorted_values) - 1, round(fraction * len(sorted_values)) - 1))
    return sorted_values[rank]


def rss_mib(pid: int) -> float:
    """Resident memory of a process in MiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@contextlib.asynccontextmanager
async def bench_service(
    module: str, env: Mapping[str, str] | None = None
) -> AsyncIterator[tuple[ServiceProcess, str]]:
    """Run ``module`` as its own process with a scratch data folder, quiet logs, and the database named by
    ``BENCH_DATABASE_URL`` (default: SQLite in the scratch folder); yields it and the backend's name."""
    with tempfile.TemporaryDirectory() as data_dir:
        settings = {"DATA_DIR": data_dir, "LOG_LEVEL": "warning", "DATABASE_URL": "", **(env or {})}
        database = os.environ.get("BENCH_DATABASE_URL", "")
        if database:
            settings["DATABASE_URL"] = database
        async with ServiceProcess(module, settings) as service:
            yield service, "PostgreSQL" if database else "SQLite"
