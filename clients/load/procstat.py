"""CPU and memory of the stack's service processes, read from ``/proc`` (Linux; no psutil).

:func:`discover_services` finds the processes the launcher (``make run``) started, by their command
line ``python -m services.<module>``; when several stacks run on the machine it keeps those whose
``GRPC_PORT`` (from ``/proc/<pid>/environ``) is the port that service has in the stack the gateway
address belongs to (the launcher shifts every port by the same offset). :func:`parse_services` reads
``gateway=1234,rules-chess=1240``.

:class:`ProcessMonitor` reads ``/proc/<pid>/stat`` (user + system CPU time) and ``/proc/<pid>/status``
(``VmRSS``, resident memory) at the start, every :meth:`~ProcessMonitor.sample`, and at the end, and
reports per process the CPU seconds used during the run, the average CPU share (100 % = one core), and
the resident memory at the start, at the end and at its highest sample.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Final

from libs.launcher.registry import SERVICES
from libs.runtime.ports import DEFAULT_PORTS

__all__ = [
    "ProcessMonitor",
    "ProcessSample",
    "ServiceUsage",
    "discover_services",
    "parse_services",
    "read_sample",
]

PROC: Final = Path("/proc")
_MODULE_TO_SERVICE = {spec.module: spec.name for spec in SERVICES}


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """One reading of a process."""

    cpu_s: float
    """User plus system CPU time since the process started."""
    rss_bytes: int
    at: float
    """``time.monotonic()`` of the reading."""


@dataclass(frozen=True, slots=True)
class ServiceUsage:
    """What one process used during the run."""

    name: str
    pid: int
    cpu_s: float
    """CPU seconds (user + system) used between the first and the last reading."""
    cpu_percent: float
    """``cpu_s`` over the wall time between them (100 = one core busy)."""
    rss_start_mib: float
    rss_end_mib: float
    rss_peak_mib: float
    """The highest resident memory seen (samples once a second)."""
    alive: bool
    """Whether the process was still there at the end."""

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "pid": self.pid,
            "cpu_seconds": round(self.cpu_s, 3),
            "cpu_percent": round(self.cpu_percent, 1),
            "rss_mib_start": round(self.rss_start_mib, 1),
            "rss_mib_end": round(self.rss_end_mib, 1),
            "rss_mib_peak": round(self.rss_peak_mib, 1),
            "alive": self.alive,
        }


def _clock_ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100


_TICKS = _clock_ticks()


def read_sample(pid: int, proc: Path = PROC) -> ProcessSample | None:
    """The process's CPU time and resident memory now; ``None`` when it is gone (or unreadable)."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
        status = (proc / str(pid) / "status").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after its last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    except (IndexError, ValueError):
        return None
    rss_kib = 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                rss_kib = int(parts[1])
            break
    return ProcessSample((utime + stime) / _TICKS, rss_kib * 1024, time.monotonic())


def parse_services(text: str) -> dict[str, int]:
    """``gateway=1234,rules-chess=1240`` → names to process ids; ``ValueError`` with the reason."""
    found: dict[str, int] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, pid = part.partition("=")
        if not sep or not name.strip() or not pid.strip().isdigit():
            raise ValueError(f"{part!r}: give NAME=PID (e.g. gateway=1234), or auto")
        found[name.strip()] = int(pid)
    if not found:
        raise ValueError("no services given (NAME=PID,..., or auto)")
    return found


def _service_of(cmdline: list[str]) -> str | None:
    """The service name a ``python -m services.X`` command line runs, else ``None``."""
    for index, argument in enumerate(cmdline[:-1]):
        if argument == "-m":
            module = cmdline[index + 1]
            if module.startswith("services."):
                return _MODULE_TO_SERVICE.get(module, module.removeprefix("services.").replace("_", "-"))
            return None
    return None


def _environment(pid: int, proc: Path) -> dict[str, str] | None:
    try:
        raw = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            env[name.decode(errors="replace")] = value.decode(errors="replace")
    return env


def discover_services(gateway: str = "127.0.0.1:50050", proc: Path = PROC) -> dict[str, int]:
    """The launcher's service processes serving the stack of ``gateway`` (see the module docstring).

    A process whose environment cannot be read is kept when it is the only one of its service."""
    try:
        gateway_port = int(gateway.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        gateway_port = DEFAULT_PORTS["gateway"].grpc
    offset = gateway_port - DEFAULT_PORTS["gateway"].grpc
    candidates: dict[str, list[tuple[int, bool | None]]] = {}
    try:
        entries = list(proc.iterdir())
    except OSError:
        return {}
    own = os.getpid()
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        pid = int(entry.name)
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        name = _service_of([part for part in cmdline if part])
        if name is None:
            continue
        env = _environment(pid, proc)
        matches: bool | None = None
        if env is not None and name in DEFAULT_PORTS:
            expected = DEFAULT_PORTS[name].grpc + offset
            matches = int(env.get("GRPC_PORT") or DEFAULT_PORTS[name].grpc) == expected
        candidates.setdefault(name, []).append((pid, matches))
    found: dict[str, int] = {}
    for name, processes in candidates.items():
        confirmed = [pid for pid, matches in processes if matches]
        unknown = [pid for pid, matches in processes if matches is None]
        if len(confirmed) == 1:
            found[name] = confirmed[0]
        elif not confirmed and len(processes) == 1 and unknown:
            found[name] = unknown[0]
    order = {spec.name: index for index, spec in enumerate(SERVICES)}
    return dict(sorted(found.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))


class ProcessMonitor:
    """First, highest and last readings of some processes (and of this one, as :attr:`SELF`)."""

    SELF: ClassVar[str] = "load generator"

    def __init__(
        self, processes: Mapping[str, int], *, include_self: bool = False, proc: Path = PROC
    ) -> None:
        self.processes = dict(processes)
        if include_self:
            self.processes[self.SELF] = os.getpid()
        self.proc = proc
        self._first: dict[str, ProcessSample] = {}
        self._last: dict[str, ProcessSample] = {}
        self._peak: dict[str, int] = {}
        self._gone: set[str] = set()

    def start(self) -> None:
        for name, pid in self.processes.items():
            sample = read_sample(pid, self.proc)
            if sample is None:
                self._gone.add(name)
                continue
            self._first[name] = self._last[name] = sample
            self._peak[name] = sample.rss_bytes

    def sample(self) -> None:
        for name in self._first:
            if name in self._gone:
                continue
            sample = read_sample(self.processes[name], self.proc)
            if sample is None:
                self._gone.add(name)
                continue
            self._last[name] = sample
            self._peak[name] = max(self._peak[name], sample.rss_bytes)

    def finish(self) -> list[ServiceUsage]:
        """A last reading, and the usage of every process that could be read at the start."""
        self.sample()
        usages = []
        mib = 1024 * 1024
        for name, first in self._first.items():
            last = self._last[name]
            wall = last.at - first.at
            cpu = last.cpu_s - first.cpu_s
            usages.append(
                ServiceUsage(
                    name=name,
                    pid=self.processes[name],
                    cpu_s=cpu,
                    cpu_percent=100 * cpu / wall if wall > 0 else 0.0,
                    rss_start_mib=first.rss_bytes / mib,
                    rss_end_mib=last.rss_bytes / mib,
                    rss_peak_mib=self._peak[name] / mib,
                    alive=name not in self._gone,
                )
            )
        return usages

    @property
    def unreadable(self) -> list[str]:
        """Processes that could not be read at the start (wrong pid, gone, not Linux)."""
        return sorted(name for name in self.processes if name not in self._first)
