"""The service runtime every SkillClassics service starts with.

A service describes itself as a :class:`Service`; :func:`serve` runs it as a process (configuration from
the environment, structured logs, Prometheus metrics, the gRPC health and reflection services, graceful
shutdown on SIGTERM) and :func:`start_server` starts it in-process on any port, which is what tests use.
"""

from libs.runtime.config import ConfigError, ServiceConfig
from libs.runtime.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    ServiceError,
    Unauthenticated,
    Unavailable,
)
from libs.runtime.server import RunningServer, Service, run_service, serve, start_server

__all__ = [
    "AlreadyExists",
    "ConfigError",
    "FailedPrecondition",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "RunningServer",
    "Service",
    "ServiceConfig",
    "ServiceError",
    "Unauthenticated",
    "Unavailable",
    "run_service",
    "serve",
    "start_server",
]
