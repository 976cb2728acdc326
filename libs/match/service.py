"""A rules service as the runtime starts it: database, migrations, recovery, wake-ups, servicer.

Every family's service is this class with its :class:`~libs.match.family.Family`. Configuration, on top
of the runtime's: ``RULES_SHARD`` (default 0), the shard this process serves (match ids name it), and
``CLOCK_ADDRESS`` (host:port of the clock service for this shard; unset: wake-ups from the local event
loop, which is fine for a single process because the log re-arms everything after a restart), and
``FAIRNESS_ADDRESS`` (the fairness service: the source of every draw of families that use chance,
required for them, and told when a match with a commitment ends) and
``MATCHMAKING_ADDRESS`` (told every result); unset: nobody is told.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.match.chance import ChanceSource, FairnessChance
from libs.match.deadlines import ClockServiceDeadlines, Deadlines, LocalDeadlines
from libs.match.family import Family
from libs.match.reporting import FairnessRecipient, MatchmakingRecipient, Recipient, ResultReporter
from libs.match.runtime import MatchRuntime
from libs.match.servicer import RulesServicer
from libs.match.store import MatchStore
from libs.persistence import Database
from libs.persistence.migrate import migrate
from libs.persistence.ownership import ShardLock
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
        self._clock_address = environ.get("CLOCK_ADDRESS", "").strip()
        self._fairness_address = environ.get("FAIRNESS_ADDRESS", "").strip()
        self._matchmaking_address = environ.get("MATCHMAKING_ADDRESS", "").strip()
        if family.uses_chance and not self._fairness_address:
            raise ConfigError(f"FAIRNESS_ADDRESS must be set: {family.name} draws from the fairness service")
        self._db: Database | None = None
        self.runtime: MatchRuntime | None = None
        self._lock: ShardLock | None = None

    @property
    def service_names(self) -> Sequence[str]:
        return [rules_pb2.DESCRIPTOR.services_by_name["RulesService"].full_name]

    async def start(self, server: grpc.aio.Server) -> None:
        if self._config.migrate_on_start:
            await migrate(self._config.database_url)
        self._db = Database(self._config.database_url)
        self._lock = ShardLock(self._db, f"rules-{self.family.name}/{self.shard}")
        await self._lock.acquire()
        time = ServiceTime()
        deadlines: Deadlines
        if self._clock_address:
            owner = f"rules-{self.family.name}-{self.shard}"
            deadlines = ClockServiceDeadlines(self._clock_address, owner, time, self._config.tls)
        else:
            deadlines = LocalDeadlines(time)
        store = MatchStore(self._db, self.family.name, str(self.shard))
        recipients: list[Recipient] = []
        if self._fairness_address:
            recipients.append(FairnessRecipient(self._fairness_address, self._config.tls))
        if self._matchmaking_address:
            recipients.append(MatchmakingRecipient(self._matchmaking_address, self._config.tls))
        reporter = ResultReporter(store, recipients, time)
        chance: ChanceSource | None = None
        if self.family.uses_chance:
            chance = FairnessChance(self._fairness_address, self._config.tls)
        self.runtime = MatchRuntime(self.family, self.shard, store, deadlines, time, reporter, chance)
        await self.runtime.start()
        rules_pb2_grpc.add_RulesServiceServicer_to_server(RulesServicer(self.runtime), server)

    async def drain(self) -> None:
        if self.runtime is not None:
            for actor in self.runtime.live():
                actor.close()  # watch streams end with UNAVAILABLE; watchers reconnect

    async def close(self) -> None:
        if self.runtime is not None:
            await self.runtime.close()
        if self._lock is not None:
            await self._lock.release()
        if self._db is not None:
            await self._db.dispose()
