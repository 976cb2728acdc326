"""The matchmaking service as the runtime starts it.

Configuration on top of the runtime's: ``RULES_<FAMILY>_ADDRESSES`` (each family's rules shards, in shard
order), ``FAIRNESS_ADDRESS`` (for families that use chance), and, outside production only,
``MATCH_FIRST_MOVE_TIMEOUT_MS`` and ``MATCH_DISCONNECT_FORFEIT_MS`` (shorter windows for the matches it
creates, for tests and demos; the published rules are 60 s each, so production refuses them), and
``MATCH_CLIENT_SEED_WINDOW_MS`` (default 5000, at most 60000): how long the first draw of a match of a
family that uses chance waits for both players' client seeds.

On PostgreSQL matchmaking runs as any number of replicas (docs/matchmaking.md, "Replicas"): one pairs the
queue while it holds the pairing lease (``MATCHMAKING_LEASE_MS``, default 3000), every one serves the
lobby, and lobby events go to every replica through ``LISTEN``/``NOTIFY``. On SQLite it is one process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2, matchmaking_pb2_grpc

from libs.match.model import MAX_CLIENT_SEED_WINDOW_MS
from libs.persistence import Database
from libs.persistence.migrate import migrate
from libs.runtime import ConfigError, Service, ServiceConfig
from libs.runtime.config import env_int
from libs.runtime.timesource import ServiceTime
from services.matchmaking.families import FAMILIES
from services.matchmaking.lobby import LobbyHub
from services.matchmaking.matchmaker import DEFAULT_CLIENT_SEED_WINDOW_MS, Matchmaker
from services.matchmaking.replicas import DEFAULT_LEASE_MS, LobbyBus, ReplicaSettings
from services.matchmaking.servicer import MatchmakingServicer
from services.matchmaking.shards import RulesShards
from services.matchmaking.store import MatchmakingStore


class MatchmakingService(Service):
    """``skillclassics.matchmaking.v1.MatchmakingService``."""

    name = "matchmaking"

    def __init__(self, config: ServiceConfig, env: Mapping[str, str] | None = None) -> None:
        self._config = config
        self._env = os.environ if env is None else env
        self._db: Database | None = None
        self._store: MatchmakingStore | None = None
        self._windows = {
            name: env_int(self._env, variable, 0, minimum=0)
            for name, variable in (
                ("first_move_timeout_ms", "MATCH_FIRST_MOVE_TIMEOUT_MS"),
                ("disconnect_forfeit_ms", "MATCH_DISCONNECT_FORFEIT_MS"),
            )
        }
        if config.is_production and any(self._windows.values()):
            raise ConfigError(
                "MATCH_FIRST_MOVE_TIMEOUT_MS and MATCH_DISCONNECT_FORFEIT_MS are for tests: "
                "production plays the published 60 s windows"
            )
        seed_window = env_int(self._env, "MATCH_CLIENT_SEED_WINDOW_MS", DEFAULT_CLIENT_SEED_WINDOW_MS)
        self._seed_window_ms = min(seed_window, MAX_CLIENT_SEED_WINDOW_MS)  # (may be tuned in production)
        self._lease_ms = env_int(self._env, "MATCHMAKING_LEASE_MS", DEFAULT_LEASE_MS, minimum=300)
        self.matchmaker: Matchmaker | None = None
        self.bus: LobbyBus | None = None
        """The lobby events of the other replicas (PostgreSQL only)."""

    @property
    def service_names(self) -> Sequence[str]:
        return [matchmaking_pb2.DESCRIPTOR.services_by_name["MatchmakingService"].full_name]

    async def start(self, server: grpc.aio.Server) -> None:
        if self._config.migrate_on_start:
            await migrate(self._config.database_url)
        self._db = Database(self._config.database_url)
        self._store = MatchmakingStore(self._db)
        shards = RulesShards(self._env, list(FAMILIES), self._config.tls)
        fairness = self._env.get("FAIRNESS_ADDRESS", "").strip()
        replicas = None if self._db.is_sqlite else ReplicaSettings(self._lease_ms)
        hub = LobbyHub()
        time = ServiceTime()
        self.matchmaker = Matchmaker(
            self._store,
            shards,
            hub,
            time,
            fairness,
            **self._windows,
            client_seed_window_ms=self._seed_window_ms,
            replicas=replicas,
        )
        if replicas is not None:
            self.bus = LobbyBus(
                self._config.database_url,
                replicas.holder,
                hub.deliver,
                hub.players,
                self.matchmaker.catch_up,
                time.now_ms,
            )
            await self.bus.start()  # listening before any event of this replica is published
            hub.publish = self.bus.publish
        await self.matchmaker.start()
        matchmaking_pb2_grpc.add_MatchmakingServiceServicer_to_server(
            MatchmakingServicer(self.matchmaker), server
        )

    async def drain(self, grace_s: float | None = None) -> None:
        if self.matchmaker is not None:
            self.matchmaker.hub.close()

    async def close(self) -> None:
        # The server takes no more calls by now; the pairing and retry loops stop next. Then the writes
        # queued (of calls that finished or were cancelled by the stop) are committed before the database
        # goes; a write after that is refused with UNAVAILABLE.
        if self.matchmaker is not None:
            await self.matchmaker.close()
        if self.bus is not None:
            await self.bus.close()
        if self._store is not None:
            await self._store.close()
        if self._db is not None:
            await self._db.dispose()
