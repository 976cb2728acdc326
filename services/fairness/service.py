"""The fairness service as the runtime starts it: database, migrations, seed vault and servicer."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import grpc
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc

from libs.persistence import Database
from libs.persistence.migrate import migrate
from libs.runtime import Service, ServiceConfig
from services.fairness.seed_vault import SeedVault
from services.fairness.servicer import FairnessServicer
from services.fairness.store import FairnessStore


class FairnessService(Service):
    """``skillclassics.fairness.v1.FairnessService`` backed by the database at ``DATABASE_URL``."""

    name = "fairness"

    def __init__(self, config: ServiceConfig, env: Mapping[str, str] | None = None) -> None:
        self._config = config
        self._env = os.environ if env is None else env
        self._db: Database | None = None
        self._store: FairnessStore | None = None

    @property
    def store(self) -> FairnessStore | None:
        """The store once started (tests read its committer's counts and close it)."""
        return self._store

    @property
    def service_names(self) -> Sequence[str]:
        return [fairness_pb2.DESCRIPTOR.services_by_name["FairnessService"].full_name]

    async def start(self, server: grpc.aio.Server) -> None:
        vault = SeedVault.from_env(self._env, self._config.data_dir, production=self._config.is_production)
        if self._config.migrate_on_start:
            await migrate(self._config.database_url)
        self._db = Database(self._config.database_url)
        self._store = FairnessStore(self._db, vault)
        servicer = FairnessServicer(self._store)
        fairness_pb2_grpc.add_FairnessServiceServicer_to_server(servicer, server)

    async def close(self) -> None:
        if self._store is not None:  # what is queued is committed; later calls are UNAVAILABLE
            await self._store.close()
        if self._db is not None:
            await self._db.dispose()
