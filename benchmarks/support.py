"""Helpers for benchmarks: percentiles, a service run as its own process, and its memory.

Services run with mutual TLS, as in production: :func:`bench_service` gives them this run's development
PKI (:func:`bench_pki`), and a benchmark calls them as a given identity with
:func:`tests.support.backend_channel` or :class:`tests.callers.Callers`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clients.load.procstat import read_sample
from tests.support import ServiceProcess, tls_dir, use_session_pki

Commit = Any
"""fairness ``Commit`` as matchmaking calls it (a grpc unary callable)."""


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    rank = max(0, min(len(sorted_values) - 1, round(fraction * len(sorted_values)) - 1))
    return sorted_values[rank]


def rss_mib(pid: int) -> float:
    """Resident memory of a process in MiB (Linux; NaN once it is gone)."""
    sample = read_sample(pid)
    return sample.rss_bytes / 2**20 if sample is not None else float("nan")


def bench_pki() -> Path:
    """The development PKI of this run's services and their callers: ``TLS_DIR`` when it is set, else
    one made in a temporary folder on first use (removed when the process ends), and ``TLS_DIR`` set to
    it for the services started after."""
    if not os.environ.get("TLS_DIR", "").strip():
        directory = Path(tempfile.mkdtemp(prefix="skillclassics-bench-pki-"))
        atexit.register(shutil.rmtree, directory, True)
        use_session_pki(directory)
    return tls_dir()


@contextlib.asynccontextmanager
async def bench_service(
    module: str, env: Mapping[str, str] | None = None
) -> AsyncIterator[tuple[ServiceProcess, str]]:
    """Run ``module`` as its own process with a scratch data folder, quiet logs, and the database named by
    ``BENCH_DATABASE_URL`` (default: SQLite in the scratch folder) and mutual TLS from :func:`bench_pki`;
    yields it and the backend's name."""
    bench_pki()
    with tempfile.TemporaryDirectory() as data_dir:
        settings = {"DATA_DIR": data_dir, "LOG_LEVEL": "warning", "DATABASE_URL": "", **(env or {})}
        database = os.environ.get("BENCH_DATABASE_URL", "")
        if database:
            settings["DATABASE_URL"] = database
        async with ServiceProcess(module, settings) as service:
            yield service, "PostgreSQL" if database else "SQLite"


def stack_env(**extra: str) -> tuple[dict[str, str], str]:
    """The environment of a whole benchmark stack (quiet logs, ``BENCH_DATABASE_URL`` or SQLite files),
    and the backend's name. The gateway trusts the development key in the stack's ``DATA_DIR``
    (:func:`services.gateway.tokens.write_development_key` puts one there). The services call each
    other over mutual TLS, as always; ``BENCH_TLS_MODE=plaintext`` runs them without it, to measure
    what it costs (docs/security.md)."""
    database = os.environ.get("BENCH_DATABASE_URL", "")
    env = {
        "SKILLCLASSICS_ENV": "development",
        "LOG_LEVEL": "warning",
        "LOG_FORMAT": "json",
        "DATABASE_URL": database,
        "TLS_MODE": os.environ.get("BENCH_TLS_MODE", "") or "mtls",
        **extra,
    }
    return env, "PostgreSQL" if database else "SQLite"


def machine_cpu() -> tuple[float, float]:
    """CPU seconds the whole machine has been busy (every core, every process) and has had stolen
    by the hypervisor, from ``/proc/stat`` (Linux; zeros elsewhere)."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(value) for value in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0.0, 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    ticks = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / ticks, steal / ticks


@dataclass(frozen=True, slots=True)
class ChanceRules:
    """A chance family's rules service and the fairness service it draws from, each its own process (see
    :func:`chance_rules`)."""

    rules: ServiceProcess
    stub: Any
    """``RulesService`` as the gateway calls it (mutual TLS, the gateway's identity)."""
    commit: Commit
    """fairness ``Commit`` as matchmaking calls it."""
    backend: str


@contextlib.asynccontextmanager
async def chance_rules(module: str) -> AsyncIterator[ChanceRules]:
    """Run fairness and the rules service ``module`` (gin, backgammon: families whose matches draw from
    fairness) as benchmarks drive them: matchmaking commits and creates the matches, the gateway plays
    them, over mutual TLS as each."""
    from skillclassics.fairness.v1 import fairness_pb2_grpc
    from skillclassics.rules.v1 import rules_pb2_grpc

    from tests.callers import RULES_CALLERS, Callers
    from tests.support import backend_channel

    async with (
        bench_service("services.fairness") as (fairness, backend),
        bench_service(module, {"FAIRNESS_ADDRESS": fairness.address}) as (rules, _),
        backend_channel(fairness.address, "matchmaking") as fairness_channel,
        Callers(rules.address) as rules_callers,
    ):
        yield ChanceRules(
            rules=rules,
            stub=rules_callers.stub(rules_pb2_grpc.RulesServiceStub, RULES_CALLERS),
            commit=fairness_pb2_grpc.FairnessServiceStub(fairness_channel).Commit,
            backend=backend,
        )


async def concurrent_games(
    games: Sequence[Callable[[list[float]], Awaitable[int]]],
) -> tuple[list[int], float, float, float]:
    """Play ``games`` at once (each records its actions' latencies in the list it is given and returns
    how many actions it made): each game's actions, the seconds it took, p50 and p99 latency in ms."""
    latencies: list[float] = []
    started = time.perf_counter()
    counts = list(await asyncio.gather(*(game(latencies) for game in games)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return counts, elapsed, percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000
