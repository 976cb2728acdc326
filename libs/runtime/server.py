"""Starting and stopping a service: the gRPC server, health, reflection, metrics and graceful shutdown."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import gc
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar
from wsgiref.simple_server import WSGIServer

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import start_http_server

from libs.runtime.authz import ANYONE, POLICY, Authorizer
from libs.runtime.config import ConfigError, ServiceConfig
from libs.runtime.eventloop import run_on
from libs.runtime.game_metrics import BUILD_INFO, platform_version
from libs.runtime.identity import DEFAULT_TRUST_DOMAIN
from libs.runtime.interceptor import RpcInterceptor
from libs.runtime.log import configure_logging, get_logger
from libs.runtime.metrics import SERVICE_INFO

MAX_MESSAGE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class KeepalivePolicy:
    """The keepalive pings of the platform, both sides in one place: what every server accepts and what
    the channels that carry long-lived streams (the gateway's Exchange streams to each rules shard) send.

    The channels ping every :attr:`ping_interval_ms` while a call is open, so that a connection that died
    without a reset (a node gone) is noticed within ``ping_interval_ms + ping_timeout_ms`` (30 s) and its
    streams fail and are reopened, instead of every call on it waiting until TCP gives up (many minutes).

    A server counts a ping that comes sooner than :attr:`min_ping_interval_ms` after the previous one,
    while it has sent no data since, as a strike, and past :attr:`max_ping_strikes` strikes it closes the
    connection (GOAWAY ``ENHANCE_YOUR_CALM``, "too_many_pings"), failing every stream on it. So the
    channels must ping less often than the servers accept: :meth:`__post_init__` keeps it so, with a
    margin of half the interval for timers that fire early. (Until this policy the server's limit was
    set under a name grpc does not know, ``grpc.http2.min_recv_ping_interval_without_data_ms``, so grpc's
    default of five minutes applied: every quiet shard link was closed at its third ping, after a
    minute, taking every Play stream of that shard with it. The name grpc reads is
    ``grpc.http2.min_ping_interval_without_data_ms``, the C core's
    ``GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS``.) BDP pings, which grpc sends after
    receiving data, never count: a server that has just sent data accepts any ping.
    """

    ping_interval_ms: int = 20_000
    """How often a channel pings while a call is open (``grpc.keepalive_time_ms``)."""
    ping_timeout_ms: int = 10_000
    """How long a ping may go unanswered before the connection is closed (``grpc.keepalive_timeout_ms``)."""
    min_ping_interval_ms: int = 10_000
    """The most often a server accepts pings from a client that sends no data."""
    max_ping_strikes: int = 2
    """Pings sooner than that a server tolerates before it closes the connection (grpc's default)."""

    def __post_init__(self) -> None:
        if self.ping_interval_ms < 2 * self.min_ping_interval_ms:
            raise ValueError(
                f"keepalive pings every {self.ping_interval_ms} ms are too close to the servers' minimum "
                f"of {self.min_ping_interval_ms} ms (they must be at least twice as far apart)"
            )

    def server_options(self) -> list[tuple[str, object]]:
        """What every server accepts (:func:`start_server`)."""
        return [
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", self.min_ping_interval_ms),
            ("grpc.http2.max_ping_strikes", self.max_ping_strikes),
        ]

    def channel_options(self) -> list[tuple[str, object]]:
        """What a channel carrying long-lived streams sends."""
        return [
            ("grpc.keepalive_time_ms", self.ping_interval_ms),
            ("grpc.keepalive_timeout_ms", self.ping_timeout_ms),
            ("grpc.http2.max_pings_without_data", 0),
        ]


KEEPALIVE = KeepalivePolicy()
"""The platform's keepalive policy, read when a server starts and when a channel is made (tests shrink
it)."""
_log = get_logger(__name__)


class Service(abc.ABC):
    """One SkillClassics service: its gRPC servicers and the resources they hold.

    The runtime calls :meth:`start` before the server accepts calls, :meth:`drain` when shutdown
    begins (the moment to end long-lived streams), and :meth:`close` once the server has stopped.
    """

    name: ClassVar[str]
    """The service's name, as in :data:`libs.runtime.ports.DEFAULT_PORTS`."""
    public: ClassVar[bool] = False
    """Whether its port is the players' door (the gateway): no client certificate is asked for there,
    and each method authenticates its caller itself. Every other service is a backend, reached only
    over mutual TLS."""

    @property
    @abc.abstractmethod
    def service_names(self) -> Sequence[str]:
        """The fully qualified gRPC service names it serves (for health and reflection)."""

    @abc.abstractmethod
    async def start(self, server: grpc.aio.Server) -> None:
        """Open resources (database, migrations) and add the servicers to ``server``."""

    async def drain(self, grace_s: float | None = None) -> None:  # noqa: B027 - optional hook
        """Shutdown has begun: no new calls are accepted; finish or end streams. ``grace_s``: the seconds
        the calls in flight are given before grpc cancels them (``None``: none, they are cancelled at
        once)."""

    async def close(self) -> None:  # noqa: B027 - optional hook, nothing to do by default
        """The server has stopped: release resources."""

    _health: health.aio.HealthServicer | None = None
    _serving: bool = True

    async def set_serving(self, serving: bool) -> None:
        """Report SERVING or NOT_SERVING on the health service (for every name it serves), for a service
        that cannot serve for a while and recovers by itself (a shard whose ownership was lost, until it
        holds it again). Before the server is started, the state is kept and reported once it is; once
        shutdown has begun it stays NOT_SERVING."""
        self._serving = serving
        if self._health is not None:
            status = (
                health_pb2.HealthCheckResponse.SERVING
                if serving
                else health_pb2.HealthCheckResponse.NOT_SERVING
            )
            for name in ["", *self.service_names]:
                await self._health.set(name, status)


@dataclass
class RunningServer:
    """A started service; :meth:`stop` drains and stops it."""

    service: Service
    server: grpc.aio.Server
    health: health.aio.HealthServicer
    port: int
    """The gRPC port it listens on (useful when started on port 0)."""
    metrics_port: int | None = None
    health_port: int | None = None
    """The plaintext port that serves only the health service, when there is one."""
    _metrics_http: WSGIServer | None = field(default=None, repr=False)
    _stopped: bool = field(default=False, repr=False)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self, grace: float | None = 5.0) -> None:
        """Report NOT_SERVING, refuse new calls, give in-flight ones ``grace`` seconds, then close."""
        if self._stopped:
            return
        self._stopped = True
        _log.info("service.draining", grace_seconds=grace)
        await self.health.enter_graceful_shutdown()
        await self.service.drain(grace)
        await self.server.stop(grace)
        await self.service.close()
        if self._metrics_http is not None:
            self._metrics_http.shutdown()
            self._metrics_http.server_close()
        _log.info("service.stopped")


async def start_server(service: Service, config: ServiceConfig) -> RunningServer:
    """Start ``service`` with ``config`` in this event loop; it is SERVING when this returns.

    A backend listens with mutual TLS and checks every call against the authorisation table; the
    gateway's public port asks for no certificate. ``config.health_port`` adds a plaintext port on which
    only the health service answers (the kubelet's probes cannot present a certificate).
    """
    transport = config.transport
    mutual = transport is not None and transport.is_mutual
    authorizer: Authorizer | None = None
    if mutual:
        policy = POLICY
        if service.public:  # the gateway's API is published: anyone may list it
            policy = {**POLICY, **{m: {ANYONE: None} for m in POLICY if "ServerReflection" in m}}
        authorizer = Authorizer(policy)
    elif transport is not None:
        _log.warning(
            "service.plaintext", reason="TLS_MODE=plaintext: every caller is trusted (local debugging only)"
        )
    server = grpc.aio.server(
        interceptors=[
            RpcInterceptor(
                authorizer, transport.trust_domain if transport is not None else DEFAULT_TRUST_DOMAIN
            )
        ],
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
            *KEEPALIVE.server_options(),
            *(
                [("grpc.max_connection_age_ms", config.max_connection_age_ms)]
                if config.max_connection_age_ms
                else []
            ),
        ],
    )
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    await service.start(server)
    names = list(service.service_names)
    if config.reflection:
        reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    address = f"{config.grpc_host}:{config.grpc_port}"
    if mutual and not service.public:
        assert transport is not None
        port = server.add_secure_port(address, transport.server_credentials())
    else:
        port = server.add_insecure_port(address)
    health_port: int | None = None
    if port != 0 and config.health_port is not None:
        health_port = server.add_insecure_port(f"{config.grpc_host}:{config.health_port}")
        port = port if health_port != 0 else 0
    if port == 0:
        await service.close()
        raise OSError(f"cannot listen on {address} (or its health port {config.health_port})")
    await server.start()
    metrics_http: WSGIServer | None = None
    metrics_port: int | None = None
    if config.metrics_port is not None:
        metrics_http, _ = start_http_server(config.metrics_port, addr=config.grpc_host)
        metrics_port = metrics_http.server_port
    SERVICE_INFO.labels(service.name).set(1)
    BUILD_INFO.labels(service.name, platform_version()).set(1)
    service._health = health_servicer
    await service.set_serving(service._serving)
    loop = type(asyncio.get_running_loop())
    _log.info(
        "service.serving",
        grpc_port=port,
        health_port=health_port,
        metrics_port=metrics_port,
        event_loop=loop.__module__,
        tls="mutual" if mutual and not service.public else ("public" if service.public else "plaintext"),
        identity=transport.identity.name if transport is not None else None,
    )
    return RunningServer(service, server, health_servicer, port, metrics_port, health_port, metrics_http)


async def serve(service: Service, config: ServiceConfig) -> None:
    """Run ``service`` until SIGTERM or SIGINT, then shut down gracefully."""
    configure_logging(config.service, config.log_level, config.log_format)
    try:
        running = await start_server(service, config)
    except Exception as error:
        _log.error("service.start_failed", error=str(error) or type(error).__name__, exc_info=error)
        raise SystemExit(1) from None
    settle_garbage_collector(config.gc_thresholds)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signum: int, frame: object) -> None:
        # A plain handler, never restored: a second signal (a terminal's Ctrl-C reaching the whole
        # process group, then a supervisor's SIGTERM) must not kill the process halfway through its
        # shutdown, nor while the interpreter exits after it. (asyncio's own handlers are put back to
        # the default when the loop closes.)
        with contextlib.suppress(RuntimeError):  # the loop has closed: we are exiting anyway
            loop.call_soon_threadsafe(stop.set)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    await stop.wait()
    await running.stop(config.shutdown_grace_seconds)


def settle_garbage_collector(thresholds: tuple[int, int, int]) -> None:
    """Once a service is serving: move everything alive (modules, stubs, configuration, matches just
    rebuilt from the log) out of the cyclic collector's reach, and collect the young generation less
    often.

    A service holds hundreds of thousands of long-lived objects; with Python's defaults every full
    collection walks all of them (pauses of 50-200 ms measured under load) and a young collection runs
    every 700 allocations. Frozen objects are still freed by reference counting; only the cycle search
    skips them.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*thresholds)


@contextlib.contextmanager
def garbage_collector_settled(thresholds: tuple[int, int, int]) -> Iterator[None]:
    """:func:`settle_garbage_collector` for the length of a block, then the collector as it was (nothing
    frozen, the thresholds before): for a long-running client in a process that goes on afterwards, such
    as a load run (whose measured latencies would otherwise include its own full collections)."""
    previous = gc.get_threshold()
    settle_garbage_collector(thresholds)
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*previous)


def run_service(service_class: Callable[[ServiceConfig], Service], name: str) -> None:
    """The ``__main__`` of a service: read the environment, serve, exit 0 after a clean shutdown.

    A configuration error or a failed start exits non-zero with the reason on stderr.
    """
    try:
        config = ServiceConfig.from_env(name)
        service = service_class(config)
    except ConfigError as error:
        print(f"{name}: configuration error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    run_on(config.event_loop, serve(service, config))
    # Shut down cleanly: from here to the end of the interpreter, a late signal must not turn exit 0
    # into "killed" (Python resets its own handlers to the default while finalizing; SIG_IGN it keeps).
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)
