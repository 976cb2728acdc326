"""Structured logging with structlog: JSON lines when not on a terminal, readable lines on one.

Context bound with :func:`structlog.contextvars.bind_contextvars` (the interceptor binds ``request_id``
and ``rpc`` for each call) appears on every line logged while handling that call.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog
import structlog.tracebacks
from structlog.typing import EventDict, Processor, WrappedLogger


def configure_logging(service: str, level: str = "info", log_format: str = "auto") -> None:
    """Configure structlog for this process; every line carries the service name."""
    use_json = log_format == "json" or (log_format == "auto" and not sys.stderr.isatty())

    def add_service(_logger: WrappedLogger, _name: str, event_dict: EventDict) -> EventDict:
        event_dict.setdefault("service", service)
        return event_dict

    processors: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        add_service,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    if use_json:
        # Never render the frames' local variables: they can hold secrets (keys, database URLs).
        exceptions = structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
        processors += [
            structlog.processors.ExceptionRenderer(exceptions),
            structlog.processors.JSONRenderer(),
        ]
    else:
        processors += [
            structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
        ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def get_logger(name: str, **initial: Any) -> Any:
    """A structlog logger for a module; ``initial`` values are bound to every line it logs."""
    return structlog.get_logger(name, **initial)


def current_request_id() -> str:
    """The request id bound for the call being handled (the interceptor binds it; the Exchange stream
    binds the caller's for each of its calls), or ``""`` outside one."""
    request_id = structlog.contextvars.get_contextvars().get("request_id")
    return request_id if isinstance(request_id, str) else ""


def bind_request_id(request_id: str) -> None:
    """Log the rest of the current task (its own copy of the context) under ``request_id``; an empty one
    leaves what is bound."""
    if request_id:
        structlog.contextvars.bind_contextvars(request_id=request_id)
