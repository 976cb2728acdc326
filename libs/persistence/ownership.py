"""Exclusive ownership of a shard: at most one process serves a given clock or rules shard at a time.

Two processes with the same shard would both reload its timers or matches and race each other. A
StatefulSet runs one pod per ordinal, but a force-deleted pod, a second deployment against the same
database or a process started by hand can break that; this lock makes the second process refuse to start
with a clear reason instead. On PostgreSQL it is a session-level advisory lock held on a dedicated
connection for the life of the process (released by the server if the process dies); on SQLite it is an
exclusive ``flock`` on a file beside the database (released by the OS if the process dies).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection

from libs.persistence.database import Database


class ShardTaken(RuntimeError):
    """Another live process owns this shard."""


def _lock_id(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class ShardLock:
    """Holds ``name`` (e.g. ``clock/0``) until :meth:`release`; :meth:`acquire` raises :class:`ShardTaken`."""

    def __init__(self, db: Database, name: str) -> None:
        self._db = db
        self.name = name
        self._connection: AsyncConnection | None = None
        self._file: Any = None

    async def acquire(self) -> None:
        if self._db.is_sqlite:
            database = make_url(self._db.url).database
            if database and database != ":memory:":
                self._file = _lock_file(Path(f"{database}.{self.name.replace('/', '-')}.lock"), self.name)
            return
        connection = await self._db.engine.connect()
        taken = await connection.scalar(text("SELECT pg_try_advisory_lock(:id)"), {"id": _lock_id(self.name)})
        if not taken:
            await connection.close()
            raise ShardTaken(f"another process owns {self.name} (PostgreSQL advisory lock)")
        await connection.commit()
        self._connection = connection

    async def release(self) -> None:
        if self._connection is not None:
            # Unlock explicitly: closing only returns the connection (and its session) to the pool.
            unlock = text("SELECT pg_advisory_unlock(:id)")
            await self._connection.execute(unlock, {"id": _lock_id(self.name)})
            await self._connection.commit()
            await self._connection.close()
            self._connection = None
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def _lock_file(path: Path, name: str) -> Any:
    """Take an exclusive ``flock`` on ``path`` without waiting; the open file holds it."""
    handle = path.open("a")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise ShardTaken(f"another process owns {name} (lock file {path})") from None
    handle.truncate(0)
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle
