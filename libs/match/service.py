"""A rules service as the runtime starts it: database, migrations, recovery, wake-ups, servicer.

Every family's service is this class with its :class:`~libs.match.family.Family`. Configuration, on top
of the runtime's: ``RULES_SHARD`` (default 0), the shard this process serves (match ids name it), and
``CLOCK_ADDRESS`` (host:port of the clock service for this shard; unset: wake-ups from the local event
loop, which is fine for a single process because the log re-arms everything after a restart), and
``FAIRNESS_ADDRESS`` (the fairness service: the source of every draw of families that use chance,
required for them, and told when a match with a commitment ends) and
``MATCHMAKING_ADDRESS`` (told every result); unset: nobody is told. ``RULES_PRESENCE_LEASE_MS`` (default
6000, 1000-60000): the presence lease of a gateway renewal that names none, and the fresh lease every
seat connected in the log gets when the shard recovers (libs/match/presence.py).

The process owns its shard (:mod:`libs.persistence.ownership`): it takes the shard's lock and a new epoch
before reading anything, and every write of the match log is conditional on that epoch. It renews the
ownership every ``SHARD_HEARTBEAT_MS`` (default 250). When it loses the shard (a database restart ended
the lock's session, or another process took a newer epoch) it reports NOT_SERVING and closes its
runtime (writes are refused at once, watch streams end), tries to take the shard again every
``SHARD_RETRY_MS`` (default 1000), and once it holds it rebuilds every match from the log (another
process may have written meanwhile) before it reports SERVING again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.match.chance import ChanceSource, FairnessChance
from libs.match.deadlines import ClockServiceDeadlines, Deadlines, LocalDeadlines
from libs.match.family import Family, may_draw_chance
from libs.match.presence import lease_ms_from_env
from libs.match.reporting import FairnessRecipient, MatchmakingRecipient, Recipient, ResultReporter
from libs.match.runtime import MatchRuntime
from libs.match.servicer import RulesServicer
from libs.match.store import MatchStore
from libs.persistence import Database
from libs.persistence.migrate import migrate
from libs.persistence.ownership import ShardKeeper, ShardLock, keeper_timing
from libs.runtime import ConfigError, Service, ServiceConfig
from libs.runtime.config import env_int
from libs.runtime.timesource import ServiceTime


class RulesService(Service):
    """``skillclassics.rules.v1.RulesService`` for one family and shard."""

    name = "rules"

    def __init__(self, family: Family, config: ServiceConfig, env: Mapping[str, str] | None = None) -> None:
        environ = os.environ if env is None else env
        self.family = family
        self.name = f"rules-{family.name}"  # type: ignore[misc]
        self._config = config
        if "RULES_SHARD" in environ and not environ["RULES_SHARD"].strip():
            # Set but empty (a Kubernetes without the pod-index label): never fall back to shard 0, which
            # another pod already serves.
            raise ConfigError("RULES_SHARD is set but empty: give the shard number (the pod's ordinal)")
        self.shard = env_int(environ, "RULES_SHARD", 0)
        self._heartbeat_s, self._retry_s = keeper_timing(environ)
        self._clock_address = environ.get("CLOCK_ADDRESS", "").strip()
        self._fairness_address = environ.get("FAIRNESS_ADDRESS", "").strip()
        self._matchmaking_address = environ.get("MATCHMAKING_ADDRESS", "").strip()
        self._lease_ms = lease_ms_from_env(environ)
        if family.uses_chance and not self._fairness_address:
            raise ConfigError(f"FAIRNESS_ADDRESS must be set: {family.name} draws from the fairness service")
        self._db: Database | None = None
        self.runtime: MatchRuntime | None = None
        self._lock: ShardLock | None = None
        self._keeper: ShardKeeper | None = None
        self._servicer: RulesServicer | None = None
        self._open: MatchRuntime | None = None
        """The runtime serving now, until it is closed (shutdown, or the shard lost)."""
        self._time = ServiceTime()

    @property
    def service_names(self) -> Sequence[str]:
        return [rules_pb2.DESCRIPTOR.services_by_name["RulesService"].full_name]

    async def start(self, server: grpc.aio.Server) -> None:
        if self._config.migrate_on_start:
            await migrate(self._config.database_url)
        self._db = Database(self._config.database_url)
        self._lock = ShardLock(self._db, f"rules-{self.family.name}/{self.shard}", time=self._time)
        await self._lock.acquire()
        self.runtime = self._open = self._new_runtime()
        await self.runtime.start()
        self._servicer = RulesServicer(self.runtime)
        rules_pb2_grpc.add_RulesServiceServicer_to_server(self._servicer, server)
        self._keeper = ShardKeeper(
            self._lock,
            self._shard_lost,
            self._shard_regained,
            heartbeat_s=self._heartbeat_s,
            retry_s=self._retry_s,
        )
        self._keeper.start()

    def _new_runtime(self) -> MatchRuntime:
        """A runtime for the shard's current epoch: its store fenced by that epoch, and deadlines, result
        reporter and chance of its own (a runtime is closed whole when the shard is lost)."""
        assert self._db is not None
        assert self._lock is not None
        time = self._time
        deadlines: Deadlines
        if self._clock_address:
            owner = f"rules-{self.family.name}-{self.shard}"
            deadlines = ClockServiceDeadlines(self._clock_address, owner, time, self._config.tls)
        else:
            deadlines = LocalDeadlines(time)
        store = MatchStore(self._db, self.family.name, str(self.shard), fence=self._lock.fence())
        recipients: list[Recipient] = []
        if self._fairness_address:
            recipients.append(FairnessRecipient(self._fairness_address, self._config.tls))
        if self._matchmaking_address:
            recipients.append(MatchmakingRecipient(self._matchmaking_address, self._config.tls))
        reporter = ResultReporter(store, recipients, time)
        chance: ChanceSource | None = None
        if self.family.uses_chance or (may_draw_chance(self.family) and self._fairness_address):
            chance = FairnessChance(self._fairness_address, self._config.tls)
        return MatchRuntime(
            self.family,
            self.shard,
            store,
            deadlines,
            time,
            reporter,
            chance,
            # The previous owner's last heartbeat: the shard was down from then until now, charged to
            # nobody (docs/match-runtime.md). Unknown: the latest logged instant of the shard stands in.
            down_since_ms=self._lock.previous_alive_at_ms,
            credit_downtime=True,
            lease_ms=self._lease_ms,
        )

    async def _shard_lost(self, reason: str) -> None:
        """The shard is no longer this process's: stop serving it (its writes are refused already)."""
        await self.set_serving(False)
        runtime, self._open = self._open, None
        if runtime is not None:
            await runtime.close()  # watch streams end with UNAVAILABLE; watchers reconnect

    async def _shard_regained(self) -> None:
        """The shard is this process's again, under a new epoch: every match is read again from the log
        (another process may have written it meanwhile), then the servicer serves the new runtime."""
        assert self._servicer is not None
        runtime = self._open = self._new_runtime()
        await runtime.start()
        self.runtime = runtime
        self._servicer.serve(runtime)
        await self.set_serving(True)

    async def drain(self, grace_s: float | None = None) -> None:
        if self._servicer is not None:
            self._servicer.drain()  # Exchange streams end at once: the gateway moves its players' streams
        if self.runtime is not None:
            for actor in self.runtime.live():
                actor.close()  # watch streams end with UNAVAILABLE; watchers reconnect

    async def close(self) -> None:
        if self._keeper is not None:
            await self._keeper.stop()
        runtime, self._open = self._open, None
        if runtime is not None:
            await runtime.close()
        if self._lock is not None:
            await self._lock.release()
        if self._db is not None:
            await self._db.dispose()
