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
