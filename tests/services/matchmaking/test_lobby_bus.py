"""The lobby bus between matchmaking replicas (services/matchmaking/replicas.py) when a replica cannot
publish: its events are given up after its retries, and once the database answers again it publishes a
resync, for which every other replica catches its connected players up from the database
(docs/matchmaking.md, "Replicas"). PostgreSQL only: LISTEN/NOTIFY."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from libs.runtime.timesource import ServiceTime
from services.matchmaking import replicas
from services.matchmaking.replicas import CATCH_UP_MARGIN_MS, LobbyBus
from tests.conftest import RecycledDatabases, _database_url

pytestmark = pytest.mark.postgres


@pytest.fixture
async def pg_url(recycled_postgres_databases: RecycledDatabases) -> AsyncIterator[str]:
    name = await recycled_postgres_databases.take()
    try:
        yield _database_url(name)
    finally:
        await recycled_postgres_databases.give_back(name)


class Replica:
    """A bus and what it handed to its streams."""

    def __init__(self, url: str, origin: str, players: list[str]) -> None:
        self.delivered: list[tuple[str, pb.WatchLobbyResponse]] = []
        self.caught_up: list[tuple[list[str], int]] = []
        self.players = players
        self.bus = LobbyBus(
            url,
            origin,
            lambda player, event: self.delivered.append((player, event)),
            lambda: self.players,
            self._catch_up,
            ServiceTime().now_ms,
        )

    async def _catch_up(self, players: Iterable[str], since_ms: int) -> None:
        self.caught_up.append((list(players), since_ms))


def event(table_id: str) -> pb.WatchLobbyResponse:
    return pb.WatchLobbyResponse(table_updated=pb.Table(table_id=table_id, status=pb.TABLE_STATUS_OPEN))


async def until(condition: Any, within: float = 10.0) -> None:
    for _ in range(int(within / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not within {within} s")


async def test_events_a_replica_could_not_publish_are_caught_up_by_the_others_once_it_can(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replicas, "PUBLISH_ATTEMPTS", 2)
    broken = asyncio.Event()
    connect = replicas.connect

    async def flaky_connect(url: str, application_name: str) -> Any:
        if broken.is_set() and application_name == "matchmaking-lobby-publish":
            raise OSError("the database is unreachable (test)")
        return await connect(url, application_name)

    monkeypatch.setattr(replicas, "connect", flaky_connect)
    publisher, listener = Replica(pg_url, "A", []), Replica(pg_url, "B", ["p1", "p2"])
    await publisher.bus.start()
    await listener.bus.start()
    try:
        publisher.bus.publish("p1", event("t-before"))
        await until(lambda: [p for p, _ in listener.delivered] == ["p1"])

        # The publisher's session is cut and no new one can be made: its event is given up.
        broken.set()
        engine = create_async_engine(pg_url, poolclass=NullPool)
        try:
            async with engine.begin() as conn:
                await conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = "
                        "'matchmaking-lobby-publish' AND datname = current_database()"
                    )
                )
        finally:
            await engine.dispose()
        lost_at_ms = ServiceTime().now_ms()
        publisher.bus.publish("p2", event("t-lost"))
        await until(lambda: publisher.bus.dropped == 1)
        assert len(listener.delivered) == 1
        assert not listener.caught_up

        # The database answers again: the resync comes without waiting for another event, and the other
        # replica catches up every player with a stream there, from before the lost event.
        broken.clear()
        await until(lambda: listener.bus.resyncs == 1)
        await until(lambda: len(listener.caught_up) == 1)
        [(players, since_ms)] = listener.caught_up
        assert players == ["p1", "p2"]
        assert lost_at_ms - CATCH_UP_MARGIN_MS - 5_000 <= since_ms <= lost_at_ms
        assert publisher.bus.resyncs == 0  # its own resync is not for it
        assert not publisher.caught_up

        # And events flow again, once each.
        publisher.bus.publish("p1", event("t-after"))
        await until(lambda: len(listener.delivered) == 2)
        assert [e.table_updated.table_id for _, e in listener.delivered] == ["t-before", "t-after"]
        assert listener.bus.resyncs == 1
    finally:
        await publisher.bus.close()
        await listener.bus.close()
