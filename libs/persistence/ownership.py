"""Exclusive, fenced ownership of a shard: at most one process writes a given clock or rules shard.

Two processes with the same shard would both reload its timers or matches and race each other. A
StatefulSet runs one pod per ordinal, but a force-deleted pod, a second deployment against the same
database or a process started by hand can break that; the shard's lock makes the second process refuse to
start with a clear reason instead. On PostgreSQL it is a session-level advisory lock held on a dedicated
connection (released by the server if the process dies); on SQLite it is an exclusive ``flock`` on a file
beside the database (released by the OS if the process dies).

A lock alone is not enough on PostgreSQL: a database restart ends every session, and with them every
advisory lock, while the owner goes on serving; a second process could then take the lock and both would
write the same matches. So every acquisition also increments the shard's *epoch* in ``shard_owners`` (one
transaction, under the lock), and every write of the shard's data is conditional on the epoch it was made
under (:class:`Fence`, the first statement of each group commit): once another process holds a newer
epoch, the old owner's commits are refused (``UNAVAILABLE``: "shard X lost its ownership; retry") and
roll back. The fence is what makes two writers impossible; the heartbeat (:class:`ShardKeeper`) only
makes the old owner notice quickly, stop serving and take the shard again.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection

from libs.persistence.database import Database
from libs.persistence.group_commit import Fenced
from libs.persistence.schema import shard_owners
from libs.runtime.config import env_int
from libs.runtime.log import get_logger
from libs.runtime.timesource import ServiceTime

HEARTBEAT_SECONDS = 0.25
"""How often a kept shard renews its owner's ``alive_at_ms`` and checks that it still holds the lock."""
RETRY_SECONDS = 1.0
"""How often a process that lost its shard tries to take it again."""


def keeper_timing(environ: Mapping[str, str]) -> tuple[float, float]:
    """The heartbeat and the retry interval of a :class:`ShardKeeper`, in seconds, from
    ``SHARD_HEARTBEAT_MS`` and ``SHARD_RETRY_MS`` (every sharded service reads them the same way)."""
    heartbeat_ms = env_int(environ, "SHARD_HEARTBEAT_MS", int(HEARTBEAT_SECONDS * 1000), minimum=10)
    retry_ms = env_int(environ, "SHARD_RETRY_MS", int(RETRY_SECONDS * 1000), minimum=10)
    return heartbeat_ms / 1000, retry_ms / 1000


DATABASE_TIMEOUT_SECONDS = 5.0
"""A heartbeat, an acquisition or a release that takes longer than this has failed (a database that does
not answer: the lock may be gone with the session, so the shard counts as lost)."""
_log = get_logger(__name__)


class ShardTaken(RuntimeError):
    """Another live process owns this shard."""


class ShardFenced(Fenced):
    """A write of a shard this process no longer owns (its lock was lost, or another process took a newer
    epoch): refused, nothing of it committed. ``UNAVAILABLE``: the caller retries, and reaches the owner."""


def lost_reason(name: str) -> str:
    """Why a write of a shard that lost its ownership is refused."""
    return f"shard {name} lost its ownership; retry"


def _lock_id(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def _instance() -> str:
    """This process, as ``shard_owners.owner`` names it (for an operator reading the table)."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


_RENEW = (
    update(shard_owners)
    .where(shard_owners.c.shard == bindparam("s"), shard_owners.c.epoch == bindparam("e"))
    .values(alive_at_ms=bindparam("now"))
)
"""The conditional renewal: one row when the epoch is still the shard's, none once another process took it."""


class Fence:
    """The write guard of one epoch of a shard: every write made under it is conditional on that epoch.

    A store takes the fence of the epoch it was built under (:meth:`ShardLock.fence`). :meth:`check`
    refuses a write at once when the process knows it lost the shard (or took it again since: a store
    of an old epoch never writes again); :meth:`guard` is the first statement of every transaction that
    writes, renewing ``alive_at_ms`` only while the shard's epoch is still this one, and aborting the
    transaction otherwise. One statement per group commit, not per event.
    """

    __slots__ = ("_lock", "epoch", "name")

    def __init__(self, lock: ShardLock, epoch: int) -> None:
        self._lock = lock
        self.name = lock.name
        self.epoch = epoch

    def check(self) -> None:
        """Raise :class:`ShardFenced` unless this epoch is still held (as far as this process knows)."""
        if not self._lock.holds(self.epoch):
            raise ShardFenced(lost_reason(self.name))

    def guard(self, conn: Connection) -> None:
        """Inside the writing transaction: renew the owner's ``alive_at_ms`` on the condition that the
        shard's epoch is still this one, or abort the transaction with :class:`ShardFenced`. Safe to call
        from the committer's SQLite writer thread."""
        self.check()
        params = {"s": self.name, "e": self.epoch, "now": self._lock.time.now_ms()}
        if conn.execute(_RENEW, params).rowcount != 1:
            self._lock.lose(f"epoch {self.epoch} was superseded: another process took the shard")
            raise ShardFenced(lost_reason(self.name))


class ShardLock:
    """Holds ``name`` (e.g. ``clock/0``) with a fresh epoch until :meth:`release` or until it is lost;
    :meth:`acquire` raises :class:`ShardTaken` when another process holds it.

    After an acquisition, :attr:`epoch` is the shard's new epoch and :attr:`previous_alive_at_ms` the
    last instant (Unix ms, the owners' time source) at which the previous owner was known alive: its
    last heartbeat, commit or release (``None`` when the shard never had an owner). The downtime of a
    shard, for crediting players, runs from that instant to this acquisition.
    """

    def __init__(
        self, db: Database, name: str, *, time: ServiceTime | None = None, instance: str | None = None
    ) -> None:
        self._db = db
        self.name = name
        self.time = time or ServiceTime()
        self.instance = instance or _instance()
        self.epoch = 0
        """The epoch of the last acquisition (0 before the first)."""
        self.previous_alive_at_ms: int | None = None
        """The previous owner's last known-alive instant, as found by the last acquisition."""
        self.lost_because = ""
        """Why the lock was lost (empty while held, or before the first acquisition)."""
        self._held = False
        self._connection: AsyncConnection | None = None
        self._file: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lost_event: asyncio.Event | None = None

    @property
    def held(self) -> bool:
        """Whether this process holds the shard, as far as it knows (the fence decides for writes)."""
        return self._held

    def holds(self, epoch: int) -> bool:
        """Whether the shard is held, still under ``epoch``."""
        return self._held and self.epoch == epoch

    def fence(self) -> Fence:
        """The guard of the current epoch, for the stores built under it."""
        if not self._held:
            raise ShardFenced(lost_reason(self.name))
        return Fence(self, self.epoch)

    async def acquire(self) -> None:
        """Take the lock, then a new epoch; :class:`ShardTaken` when another process holds the lock."""
        self._loop = asyncio.get_running_loop()
        self._lost_event = self._lost_event or asyncio.Event()
        if self._db.is_sqlite:
            database = make_url(self._db.url).database
            if database and database != ":memory:":
                self._file = _lock_file(Path(f"{database}.{self.name.replace('/', '-')}.lock"), self.name)
            try:
                async with self._db.begin() as conn:
                    await conn.run_sync(self._claim)
            except BaseException:
                self._unlock_file()
                raise
        else:
            connection = await self._db.engine.connect()
            try:
                taken = await connection.scalar(
                    text("SELECT pg_try_advisory_lock(:id)"), {"id": _lock_id(self.name)}
                )
                if not taken:
                    raise ShardTaken(f"another process owns {self.name} (PostgreSQL advisory lock)")
                await connection.commit()
                await connection.run_sync(self._claim)
                await connection.commit()
            except BaseException:
                await _discard(connection)  # closing it ends the session: the lock goes with it
                raise
            self._connection = connection
        self._held = True
        self.lost_because = ""
        self._lost_event.clear()
        _log.info(
            "shard.acquired",
            shard=self.name,
            epoch=self.epoch,
            previous_alive_at_ms=self.previous_alive_at_ms,
            instance=self.instance,
        )

    def _claim(self, conn: Connection) -> None:
        """Under the lock, in one transaction: the shard's next epoch, with this process as its owner."""
        now = self.time.now_ms()
        row = conn.execute(
            select(shard_owners.c.epoch, shard_owners.c.alive_at_ms)
            .where(shard_owners.c.shard == self.name)
            .with_for_update()
        ).first()
        values = {"owner": self.instance, "acquired_at_ms": now, "alive_at_ms": now}
        if row is None:
            conn.execute(insert(shard_owners).values(shard=self.name, epoch=1, **values))
            self.epoch, self.previous_alive_at_ms = 1, None
            return
        bumped = conn.execute(
            update(shard_owners)
            .where(shard_owners.c.shard == self.name, shard_owners.c.epoch == row.epoch)
            .values(epoch=row.epoch + 1, **values)
        )
        if bumped.rowcount != 1:  # only if something took the shard without its lock
            raise ShardTaken(f"another process claimed {self.name} meanwhile")
        self.epoch, self.previous_alive_at_ms = int(row.epoch) + 1, int(row.alive_at_ms)

    async def renew(self) -> None:
        """The heartbeat: record that the owner is alive, on the condition that the epoch is still its
        own; on PostgreSQL on the lock's own connection, so that a session the database ended (and with
        it the lock) fails the renewal. A lost lock is marked lost (:meth:`lose`), never raised."""
        if not self._held:
            return
        epoch = self.epoch
        params = {"s": self.name, "e": epoch, "now": self.time.now_ms()}
        try:
            async with asyncio.timeout(DATABASE_TIMEOUT_SECONDS):
                if self._connection is not None:
                    renewed = (await self._connection.execute(_RENEW, params)).rowcount
                    await self._connection.commit()
                else:
                    async with self._db.begin() as conn:
                        renewed = (await conn.execute(_RENEW, params)).rowcount
        except Exception as error:
            if self._connection is None:
                # SQLite: the flock cannot be lost with a connection; only another epoch means a loss.
                _log.warning(
                    "shard.heartbeat_failed", shard=self.name, error=str(error) or type(error).__name__
                )
                return
            self.lose(f"the lock's database session failed ({str(error) or type(error).__name__})")
            return
        if renewed != 1 and self.holds(epoch):
            self.lose(f"epoch {epoch} was superseded: another process took the shard")

    def lose(self, reason: str) -> None:
        """Mark the shard lost: every fence refuses writes from now on. Safe from any thread."""
        if not self._held:
            return
        self._held = False
        self.lost_because = reason
        loop, event = self._loop, self._lost_event
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
                loop.call_soon_threadsafe(event.set)

    async def wait_lost(self, within_s: float | None = None) -> bool:
        """Wait until the lock is lost (at most ``within_s`` seconds); whether it was."""
        if not self._held:
            return True
        assert self._lost_event is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within_s):
                await self._lost_event.wait()
        return not self._held

    async def release(self) -> None:
        """Let the shard go: record when the owner was last alive (if it still holds the epoch) and unlock.

        Never fails: after a database restart the lock's session is gone already (and with it the lock),
        so there is nothing left to unlock; a shutdown then still ends cleanly.
        """
        held, self._held = self._held, False
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                async with asyncio.timeout(DATABASE_TIMEOUT_SECONDS):
                    if held:
                        params = {"s": self.name, "e": self.epoch, "now": self.time.now_ms()}
                        await connection.execute(_RENEW, params)
                        await connection.commit()
                    # Unlock explicitly: closing only returns the connection (and its session) to the pool.
                    await connection.execute(
                        text("SELECT pg_advisory_unlock(:id)"), {"id": _lock_id(self.name)}
                    )
                    await connection.commit()
                    await connection.close()
            except Exception as error:
                _log.info(
                    "shard.release_without_session", shard=self.name, error=str(error) or type(error).__name__
                )
                await _discard(connection)
        elif held and self._file is not None:
            try:
                async with asyncio.timeout(DATABASE_TIMEOUT_SECONDS), self._db.begin() as conn:
                    params = {"s": self.name, "e": self.epoch, "now": self.time.now_ms()}
                    await conn.execute(_RENEW, params)
            except Exception as error:
                _log.warning(
                    "shard.release_failed", shard=self.name, error=str(error) or type(error).__name__
                )
        self._unlock_file()

    def _unlock_file(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None


async def _discard(connection: AsyncConnection) -> None:
    """Close ``connection`` for good (never back to the pool), whatever state it is in."""
    with contextlib.suppress(Exception):
        await connection.invalidate()
    with contextlib.suppress(Exception):
        await connection.close()


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


Lost = Callable[[str], Awaitable[None]]
Regained = Callable[[], Awaitable[None]]


class ShardKeeper:
    """Keeps a held shard: renews it every heartbeat, and when it is lost stops the service's use of it
    (``on_lost``, with the reason), then takes it again and lets the service rebuild its state from the
    database (``on_regained``) before it serves again.

    Losing the shard is noticed within a heartbeat (the lock's session failed, or the epoch moved on),
    or at once when a commit's fence finds a newer epoch. The service is never rebuilt in place: another
    process may have written the shard meanwhile, so everything in memory is dropped and read again.
    When ``on_regained`` fails, the shard is let go and taken again later.
    """

    def __init__(
        self,
        lock: ShardLock,
        on_lost: Lost,
        on_regained: Regained,
        *,
        heartbeat_s: float = HEARTBEAT_SECONDS,
        retry_s: float = RETRY_SECONDS,
    ) -> None:
        self._lock = lock
        self._on_lost = on_lost
        self._on_regained = on_regained
        self._heartbeat_s = heartbeat_s
        self._retry_s = retry_s
        self._task: asyncio.Task[None] | None = None
        self._changing = False
        self._stopping = False
        self.losses = 0
        """How often the shard was lost (for tests and logs)."""

    def start(self) -> None:
        """Begin the heartbeat (the lock is held)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._keep(), name=f"keep {self._lock.name}")

    async def stop(self) -> None:
        """Stop keeping the shard (shutdown). A loss or a rebuild in progress finishes first, so the
        service's state is never left half closed or half rebuilt."""
        self._stopping = True
        task, self._task = self._task, None
        if task is None:
            return
        if not self._changing:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _keep(self) -> None:
        lock = self._lock
        while not self._stopping:
            while lock.held:
                if await lock.wait_lost(self._heartbeat_s):
                    break
                await lock.renew()
            self.losses += 1
            _log.warning("shard.lost", shard=lock.name, epoch=lock.epoch, reason=lock.lost_because)
            await self._change(self._lost, lock.lost_because)
            await self._take_again()

    async def _change(self, step: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Run a change of the service's state to its end, even if :meth:`stop` comes meanwhile."""
        self._changing = True
        try:
            return await step(*args)
        finally:
            self._changing = False

    async def _lost(self, reason: str) -> None:
        try:
            await self._on_lost(reason)
        except Exception as error:
            _log.error("shard.stop_failed", shard=self._lock.name, error=str(error), exc_info=error)
        await self._lock.release()  # what is left of the lock: its session, or the flock

    async def _take_again(self) -> None:
        lock = self._lock
        while not self._stopping:  # (stop() may have come during on_lost)
            await asyncio.sleep(self._retry_s)
            try:
                async with asyncio.timeout(DATABASE_TIMEOUT_SECONDS * 2):
                    await lock.acquire()
            except ShardTaken as error:
                _log.info("shard.still_taken", shard=lock.name, reason=str(error))
                continue
            except Exception as error:
                _log.info("shard.acquire_failed", shard=lock.name, error=str(error) or type(error).__name__)
                continue
            if await self._change(self._regained):
                return

    async def _regained(self) -> bool:
        lock = self._lock
        try:
            await self._on_regained()
        except Exception as error:
            _log.error("shard.rebuild_failed", shard=lock.name, error=str(error), exc_info=error)
            with contextlib.suppress(Exception):
                await self._on_lost(f"rebuilding after taking the shard again failed: {error}")
            await lock.release()
            return False
        _log.warning("shard.regained", shard=lock.name, epoch=lock.epoch)
        return True
