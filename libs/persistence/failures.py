"""Which database failures mean "the database is unavailable" (retry later) rather than a bug.

A service whose database is down, restarting, failing over or out of connections cannot answer, but
nothing is wrong with the request or the service: the caller should wait a little and try again. Without
this the failure reaches the runtime's interceptor as an unknown exception and the caller gets
``INTERNAL``, which every client (rightly) treats as final; a PostgreSQL restart then failed every live
match of a load run instead of delaying a few of their moves.

:func:`database_unavailable` is the one place that tells them apart, looking at the exception, what it
wraps (SQLAlchemy's ``orig``) and what it was raised from:

- the database refused or dropped the connection: ``ConnectionRefusedError`` and other socket errors
  (``OSError``) raised in the database driver's code, PostgreSQL's SQLSTATE class 08 (connection
  exception), 57P01-57P03 ("terminating connection due to administrator command", a crash, "the
  database system is starting up / shutting down"), 53300 (too many connections), 25006 (a read-only
  server: a standby that is not promoted yet), and any ``DBAPIError`` SQLAlchemy marked
  ``connection_invalidated`` (it recognised a disconnect);
- the pool had no connection to give within its timeout (``sqlalchemy.exc.TimeoutError``);
- SQLite was busy or locked past its busy timeout ("database is locked"), or its file cannot be opened.

Everything else (an integrity error, a syntax error, a bug) is not classified here and stays
``INTERNAL``. Importing this module registers the classifier with the runtime
(:func:`libs.runtime.errors.translate_with`), which :mod:`libs.persistence` does, so every service with
a database answers these failures ``UNAVAILABLE`` with retry guidance (docs/gateway.md, "Errors and
retry guidance"), in unary calls and in refusals inside streams alike.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from types import TracebackType

from sqlalchemy import exc as sa_exc

from libs.runtime.errors import ErrorReason, Unavailable, translate_with

DATABASE_RETRY_AFTER_MS = 1000
"""The wait a refusal for an unavailable database asks for: long enough that a client retrying at this
pace does not hammer a database coming back up, short enough that a restart costs a player only a
second or two per retry."""
_CHAIN_LIMIT = 16
"""How many linked exceptions (``orig``, ``__cause__``, ``__context__``) are looked at, at most."""
_DRIVER_MODULES = ("sqlalchemy.", "asyncpg.", "aiosqlite.")
"""Code a socket error must have been raised through to count as the database's (not another peer's)."""
_POSTGRES_STATES = {
    "57P01": "the server is shutting down",
    "57P02": "the server crashed",
    "57P03": None,  # "the database system is starting up" / "... shutting down": its own words say it
    "53300": "it has too many connections",
    "25006": "it is read-only, perhaps a standby not promoted yet",
}
"""SQLSTATEs (besides class 08) that mean the server cannot serve now; ``None``: its message says why."""


class DatabaseUnavailable(Unavailable):
    """The database cannot be reached or cannot serve now; the caller may retry after
    :attr:`~libs.runtime.errors.ServiceError.retry_after_ms`."""

    def __init__(self, message: str, *, retry_after_ms: int) -> None:
        super().__init__(
            message, reason=ErrorReason.ERROR_REASON_DATABASE_UNAVAILABLE, retry_after_ms=retry_after_ms
        )


def database_unavailable(error: BaseException) -> DatabaseUnavailable | None:
    """The ``UNAVAILABLE`` refusal ``error`` stands for when it is a database that cannot serve now;
    ``None`` when it is anything else (which stays ``INTERNAL``)."""
    what = describe(error)
    if what is None:
        return None
    return DatabaseUnavailable(
        f"the database is unavailable ({what}); retry in {DATABASE_RETRY_AFTER_MS} ms",
        retry_after_ms=DATABASE_RETRY_AFTER_MS,
    )


def describe(error: BaseException) -> str | None:
    """Why the database cannot serve, in a few words that leak nothing (no host, port or query), when
    ``error`` is such a failure; ``None`` otherwise. The innermost cause recognised speaks (a connection
    SQLAlchemy found invalidated because "terminating connection due to administrator command" is "the
    server is shutting down")."""
    found: str | None = None
    for node in _chain(error):
        what = _describe_one(node, error.__traceback__)
        if what is not None:
            found = what
    return found


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and what it wraps or was raised from, each once."""
    seen: set[int] = set()
    todo: list[BaseException] = [error]
    while todo and len(seen) < _CHAIN_LIMIT:
        node = todo.pop(0)
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        orig = getattr(node, "orig", None)
        for linked in (orig, node.__cause__, node.__context__):
            if isinstance(linked, BaseException):
                todo.append(linked)


def _describe_one(node: BaseException, outer: TracebackType | None) -> str | None:
    if isinstance(node, sa_exc.TimeoutError):  # the pool's, not a statement timeout
        return "no connection to it was free within the pool's timeout"
    if isinstance(node, sa_exc.DisconnectionError):
        return "the connection to it was lost"
    if isinstance(node, sqlite3.Error):
        return _sqlite(node)
    state = getattr(node, "sqlstate", None)
    if isinstance(state, str) and type(node).__module__.startswith("asyncpg"):
        if state in ("08003", "08006"):
            return "the connection to it was lost"
        if state.startswith("08"):
            return "it refused the connection"
        if state in _POSTGRES_STATES:
            return _POSTGRES_STATES[state] or _first_line(node)
    if type(node).__module__.startswith("asyncpg") and "connection is closed" in str(node):
        return "the connection to it was lost"
    if isinstance(node, sa_exc.DBAPIError) and node.connection_invalidated:
        return "the connection to it was lost"
    if isinstance(node, OSError) and (
        _raised_through_driver(node.__traceback__) or _raised_through_driver(outer)
    ):
        return _socket_error(node)
    return None


def _sqlite(error: sqlite3.Error) -> str | None:
    name = getattr(error, "sqlite_errorname", "") or ""
    text = str(error).lower()
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in text:
        return "it is locked by another writer"
    if name.startswith("SQLITE_CANTOPEN") or "unable to open database file" in text:
        return "its file cannot be opened"
    return None


def _socket_error(error: OSError) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, TimeoutError):
        return "connecting to it timed out"
    if isinstance(error, ConnectionResetError | BrokenPipeError | ConnectionAbortedError):
        return "the connection to it was lost"
    if error.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return "its host is unreachable"
    return "it cannot be reached"


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0][:120] if str(error) else type(error).__name__


def _raised_through_driver(trace: TracebackType | None) -> bool:
    """Whether a frame of ``trace`` is the database driver's (or SQLAlchemy's): a socket error raised
    there is the database's, not another peer's."""
    while trace is not None:
        module = trace.tb_frame.f_globals.get("__name__", "")
        if isinstance(module, str) and (module + ".").startswith(_DRIVER_MODULES):
            return True
        trace = trace.tb_next
    return False


translate_with(database_unavailable)
