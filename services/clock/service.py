"""The clock service as the runtime starts it: database, migrations, the timers reloaded, the servicer.

``CLOCK_SHARD`` (default ``0``) names the set of timers this process owns: a clock process per shard,
each reloading only its own timers after a restart.

The process owns its shard (:mod:`libs.persistence.ownership`, ``clock/<shard>``): a lock and a new epoch
before the timers are read, and every write of a timer conditional on that epoch. Ownership is renewed
every ``SHARD_HEARTBEAT_MS`` (default 250); a process that loses its shard reports NOT_SERVING, drops its
timers from memory (watch streams end; writes are refused), takes the shard again (every
``SHARD_RETRY_MS``, default 1000) and reads every timer again before it reports SERVING.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

import grpc
from skillclassics.clock.v1 import clock_pb2, clock_pb2_grpc

from libs.persistence import Database
from libs.persistence.migrate import migrate
from libs.persistence.ownership import ShardKeeper, ShardLock, keeper_timing
from libs.runtime import ConfigError, Service, ServiceConfig
from libs.runtime.log import get_logger
from services.clock.scheduler import Scheduler
from services.clock.servicer import ClockServicer
from services.clock.store import TimerStore

_log = get_logger(__name__)


class ClockService(Service):
    """``skillclassics.clock.v1.ClockService`` backed by the database at ``DATABASE_URL``."""

    name = "clock"

    def __init__(self, config: ServiceConfig, env: Mapping[str, str] | None = None) -> None:
        self._config = config
        environ = os.environ if env is None else env
        self.shard = environ.get("CLOCK_SHARD", "0")
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", self.shard):
            raise ConfigError(f"CLOCK_SHARD must be 1-64 characters of A-Z a-z 0-9 . _ -, got {self.shard!r}")
        self._heartbeat_s, self._retry_s = keeper_timing(environ)
        self._db: Database | None = None
        self.store: TimerStore | None = None
        self._lock: ShardLock | None = None
        self._keeper: ShardKeeper | None = None
        self.scheduler: Scheduler | None = None
        self.servicer: ClockServicer | None = None

    @property
    def service_names(self) -> Sequence[str]:
        return [clock_pb2.DESCRIPTOR.services_by_name["ClockService"].full_name]

    async def start(self, server: grpc.aio.Server) -> None:
        if self._config.migrate_on_start:
            await migrate(self._config.database_url)
        self._db = Database(self._config.database_url)
        self._lock = ShardLock(self._db, f"clock/{self.shard}")
        await self._lock.acquire()
        self.store, self.scheduler = await self._load()
        self.servicer = ClockServicer(self.store, self.scheduler)
        clock_pb2_grpc.add_ClockServiceServicer_to_server(self.servicer, server)
        self._keeper = ShardKeeper(
            self._lock,
            self._shard_lost,
            self._shard_regained,
            heartbeat_s=self._heartbeat_s,
            retry_s=self._retry_s,
        )
        self._keeper.start()

    async def _load(self) -> tuple[TimerStore, Scheduler]:
        """A store fenced by the shard's current epoch, and a scheduler with every timer it holds."""
        assert self._db is not None
        assert self._lock is not None
        store = TimerStore(self._db, self.shard, fence=self._lock.fence())
        scheduler = Scheduler()
        timers = await store.load()
        scheduler.load(timers)
        _log.info("clock.timers_loaded", shard=self.shard, timers=len(timers), epoch=self._lock.epoch)
        return store, scheduler

    async def _shard_lost(self, reason: str) -> None:
        """The shard is no longer this process's: stop serving it (its writes are refused already)."""
        await self.set_serving(False)
        if self.scheduler is not None:
            self.scheduler.close()  # watch streams end with UNAVAILABLE; watchers reconnect
        if self.servicer is not None:
            await self.servicer.settled()
        store, self.store = self.store, None
        if store is not None:
            await store.close()

    async def _shard_regained(self) -> None:
        """The shard is this process's again, under a new epoch: its timers are read again (another
        process may have changed them meanwhile) before the servicer serves them."""
        assert self.servicer is not None
        store, scheduler = await self._load()
        self.store, self.scheduler = store, scheduler
        self.servicer.serve(store, scheduler)
        await self.set_serving(True)

    async def drain(self, grace_s: float | None = None) -> None:
        if self.scheduler is not None:
            self.scheduler.close()  # watch streams end with UNAVAILABLE; watchers reconnect elsewhere

    async def close(self) -> None:
        if self._keeper is not None:
            await self._keeper.stop()
        if self.servicer is not None:
            await self.servicer.settled()  # the changes of calls cancelled by the stop, before the writer
        if self.store is not None:
            await self.store.close()
        if self._lock is not None:
            await self._lock.release()
        if self._db is not None:
            await self._db.dispose()
