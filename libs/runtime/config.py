"""Service configuration, read only from environment variables, with safe local defaults.

Every service reads the same variables (each process has its own environment, so in Kubernetes a pod
sets them for its one service):

=========================  ==================================================  ============================
variable                   meaning                                             default
=========================  ==================================================  ============================
``SKILLCLASSICS_ENV``      ``development`` or ``production``                   ``development``
``GRPC_HOST``              address the gRPC server binds                       ``127.0.0.1``
``GRPC_PORT``              gRPC port (0 picks a free one)                      the service's fixed port
``METRICS_PORT``           Prometheus ``/metrics`` HTTP port (-1: off)         the service's fixed port
``DATA_DIR``               folder for local data (SQLite files, dev keys)      ``./data``
``DATABASE_URL``           SQLAlchemy async URL                                SQLite file in ``DATA_DIR``
``LOG_LEVEL``              ``debug``, ``info``, ``warning``, ``error``         ``info``
``LOG_FORMAT``             ``json``, ``console`` or ``auto`` (JSON unless tty)  ``auto``
``SHUTDOWN_GRACE_SECONDS`` how long in-flight calls may finish on SIGTERM      ``10``
``MIGRATE_ON_START``       apply database migrations when the service starts   ``true``
``EVENT_LOOP``             ``uvloop`` or ``asyncio`` (:mod:`libs.runtime.      ``uvloop`` (``asyncio``
                           eventloop`)                                         without uvloop)
``HEALTH_PORT``            a plaintext port serving only the gRPC health       the gRPC port + 100
                           service, for the kubelet's probes (-1: off)         (0 with ``GRPC_PORT=0``)
``GRPC_REFLECTION``        serve gRPC server reflection (to operators)         ``true``
``GRPC_MAX_CONNECTION_AGE  close each client connection gracefully after this  ``0`` (never)
_MS``                      long, so that callers balancing over replicas find
                           new ones (calls and streams in flight go on)
=========================  ==================================================  ============================

Mutual TLS between services (``TLS_MODE``, ``SERVICE_IDENTITY``, ``TLS_*_FILE``, ...) is read here too:
see :mod:`libs.runtime.tls`.

In production nothing that matters may fall back silently: ``DATABASE_URL`` must be set, and services
ask for their secrets with :func:`require_secret`. A bad value fails at start with :class:`ConfigError`.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from libs.runtime.ports import DEFAULT_PORTS, HEALTH_PORT_SHIFT

if TYPE_CHECKING:
    from libs.runtime.tls import TransportSecurity

LogFormat = Literal["json", "console", "auto"]
Environment = Literal["development", "production"]
EventLoop = Literal["uvloop", "asyncio"]
_LOG_LEVELS = ("debug", "info", "warning", "error")


DEFAULT_GC_THRESHOLDS = (20_000, 20, 100)
"""Generation thresholds of Python's cyclic garbage collector in a serving process (Python's own are
700, 10, 10). Measured in docs/performance.md: with the defaults the collector took about 5 % of
rules-chess's and the gateway's CPU under load, with pauses past 100 ms."""


class ConfigError(ValueError):
    """A configuration variable is missing or malformed; the message names it."""


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """Everything the runtime needs to start one service."""

    service: str
    """The service's name, e.g. ``fairness``."""
    environment: Environment
    grpc_host: str
    grpc_port: int
    """The gRPC port; 0 asks the OS for a free one (tests)."""
    metrics_port: int | None
    """The Prometheus HTTP port; ``None`` when metrics are off."""
    data_dir: Path
    database_url: str
    log_level: str
    log_format: LogFormat
    shutdown_grace_seconds: float
    migrate_on_start: bool
    gc_thresholds: tuple[int, int, int] = DEFAULT_GC_THRESHOLDS
    """The garbage collector's generation thresholds once the service is serving (``GC_THRESHOLDS``;
    see :func:`libs.runtime.server.settle_garbage_collector`)."""
    event_loop: EventLoop = field(default_factory=lambda: event_loop_choice({}))
    """The event loop the process runs on (``EVENT_LOOP``; see :mod:`libs.runtime.eventloop`): when not
    given, the same default as :meth:`from_env` without ``EVENT_LOOP`` (uvloop where installed)."""
    transport: TransportSecurity | None = None
    """Mutual TLS: this workload's identity and certificates (:mod:`libs.runtime.tls`); ``None`` only
    for a configuration built by hand, which then serves and calls without TLS."""
    health_port: int | None = None
    """The plaintext port that serves only the health service (``None``: none)."""
    reflection: bool = True
    """Whether gRPC server reflection is served (``GRPC_REFLECTION``)."""
    max_connection_age_ms: int = 0
    """After how long a client connection is closed gracefully (GOAWAY: calls in flight finish, the
    client connects again and re-resolves its target), 0 never (``GRPC_MAX_CONNECTION_AGE_MS``). Set
    where callers balance over a ``dns:///`` name of replicas, so a replica added later gets calls."""

    @property
    def is_production(self) -> bool:
        return self.environment == "production"

    @property
    def tls(self) -> TransportSecurity:
        """How this service calls the others: :attr:`transport`, or plaintext when none was configured."""
        if self.transport is not None:
            return self.transport
        from libs.runtime.tls import TransportSecurity

        return TransportSecurity.plaintext(self.service)

    @classmethod
    def from_env(cls, service: str, environ: Mapping[str, str] | None = None) -> ServiceConfig:
        """Read the configuration of ``service`` from ``environ`` (default: the process environment)."""
        env = os.environ if environ is None else environ
        ports = DEFAULT_PORTS.get(service)
        environment = _choice(env, "SKILLCLASSICS_ENV", ("development", "production"), "development")
        data_dir = Path(env.get("DATA_DIR", "data"))
        database_url = database_url_from_env(service, env)
        metrics_port = _int(env, "METRICS_PORT", ports.metrics if ports else -1, minimum=-1)
        grpc_port = _int(env, "GRPC_PORT", ports.grpc if ports else 0, minimum=0)
        health_port = _int(env, "HEALTH_PORT", grpc_port + HEALTH_PORT_SHIFT if grpc_port else 0, minimum=-1)
        from libs.runtime.tls import TransportSecurity  # it reads ConfigError from here

        transport = TransportSecurity.from_env(service, env, data_dir, production=environment == "production")
        return cls(
            service=service,
            environment=environment,  # type: ignore[arg-type]
            grpc_host=env.get("GRPC_HOST", "127.0.0.1"),
            grpc_port=grpc_port,
            metrics_port=None if metrics_port < 0 else metrics_port,
            data_dir=data_dir,
            database_url=database_url,
            log_level=_choice(env, "LOG_LEVEL", _LOG_LEVELS, "info"),
            log_format=_choice(env, "LOG_FORMAT", ("json", "console", "auto"), "auto"),  # type: ignore[arg-type]
            shutdown_grace_seconds=_float(env, "SHUTDOWN_GRACE_SECONDS", 10.0),
            migrate_on_start=_bool(env, "MIGRATE_ON_START", True),
            gc_thresholds=_gc_thresholds(env),
            event_loop=event_loop_choice(env),
            transport=transport,
            health_port=None if health_port < 0 else health_port,
            reflection=_bool(env, "GRPC_REFLECTION", True),
            max_connection_age_ms=env_int(env, "GRPC_MAX_CONNECTION_AGE_MS", 0, minimum=0),
        )


def database_url_from_env(service: str, environ: Mapping[str, str] | None = None) -> str:
    """The database URL ``service`` uses: ``DATABASE_URL``, else (not in production) a SQLite file in
    ``DATA_DIR``. Only this (no certificates, no ports): what a migration job needs."""
    env = os.environ if environ is None else environ
    database_url = env.get("DATABASE_URL", "")
    if database_url:
        return database_url
    if _choice(env, "SKILLCLASSICS_ENV", ("development", "production"), "development") == "production":
        raise ConfigError("DATABASE_URL must be set in production")
    return sqlite_url(Path(env.get("DATA_DIR", "data")) / f"{service}.db")


def sqlite_url(path: Path) -> str:
    """The SQLAlchemy async URL of a SQLite file."""
    return f"sqlite+aiosqlite:///{path}"


def event_loop_choice(env: Mapping[str, str]) -> EventLoop:
    """The loop ``EVENT_LOOP`` asks for: ``uvloop`` by default, or ``asyncio`` when uvloop is not
    installed; asking for uvloop where it is missing is a :class:`ConfigError`."""
    installed = importlib.util.find_spec("uvloop") is not None
    choice = _choice(env, "EVENT_LOOP", ("uvloop", "asyncio"), "uvloop" if installed else "asyncio")
    if choice == "uvloop" and not installed:
        raise ConfigError("EVENT_LOOP is uvloop, but uvloop is not installed")
    return "uvloop" if choice == "uvloop" else "asyncio"


def env_int(env: Mapping[str, str], name: str, default: int, *, minimum: int = 0) -> int:
    """An integer variable; a malformed or too small value is a :class:`ConfigError`."""
    return _int(env, name, default, minimum=minimum)


def require_secret(env: Mapping[str, str], name: str) -> str | None:
    """A secret from the environment, or ``None`` when it is unset (callers decide the dev fallback)."""
    value = env.get(name, "").strip()
    return value or None


def _int(env: Mapping[str, str], name: str, default: int, *, minimum: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    return value


def _gc_thresholds(env: Mapping[str, str]) -> tuple[int, int, int]:
    raw = env.get("GC_THRESHOLDS")
    if raw is None or raw.strip() == "":
        return DEFAULT_GC_THRESHOLDS
    parts = raw.split(",")
    try:
        values = tuple(int(part) for part in parts)
    except ValueError:
        values = ()
    if len(values) != 3 or values[0] < 1 or min(values) < 0:
        raise ConfigError(
            f"GC_THRESHOLDS must be three integers like 20000,20,100 (the first at least 1), got {raw!r}"
        )
    return values


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if value < 0:
        raise ConfigError(f"{name} must not be negative, got {value}")
    return value


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return lowered
