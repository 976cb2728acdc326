"""Helpers shared by tests and benchmarks: free ports, waiting for SERVING, services as processes, and
calling backends over mutual TLS as a given identity.

Every service a test starts runs with mutual TLS on, as in production. The session's development PKI is
in ``TLS_DIR`` (set once for the whole session by :func:`use_session_pki`, so services started as
processes find it too); :func:`backend_channel` calls a backend as any identity of the platform.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from base64 import b64encode
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import REGISTRY

from libs.launcher import ServiceSpec, find_free_port_offset, worker_port_offsets
from libs.runtime import RunningServer, Service, ServiceConfig, start_server
from libs.runtime.errors import Problem
from libs.runtime.identity import Identity
from libs.runtime.pki import ensure_development_pki
from libs.runtime.tls import TransportSecurity

ROOT = Path(__file__).resolve().parent.parent
IDENTITIES = (
    "operator",
    "gateway",
    "matchmaking",
    "fairness",
    "clock",
    "rules-chess-0",
    "rules-chess-1",
    "rules-gin-0",
    "rules-gin-1",
)
"""The identities the session's PKI holds from the start (others are made on first use)."""


def use_session_pki(directory: Path) -> Path:
    """Make the development PKI in ``directory`` and point ``TLS_DIR`` at it for this process and the
    services it starts."""
    ensure_development_pki(directory, IDENTITIES)
    os.environ["TLS_DIR"] = str(directory)
    return directory


def tls_dir() -> Path:
    """The session's development PKI."""
    return Path(os.environ["TLS_DIR"])


def tls_settings() -> dict[str, str]:
    """The variables that give a service started in a test the session's PKI."""
    return {"TLS_DIR": str(tls_dir())}


def transport_as(identity: str) -> TransportSecurity:
    """Mutual TLS as ``identity`` (a certificate of the session's PKI)."""
    return TransportSecurity("mtls", Identity.parse(identity), development_dir=tls_dir())


def backend_channel(
    address: str,
    identity: str = "operator",
    service: str = "localhost",
    options: list[tuple[str, object]] | None = None,
) -> grpc.aio.Channel:
    """A channel to the backend at ``address`` presenting ``identity``'s certificate; the server's
    certificate is checked against ``service`` (every development certificate names ``localhost``)."""
    return transport_as(identity).channel(address, service, options=options)


def stack_port_offset(services: Iterable[ServiceSpec] | None = None) -> int:
    """A free port offset for a launcher stack of ``services`` in this test worker's own range
    (:func:`libs.launcher.worker_port_offsets`; pytest-xdist names the worker and the count)."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return find_free_port_offset(services, within=worker_port_offsets(worker, workers))


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def health_of(address: str) -> int | None:
    """The overall health status at a plaintext health port; ``None`` when it does not answer."""
    async with grpc.aio.insecure_channel(address) as channel:
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=1
            )
        except grpc.aio.AioRpcError:
            return None
        return int(reply.status)


async def wait_for_health(address: str, status: int, within: float) -> None:
    """Wait until the health port at ``address`` reports ``status`` (TimeoutError after ``within`` s)."""
    async with asyncio.timeout(within):
        while True:
            if await health_of(address) == status:
                return
            await asyncio.sleep(0.05)


async def wait_until_serving(address: str, within: float = 20.0, service: str = "") -> None:
    """Poll the gRPC health service at ``address`` (a plaintext health port, or the gateway's) until it
    answers SERVING."""
    deadline = asyncio.get_running_loop().time() + within
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"{address} did not report SERVING within {within} s")
            await asyncio.sleep(0.05)


class ServiceProcess:
    """A service run as its own process on a free port, as in production (kill -9 tests, benchmarks).

    ``async with ServiceProcess("services.clock", {"DATABASE_URL": url}) as service:`` starts it and
    waits for SERVING; :meth:`kill` and :meth:`start` again restart it on the same port and data.
    """

    def __init__(self, module: str, env: Mapping[str, str] | None = None) -> None:
        self.module = module
        self.port = free_port()
        self.health_port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.health_address = f"127.0.0.1:{self.health_port}"
        self.env = {
            **os.environ,
            "METRICS_PORT": "-1",
            **(env or {}),
            "GRPC_PORT": str(self.port),
            "HEALTH_PORT": str(self.health_port),
        }
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self) -> None:
        self.process = subprocess.Popen(  # noqa: ASYNC220 - a fork-exec, not a wait
            [sys.executable, "-m", self.module], cwd=ROOT, env=self.env, stderr=subprocess.DEVNULL
        )
        await wait_until_serving(self.health_address)

    def kill(self, signum: int = signal.SIGKILL) -> int:
        """Send ``signum`` and wait for the process to end; returns its exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signum)
        return self.process.wait(30)

    async def __aenter__(self) -> ServiceProcess:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.kill(signal.SIGTERM)


async def start_in_process(
    name: str,
    make: Callable[[ServiceConfig, Mapping[str, str]], Service],
    database_url: str,
    env: Mapping[str, str] | None = None,
    **settings: str,
) -> RunningServer:
    """Start service ``name`` in this event loop on a free port with ``database_url``; ``env`` is the
    service's own environment (keys, addresses), ``settings`` override the runtime's (``GRPC_PORT=...``)."""
    config = ServiceConfig.from_env(
        name,
        {
            "GRPC_PORT": "0",
            "METRICS_PORT": "-1",
            "HEALTH_PORT": "-1",
            "DATABASE_URL": database_url,
            **tls_settings(),
            **settings,
        },
    )
    return await start_server(make(config, env or {}), config)


FAIRNESS_TEST_SEED_KEY = b64encode(bytes(range(32))).decode()
"""The seed-encryption key of the fairness services tests start (never a production key)."""


async def start_fairness(database_url: str, data_dir: Path, **settings: str) -> RunningServer:
    """The fairness service in this event loop with the test seed key; ``settings`` as for
    :func:`start_in_process` (``GRPC_PORT=...`` to bring it back on the port it had)."""
    from services.fairness.service import FairnessService

    env = {"FAIRNESS_SEED_KEY": FAIRNESS_TEST_SEED_KEY}
    return await start_in_process(
        "fairness", FairnessService, database_url, env, DATA_DIR=str(data_dir), **settings
    )


def stream_calls_counted(service: str, method: str, call: str, code: str) -> float:
    """How many calls inside streams of ``service``/``method`` this process answered with ``code``
    (``skillclassics_stream_calls_handled_total``)."""
    labels = {"grpc_service": service, "grpc_method": method, "call": call, "grpc_code": code}
    return REGISTRY.get_sample_value("skillclassics_stream_calls_handled_total", labels) or 0.0


@dataclass
class Backends:
    """Every backend of the platform in this event loop, wired as in production (mutual TLS on)."""

    fairness: RunningServer
    clock: RunningServer
    chess: RunningServer
    gin: RunningServer
    matchmaking: RunningServer

    def servers(self) -> list[RunningServer]:
        """In start order."""
        return [self.fairness, self.clock, self.chess, self.gin, self.matchmaking]

    def gateway_env(self) -> dict[str, str]:
        """Where a gateway finds them."""
        return {
            "MATCHMAKING_ADDRESS": self.matchmaking.address,
            "RULES_CHESS_ADDRESSES": self.chess.address,
            "RULES_GIN_ADDRESSES": self.gin.address,
            "FAIRNESS_ADDRESS": self.fairness.address,
        }

    async def stop(self) -> None:
        await stop_servers(self.servers())


async def start_backends(folder: Path) -> Backends:
    """Fairness, clock, the chess and gin rules shards and matchmaking, each on its own SQLite file in
    ``folder``: the rules shards draw from fairness, arm timers on the clock and report to matchmaking,
    which creates matches on them with fairness's commitments."""
    from services.clock.service import ClockService
    from services.matchmaking.service import MatchmakingService
    from services.rules_chess.service import chess_rules_service
    from services.rules_gin.service import gin_rules_service

    def db(name: str) -> str:
        return f"sqlite+aiosqlite:///{folder / f'{name}.db'}"

    servers: list[RunningServer] = []
    try:
        fairness = await start_fairness(db("fairness"), folder)
        servers.append(fairness)
        clock = await start_in_process("clock", ClockService, db("clock"))
        servers.append(clock)
        mm_port = free_port()
        rules_env = {
            "MATCHMAKING_ADDRESS": f"127.0.0.1:{mm_port}",
            "CLOCK_ADDRESS": clock.address,
            "FAIRNESS_ADDRESS": fairness.address,
        }
        chess = await start_in_process("rules-chess", chess_rules_service, db("rules-chess"), rules_env)
        servers.append(chess)
        gin = await start_in_process("rules-gin", gin_rules_service, db("rules-gin"), rules_env)
        servers.append(gin)
        mm_env = {
            "RULES_CHESS_ADDRESSES": chess.address,
            "RULES_GIN_ADDRESSES": gin.address,
            "FAIRNESS_ADDRESS": fairness.address,
        }
        matchmaking = await start_in_process(
            "matchmaking", MatchmakingService, db("matchmaking"), mm_env, GRPC_PORT=str(mm_port)
        )
    except BaseException:
        await stop_servers(servers)
        raise
    return Backends(fairness, clock, chess, gin, matchmaking)


async def stop_servers(servers: list[RunningServer]) -> None:
    """Stop ``servers`` in the reverse of their start order."""
    for server in reversed(servers):
        await server.stop(grace=0.5)


async def refused(
    call: object,
    code: grpc.StatusCode,
    text: str = "",
    *,
    why: str | None = None,
    fields: tuple[str, ...] | None = None,
) -> Problem:
    """Await ``call`` and check that it was refused with ``code``, a message containing ``text``, and
    (when given) the catalogue's reason ``why`` and BadRequest violations naming exactly ``fields``, as
    the status details carry them (docs/errors.md). Every refusal carries a reason: an ``UNSPECIFIED``
    one fails the check whatever ``why`` is."""
    import pytest

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    problem = Problem.from_rpc_error(caught.value)
    assert problem.code == code, problem
    assert text in problem.message, problem
    assert problem.reason != "UNSPECIFIED", problem
    if why is not None:
        assert problem.reason == why, problem
    if fields is not None:
        assert tuple(v.field for v in problem.violations) == fields, problem
    return problem
