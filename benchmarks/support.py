"""Helpers for benchmarks: percentiles, a service run as its own process, and its memory."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    rank = max(0, min(len(sorted_values) - 1, round(fraction * len(sorted_values)) - 1))
    return sorted_values[rank]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mib(pid: int) -> float:
    """Resident memory of a process in MiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def spawn_service(module: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start ``python -m module`` from the repository root with ``env`` added to this environment."""
    return subprocess.Popen(
        [sys.executable, "-m", module], cwd=ROOT, env={**os.environ, **env}, stderr=subprocess.DEVNULL
    )
