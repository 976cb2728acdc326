"""A stack of service processes on localhost: start, wait for SERVING, interleave logs, stop.

:class:`Stack` runs each service as ``python -m <module>`` with its ports from
:data:`~libs.runtime.ports.DEFAULT_PORTS` (shifted by ``port_offset``), waits for the gRPC health
service to report SERVING, prefixes every output line with the service's name and stops the children
with SIGTERM (then SIGKILL after a grace). Full-stack tests use it directly::

    async with Stack(port_offset=find_free_port_offset(), data_dir=tmp_path) as stack:
        channel = grpc.aio.insecure_channel(stack.address("fairness"))
        ...
        await stack.kill("fairness")  # SIGKILL
        await stack.restart("fairness")  # same ports, same data
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import random
import signal
import socket
import sys
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from libs.launcher.registry import ServiceSpec, available_services
from libs.match.routing import SHARDS_FILE_VARIABLE, write_shards_file
from libs.runtime.identity import OPERATOR
from libs.runtime.pki import CertificateFiles, ensure_development_pki
from libs.runtime.ports import DEFAULT_PORTS, ServicePorts, replica_ports
from libs.runtime.tls import default_identity

LINE_LIMIT = 1024 * 1024
"""The longest output line kept whole (longer ones are cut)."""
KEPT_LINES = 200
"""How many recent output lines are kept per service (for error messages and :meth:`Stack.lines`)."""
_WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")


_WIRING: dict[str, tuple[tuple[str, str], ...]] = {
    "rules": (
        ("clock", "CLOCK_ADDRESS"),
        ("fairness", "FAIRNESS_ADDRESS"),
        ("matchmaking", "MATCHMAKING_ADDRESS"),
    ),
    "matchmaking": (("fairness", "FAIRNESS_ADDRESS"),),
    "gateway": (("matchmaking", "MATCHMAKING_ADDRESS"), ("fairness", "FAIRNESS_ADDRESS")),
}
"""For each kind of service, the other services it calls and the variable that gives their address.
Matchmaking and the gateway are also given every rules service of the stack (``RULES_<FAMILY>_ADDRESSES``,
every shard in shard order); rules shard ``n`` is given clock shard ``n mod <clock shards>``, as a
deployment gives rules shard N clock shard N (docs/deployment.md), and every caller of matchmaking is given
all its replicas, comma-separated (:func:`libs.runtime.targets.replica_target`). They also get
``RULES_SHARDS_FILE``, the same lists in ``DATA_DIR/rules-shards.env``, which the launcher rewrites when
:meth:`Stack.add_replica` adds a shard (they re-read it: docs/matchmaking.md, "Placement")."""
_ROUTE_TO_RULES = ("matchmaking", "gateway")


class StartError(RuntimeError):
    """A service exited, or did not report SERVING in time, while the stack started."""

    def __init__(self, service: str, reason: str, returncode: int | None = None) -> None:
        super().__init__(f"{service} failed to start: {reason}")
        self.service = service
        self.reason = reason
        self.returncode = returncode
        """The exit code when the process ended (negative: killed by that signal), else ``None``."""


class PortInUse(StartError):
    """A port of the stack was taken (by another stack, a test run beside this one) when a service was
    about to start: :func:`start_on_free_ports` tries again on other ports."""


@dataclass(frozen=True, slots=True)
class ServiceExit:
    """A service that ended on its own while the stack was running."""

    service: str
    returncode: int
    reason: str
    """What its exit code and last output say."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a running service of the stack answers."""

    service: str
    grpc_address: str
    metrics_url: str
    pid: int | None
    """The process id, ``None`` when the service is not running."""


@dataclass(eq=False)
class _Child:
    spec: ServiceSpec
    process: asyncio.subprocess.Process
    pumps: list[asyncio.Task[None]] = field(default_factory=list)
    exited: asyncio.Task[int] | None = None
    ready: bool = False
    """It reported SERVING: from then on an exit nobody asked for is a crash."""
    expected_exit: bool = False

    @property
    def running(self) -> bool:
        return self.exited is not None and not self.exited.done()

    async def wait(self) -> int:
        assert self.exited is not None
        return await self.exited


class Stack:
    """Service processes started together on localhost; an async context manager.

    ``services`` defaults to every service of :data:`~libs.launcher.registry.SERVICES` whose module
    exists. Each child gets this process's environment, then ``env``, then ``GRPC_PORT``,
    ``METRICS_PORT``, ``DATA_DIR``, ``PYTHONUNBUFFERED=1`` and ``LOG_FORMAT=json`` unless set.
    With ``echo`` every output line of the children is written to stdout as ``name | line``.
    """

    def __init__(
        self,
        services: Iterable[ServiceSpec] | None = None,
        *,
        port_offset: int = 0,
        data_dir: str | os.PathLike[str] = "data",
        env: Mapping[str, str] | None = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 15.0,
        echo: bool = True,
    ) -> None:
        self.services = available_services() if services is None else tuple(services)
        if not self.services:
            raise ValueError("no services to start")
        names = [spec.name for spec in self.services]
        if len(set(names)) != len(names):
            raise ValueError(f"a service is listed twice: {', '.join(names)}")
        for kind, replicas in _replicas(self.services).items():
            numbers = [spec.replica for spec in replicas]
            if numbers != list(range(len(numbers))):
                raise ValueError(f"the processes of {kind} must be replicas 0 to n-1 in order, got {numbers}")
        self.port_offset = port_offset
        self.ports = {
            spec.name: shifted_ports(spec.kind, port_offset, spec.replica) for spec in self.services
        }
        self.data_dir = Path(data_dir).resolve()
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.echo = echo
        self._env = {**os.environ, **(env or {})}
        self.bind_host = self._env.get("GRPC_HOST") or "127.0.0.1"
        self.host = "127.0.0.1" if self.bind_host in _WILDCARD_HOSTS else self.bind_host
        self.exit_codes: dict[str, int] = {}
        """The exit code of each service's last process once it ended (negative: killed by a signal)."""
        self._width = max(len(name) for name in names)
        self._children: dict[str, _Child] = {}
        self._lines: dict[str, collections.deque[str]] = {name: self._new_lines() for name in names}
        self._crashes: asyncio.Queue[ServiceExit] = asyncio.Queue()
        self._stop_lock = asyncio.Lock()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # Where the services answer.

    def spec(self, name: str) -> ServiceSpec:
        for spec in self.services:
            if spec.name == name:
                return spec
        raise KeyError(f"{name} is not a service of this stack")

    def address(self, name: str) -> str:
        """The gRPC address of ``name``, ``host:port``."""
        self.spec(name)
        return f"{_url_host(self.host)}:{self.ports[name].grpc}"

    def health_address(self, name: str) -> str:
        """The plaintext health port of ``name``, ``host:port`` (only the health service answers there)."""
        self.spec(name)
        return f"{_url_host(self.host)}:{self.ports[name].health}"

    @property
    def is_mutual_tls(self) -> bool:
        """Whether the stack's backends require client certificates (``TLS_MODE`` is not plaintext)."""
        return self._env.get("TLS_MODE", "").strip().lower() != "plaintext"

    @property
    def tls_dir(self) -> Path:
        """The development PKI the stack's services use (``TLS_DIR``, default ``DATA_DIR/pki``)."""
        return Path(self._env.get("TLS_DIR", "").strip() or self.data_dir / "pki").resolve()

    def operator_certificates(self) -> CertificateFiles | None:
        """The operator's certificate in the stack's development PKI (made when the stack starts), for
        calling its backends by hand or from tests; ``None`` without mutual TLS or when the certificate
        files are configured from elsewhere (``TLS_CA_FILE``...)."""
        if not self.is_mutual_tls or self._env.get("TLS_CA_FILE", "").strip():
            return None
        return CertificateFiles(
            self.tls_dir / "ca.pem", self.tls_dir / "operator.pem", self.tls_dir / "operator.key"
        )

    def _identity(self, name: str) -> str:
        return default_identity(self.spec(name).kind, self.environment(name))

    @property
    def shards_file(self) -> Path:
        """The directory of rules shards matchmaking and the gateways read (``RULES_SHARDS_FILE``)."""
        return Path(self._env.get(SHARDS_FILE_VARIABLE, "").strip() or self.data_dir / "rules-shards.env")

    def _write_shards_file(self) -> None:
        shards = {
            kind.removeprefix("rules-"): [self.address(spec.name) for spec in specs]
            for kind, specs in _replicas(self.services).items()
            if kind.startswith("rules-")
        }
        if shards:  # (a stack of no rules service, sharing another's data folder, leaves its file alone)
            write_shards_file(self.shards_file, shards)

    def replicas(self, kind: str) -> list[ServiceSpec]:
        """The processes of service ``kind`` in replica order (a family's shards in shard order)."""
        return _replicas(self.services).get(kind, [])

    def metrics_url(self, name: str) -> str:
        """The Prometheus endpoint of ``name``."""
        self.spec(name)
        return f"http://{_url_host(self.host)}:{self.ports[name].metrics}/metrics"

    def pid(self, name: str) -> int | None:
        """The process id of ``name`` while it runs, else ``None``."""
        self.spec(name)
        child = self._children.get(name)
        return child.process.pid if child is not None and child.running else None

    def endpoints(self) -> list[Endpoint]:
        """Every service of the stack, in start order."""
        return [
            Endpoint(spec.name, self.address(spec.name), self.metrics_url(spec.name), self.pid(spec.name))
            for spec in self.services
        ]

    def lines(self, name: str) -> list[str]:
        """The last output lines (stdout and stderr) of the current or last process of ``name``."""
        self.spec(name)
        return list(self._lines[name])

    def environment(self, name: str) -> dict[str, str]:
        """The environment ``name`` is started with."""
        spec = self.spec(name)
        ports = self.ports[name]
        env = dict(self._env)
        env["GRPC_PORT"] = str(ports.grpc)
        env["METRICS_PORT"] = str(ports.metrics)
        env["HEALTH_PORT"] = str(ports.health)
        env["DATA_DIR"] = str(self.data_dir)
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("LOG_FORMAT", "json")
        kinds = _replicas(self.services)
        if spec.kind.startswith("rules-"):
            env["RULES_SHARD"] = str(spec.replica)
        elif spec.kind == "clock":
            env["CLOCK_SHARD"] = str(spec.replica)
        for service, variable in _WIRING.get(spec.kind.split("-")[0], ()):
            # How the stack's services find each other (a deployment sets the same variables).
            targets = kinds.get(service)
            if targets and variable not in self._env:
                if service == "clock":
                    targets = [targets[spec.replica % len(targets)]]
                elif service != "matchmaking":
                    targets = targets[:1]
                # (matchmaking: every replica, which the caller's channel balances over: replica_target)
                env[variable] = ",".join(f"127.0.0.1:{self.ports[t.name].grpc}" for t in targets)
        if spec.kind in _ROUTE_TO_RULES:
            env.setdefault(SHARDS_FILE_VARIABLE, str(self.shards_file))
            for kind, shards in kinds.items():
                if kind.startswith("rules-"):
                    variable = f"RULES_{kind.removeprefix('rules-').upper()}_ADDRESSES"
                    if variable not in self._env:
                        env[variable] = ",".join(f"127.0.0.1:{self.ports[s.name].grpc}" for s in shards)
        return env

    # Starting and stopping.

    async def start(self) -> None:
        """Start every service in order: the services of a stage together (the clock and fairness, then
        every rules shard, then matchmaking, then the gateways), each stage once the one before is
        SERVING. Starting a stage's processes side by side overlaps their imports and start-up (about
        a second of CPU each) with each other's waits: a stack of one of each is up in about half the
        time it took one by one.

        On a failure (or cancellation) everything started so far is stopped and the error raised:
        :class:`StartError` names the service and its reason.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._write_shards_file()
        operator = self.operator_certificates()
        if operator is not None:
            ensure_development_pki(
                operator.ca.parent, [OPERATOR, *(self._identity(s.name) for s in self.services)]
            )
        try:
            for stage in _stages(self.services):
                await _all_or_none(self._start(spec) for spec in stage)
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> dict[str, int]:
        """Stop every service, last started first: SIGTERM, then SIGKILL after ``stop_timeout``.

        Returns the exit code of each service that was started; stopping twice is harmless.
        """
        async with self._stop_lock:
            for name in reversed(list(self._children)):
                await self._terminate(self._children[name])
            return {name: self.exit_codes[name] for name in self._children}

    def kill_all(self) -> None:
        """SIGKILL every running service now (e.g. a second Ctrl-C); :meth:`stop` then returns quickly."""
        for child in self._children.values():
            child.expected_exit = True
            if child.running:
                with contextlib.suppress(ProcessLookupError):
                    child.process.kill()

    async def kill(self, name: str, sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` (one that ends the process) to ``name`` and return its exit code.

        The service stays down until :meth:`restart`; this is not reported as a crash.
        """
        self.spec(name)
        child = self._children.get(name)
        if child is None or not child.running:
            raise RuntimeError(f"{name} is not running")
        child.expected_exit = True
        with contextlib.suppress(ProcessLookupError):
            child.process.send_signal(sig)
        return await child.wait()

    async def restart(self, name: str) -> None:
        """Stop ``name`` if it runs (SIGTERM), start it again on the same ports and wait for SERVING."""
        spec = self.spec(name)
        child = self._children.get(name)
        if child is not None:
            await self._terminate(child)
        await self._start(spec)

    async def add_replica(self, kind: str) -> str:
        """Start one more process of ``kind`` (a new shard of a rules family or of the clock, another
        gateway) on the next replica's ports while the rest run, wait for SERVING, and (for a rules shard)
        append it to the shards file the routers re-read; its name. Nothing else is restarted."""
        replicas = self.replicas(kind)
        if not replicas:
            raise KeyError(f"{kind} is not a service of this stack")
        spec = replicas[-1].as_replica(replicas[-1].replica + 1)
        ports = shifted_ports(spec.kind, self.port_offset, spec.replica)
        self.services = (*self.services, spec)
        self.ports[spec.name] = ports
        self._lines[spec.name] = self._new_lines()
        self._width = max(self._width, len(spec.name))
        operator = self.operator_certificates()
        if operator is not None:
            ensure_development_pki(operator.ca.parent, [OPERATOR, self._identity(spec.name)])
        await self._start(spec)
        if kind.startswith("rules-"):
            self._write_shards_file()
        return spec.name

    async def wait_for_crash(self) -> ServiceExit:
        """Wait until a SERVING service ends without being asked to (not by stop, kill or restart)."""
        return await self._crashes.get()

    # The children.

    async def _start(self, spec: ServiceSpec) -> None:
        ports = self.ports[spec.name]
        for port in (ports.grpc, ports.metrics, ports.health):
            if not port_is_free(self.bind_host, port):
                raise PortInUse(
                    spec.name,
                    f"port {port} on {self.bind_host} is already in use "
                    "(another stack running? shift the ports with --port-offset)",
                )
        child = await self._spawn(spec)
        await self._wait_serving(child)

    async def _spawn(self, spec: ServiceSpec) -> _Child:
        self._lines[spec.name] = self._new_lines()
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            spec.module,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.environment(spec.name),
            limit=LINE_LIMIT,
        )
        child = _Child(spec, process)
        self._children[spec.name] = child
        self.exit_codes.pop(spec.name, None)
        for stream in (process.stdout, process.stderr):
            assert stream is not None
            child.pumps.append(asyncio.create_task(self._pump(spec.name, stream)))
        child.exited = asyncio.create_task(self._watch(child))
        return child

    async def _pump(self, name: str, stream: asyncio.StreamReader) -> None:
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # longer than LINE_LIMIT: asyncio drops it
                raw = b"[line too long, cut]\n"
            if not raw:
                return
            self._emit(name, raw.decode("utf-8", errors="replace").rstrip("\r\n"))

    def _emit(self, name: str, line: str) -> None:
        self._lines[name].append(line)
        if self.echo:
            try:
                sys.stdout.write(f"{name.ljust(self._width)} | {line}\n")
                sys.stdout.flush()
            except (OSError, ValueError):  # stdout closed: keep running, stop echoing
                self.echo = False

    async def _watch(self, child: _Child) -> int:
        returncode = await child.process.wait()
        _, pending = await asyncio.wait(child.pumps, timeout=2.0)  # the last lines, unless a grandchild
        for pump in pending:  # holds the pipes open
            pump.cancel()
        self.exit_codes[child.spec.name] = returncode
        if child.ready and not child.expected_exit:
            name = child.spec.name
            self._crashes.put_nowait(
                ServiceExit(name, returncode, exit_reason(name, returncode, self._lines[name]))
            )
        return returncode

    async def _wait_serving(self, child: _Child) -> None:
        assert child.exited is not None
        name = child.spec.name
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.start_timeout
        delay = 0.05
        last = "no answer"
        while True:
            if child.exited.done():
                returncode = child.exited.result()
                raise StartError(name, exit_reason(name, returncode, self._lines[name]), returncode)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise StartError(name, f"not SERVING after {self.start_timeout:g} s (health: {last})")
            last = await check_health(self.health_address(name), rpc_timeout=min(1.0, remaining))
            if last == "SERVING" and child.running:
                child.ready = True
                return
            await asyncio.wait({child.exited}, timeout=min(delay, max(remaining, 0.0)))
            delay = min(delay * 2, 0.5)

    async def _terminate(self, child: _Child) -> int:
        child.expected_exit = True
        assert child.exited is not None
        if child.running:
            with contextlib.suppress(ProcessLookupError):
                child.process.terminate()
            done, _ = await asyncio.wait({child.exited}, timeout=self.stop_timeout)
            if not done:
                with contextlib.suppress(ProcessLookupError):
                    child.process.kill()
        return await child.wait()

    @staticmethod
    def _new_lines() -> collections.deque[str]:
        return collections.deque(maxlen=KEPT_LINES)


def _replicas(services: Iterable[ServiceSpec]) -> dict[str, list[ServiceSpec]]:
    kinds: dict[str, list[ServiceSpec]] = {}
    for spec in services:
        kinds.setdefault(spec.kind, []).append(spec)
    return {kind: sorted(specs, key=lambda spec: spec.replica) for kind, specs in kinds.items()}


def shifted_ports(name: str, offset: int, replica: int = 0) -> ServicePorts:
    """The ports of replica ``replica`` of ``name`` shifted by ``offset``
    (:func:`~libs.runtime.ports.replica_ports`); :class:`ValueError` for an unknown name or a bad port."""
    if name not in DEFAULT_PORTS:
        raise ValueError(f"{name} has no ports in libs.runtime.ports.DEFAULT_PORTS")
    ports = replica_ports(name, replica, offset)
    for port in (ports.grpc, ports.metrics, ports.health):
        if not 0 < port < 65536:
            shown = name if replica == 0 else f"{name} replica {replica}"
            raise ValueError(f"port offset {offset} puts a port of {shown} out of range ({port})")
    return ports


def port_is_free(host: str, port: int) -> bool:
    """Whether a TCP server could listen on ``host:port`` now (as gRPC does, with SO_REUSEADDR)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host.strip("[]"), port))
        except OSError:
            return False
    return True


TEST_PORT_OFFSETS = (11000, 15000)
"""Where test stacks' port offsets lie: every gRPC and health port then sits above 61000 and every
metrics port below 24200, outside Linux's ephemeral range (32768-60999), so no outgoing connection's local
port and no port a test took from the system (``bind`` to port 0) can be one a stack is about to bind."""


def worker_port_offsets(worker: int, workers: int) -> tuple[int, int]:
    """The part of :data:`TEST_PORT_OFFSETS` for test worker ``worker`` of ``workers`` (pytest-xdist): two
    workers starting stacks at the same moment cannot pick overlapping ports."""
    low, high = TEST_PORT_OFFSETS
    width = (high - low) // max(workers, 1)
    return low + worker * width, low + (worker + 1) * width


def find_free_port_offset(
    services: Iterable[ServiceSpec] | None = None,
    *,
    host: str = "127.0.0.1",
    attempts: int = 100,
    within: tuple[int, int] = (1000, 15000),
) -> int:
    """A random port offset in ``within`` (from the first, below the second; by default 1000 to 14999)
    under which every port of ``services`` is free now.

    It keeps clear of the default ports a developer's own stack may be using; tests use it (each test
    worker in a range of its own, :data:`TEST_PORT_OFFSETS`). With replicas
    (:func:`~libs.launcher.registry.scale_out`) the highest offset is lowered so that every replica's
    ports stay below 65536.
    """
    specs = list(available_services() if services is None else services)
    names = [spec.name for spec in specs]
    highest = max(replica_ports(spec.kind, spec.replica).health for spec in specs)
    low, high = within
    top = min(high, 65536 - highest)
    if top <= low:
        raise RuntimeError(f"too many replicas to shift the ports of {', '.join(names)} by {low} or more")
    for _ in range(attempts):
        offset = random.randrange(low, top)
        ports = [shifted_ports(spec.kind, offset, spec.replica) for spec in specs]
        if all(port_is_free(host, port) for pair in ports for port in (pair.grpc, pair.metrics, pair.health)):
            return offset
    raise RuntimeError(f"no port offset with free ports for {', '.join(names)} after {attempts} attempts")


async def start_on_free_ports(build: Callable[[], Stack], *, attempts: int = 3) -> Stack:
    """Start the stack ``build`` makes (on a port offset that was free when it chose it,
    :func:`find_free_port_offset`); if another process took one of its ports before the stack started
    (:class:`PortInUse`), build another and start that, up to ``attempts`` stacks in all."""
    for attempt in range(1, attempts + 1):
        stack = build()
        try:
            await stack.start()
        except PortInUse:
            if attempt == attempts:
                raise
            continue
        return stack
    raise ValueError(f"attempts must be at least 1, not {attempts}")


async def check_health(address: str, *, service: str = "", rpc_timeout: float = 1.0) -> str:
    """One gRPC health check of ``service`` at ``address`` (a plaintext health port).

    Returns the status name (``SERVING``, ``NOT_SERVING``...) or, when the call fails, the gRPC status
    code name (``UNAVAILABLE`` while nothing listens yet). A fresh channel each time, so a server that
    just started is seen at once rather than after the channel's reconnect backoff.
    """
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply: Any = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=rpc_timeout)
        except grpc.aio.AioRpcError as error:
            return str(error.code().name)
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


def describe_returncode(returncode: int) -> str:
    """``exited with code 2`` or ``killed by SIGKILL``."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def failure_reason(service: str, lines: Sequence[str]) -> str | None:
    """The error a service's output ends with, or ``None`` when the output says nothing.

    In order of preference: the ``error`` of a ``service.start_failed`` JSON line, a
    ``<service>: configuration error: ...`` line, the last JSON line logged at error level, the last
    line that is not JSON (the end of a traceback).
    """
    config_prefix = f"{service}: configuration error: "
    error_record: str | None = None
    plain: str | None = None
    for line in reversed(lines):
        text = line.strip()
        if not text:
            continue
        if text.startswith(config_prefix):
            return "configuration error: " + text[len(config_prefix) :]
        record = _json_object(text)
        if record is None:
            plain = plain or text
            continue
        if record.get("event") == "service.start_failed":
            return str(record.get("error") or "service.start_failed")
        if error_record is None and record.get("level") in ("error", "critical", "exception"):
            detail = record.get("error")
            error_record = f"{record.get('event')}: {detail}" if detail else str(record.get("event"))
    return error_record or plain


def exit_reason(service: str, returncode: int, lines: Sequence[str]) -> str:
    """Why a service ended: the error from its output, if any, and its exit code."""
    reason = failure_reason(service, lines)
    described = describe_returncode(returncode)
    return f"{reason} ({described})" if reason else described


def _json_object(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _stages(services: Sequence[ServiceSpec]) -> list[list[ServiceSpec]]:
    """``services`` in start order, cut into runs of the same :attr:`~ServiceSpec.stage`."""
    stages: list[list[ServiceSpec]] = []
    for spec in services:
        if stages and stages[-1][0].stage == spec.stage:
            stages[-1].append(spec)
        else:
            stages.append([spec])
    return stages


async def _all_or_none(starts: Iterable[Coroutine[Any, Any, None]]) -> None:
    """Run ``starts`` side by side; on the first failure cancel the rest, wait for them, and raise it."""
    tasks = [asyncio.ensure_future(start) for start in starts]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
