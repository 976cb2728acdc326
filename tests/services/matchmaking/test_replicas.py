"""Matchmaking as several replicas on one PostgreSQL database (docs/matchmaking.md, "Replicas").

Two matchmaking processes (so one can be killed with SIGKILL or paused with SIGSTOP) share a database
and a chess rules shard (run in this process). One pairs the queue while it holds the pairing lease;
both serve the lobby; every table event and ``MatchReady`` reaches the player's streams on either
replica. Killed while players wait, the leader is replaced within the lease and two seconds, and
nobody is paired twice; a leader paused past its lease and replaced makes no match once it resumes
(the fence: every pairing write checks the lease's epoch). PostgreSQL only: on SQLite matchmaking is one
process.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.matchmaking.v1 import matchmaking_pb2_grpc
from skillclassics.rules.v1 import rules_pb2
from sqlalchemy import Select, func, select, text

from libs.persistence import Database
from libs.persistence.migrate import migrate
from libs.persistence.schema import matches, mm_leases, mm_matches, mm_queue
from libs.runtime import RunningServer
from libs.runtime.timesource import ServiceTime
from services.matchmaking.lobby import LobbyHub
from services.matchmaking.matchmaker import PAIRING_LEASE, Matchmaker
from services.matchmaking.replicas import ReplicaSettings
from services.matchmaking.store import Lease, LeaseLost, MatchmakingStore
from services.rules_chess.service import chess_rules_service
from tests.conftest import RecycledDatabases, _database_url
from tests.services.matchmaking.test_matchmaker import RecordingShards
from tests.services.matchmaking.test_matchmaking_service import MINUTE, table_request
from tests.support import (
    ROOT,
    ServiceProcess,
    backend_channel,
    free_port,
    start_in_process,
    wait_until_serving,
)

pytestmark = [pytest.mark.postgres, pytest.mark.long]

LEASE_MS = 2_000
BOUND_S = LEASE_MS / 1000 + 2
"""How soon after the leader dies pairing must have resumed on the other replica."""


@pytest.fixture
async def pg_url(recycled_postgres_databases: RecycledDatabases) -> AsyncIterator[str]:
    name = await recycled_postgres_databases.take()
    url = _database_url(name)
    await migrate(url)  # once, before both replicas start (they do not migrate)
    try:
        yield url
    finally:
        await recycled_postgres_databases.give_back(name)


def queue_request(player: str, pool: int) -> pb.EnterQueueRequest:
    """A quick-match request in pool ``pool`` (each its own fee): only players of one pool are paired."""
    return pb.EnterQueueRequest(
        player_id=player,
        family="chess",
        time_control=rules_pb2.TimeControl(base_ms=5 * MINUTE),
        entry_fee_minor=100 + pool,
        currency="USD",
    )


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 10.0) -> None:
    """Wait until ``check()`` holds (TimeoutError after ``within`` s)."""
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110 - the database has no event to wait on
            await asyncio.sleep(0.05)


@dataclass
class Replica:
    service: ServiceProcess
    log: Path
    channel: grpc.aio.Channel | None = None

    @property
    def mm(self) -> matchmaking_pb2_grpc.MatchmakingServiceStub:
        if self.channel is None:
            self.channel = backend_channel(self.service.address, "gateway")
        return matchmaking_pb2_grpc.MatchmakingServiceStub(self.channel)

    async def start(self) -> None:
        with self.log.open("ab") as sink:
            self.service.process = subprocess.Popen(  # noqa: ASYNC220 - a fork-exec, not a wait
                [sys.executable, "-m", self.service.module], cwd=ROOT, env=self.service.env, stderr=sink
            )
        await wait_until_serving(self.service.health_address, within=30)


@dataclass
class Cluster:
    db: Database
    rules: RunningServer
    replicas: list[Replica]
    watchers: list[Watcher] = field(default_factory=list)

    async def lease(self) -> tuple[str, int, int]:
        """The pairing lease: holder, epoch, expiry."""
        async with self.db.begin() as conn:
            row = (await conn.execute(select(mm_leases).where(mm_leases.c.name == PAIRING_LEASE))).first()
        assert row is not None
        return row.holder, row.epoch, row.expires_at_ms

    async def leader(self, within: float = 10.0) -> tuple[Replica, Replica]:
        """The replica holding the pairing lease, and the other one."""
        async with asyncio.timeout(within):
            while True:
                with contextlib.suppress(AssertionError):
                    holder, _, expires = await self.lease()
                    pid = int(holder.split("/")[1])
                    if expires > time.time() * 1000:
                        first, second = self.replicas
                        return (first, second) if first.service.pid == pid else (second, first)
                await asyncio.sleep(0.05)

    async def count(self, query: Select[Any]) -> int:
        async with self.db.begin() as conn:
            return int((await conn.execute(query)).scalar_one())

    async def paired(self) -> list[tuple[str, str]]:
        async with self.db.begin() as conn:
            rows = await conn.execute(
                select(mm_matches.c.player0, mm_matches.c.player1).where(mm_matches.c.table_id.is_(None))
            )
            return [(row.player0, row.player1) for row in rows]

    async def has_paired(self, n: int) -> bool:
        return len(await self.paired()) >= n

    async def created_on_shard(self, n: int) -> bool:
        """Whether the rules shard holds ``n`` matches (or more)."""
        return await self.count(select(func.count()).select_from(matches)) >= n

    async def watch(self, replica: Replica, player: str) -> Watcher:
        watcher = Watcher(player, replica.mm.WatchLobby(pb.WatchLobbyRequest(player_id=player)))
        first = await watcher.stream.read()
        assert first.WhichOneof("event") == "subscribed"
        watcher.task = asyncio.get_running_loop().create_task(watcher.collect())
        self.watchers.append(watcher)
        return watcher


@dataclass
class Watcher:
    player: str
    stream: grpc.aio.UnaryStreamCall
    events: list[pb.WatchLobbyResponse] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    async def collect(self) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
            while (event := await self.stream.read()) is not grpc.aio.EOF:
                self.events.append(event)

    def tables(self) -> list[tuple[str, int]]:
        return [
            (e.table_updated.table_id, e.table_updated.status)
            for e in self.events
            if e.WhichOneof("event") == "table_updated"
        ]

    def ready(self) -> list[str]:
        return [e.match_ready.match_id for e in self.events if e.WhichOneof("event") == "match_ready"]

    async def until(self, check: object, within: float = 10.0) -> None:
        async with asyncio.timeout(within):
            while not check():  # type: ignore[operator]  # noqa: ASYNC110 - filled by the stream's task
                await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def cluster(pg_url: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    mm_ports = free_port()
    rules = await start_in_process(
        "rules-chess", chess_rules_service, pg_url, {"MATCHMAKING_ADDRESS": f"127.0.0.1:{mm_ports}"}
    )
    env = {
        "DATABASE_URL": pg_url,
        "RULES_CHESS_ADDRESSES": rules.address,
        "MATCHMAKING_LEASE_MS": str(LEASE_MS),
        "MIGRATE_ON_START": "false",
    }
    replicas = [
        Replica(ServiceProcess("services.matchmaking", env), tmp_path / f"matchmaking-{n}.log")
        for n in (1, 2)
    ]
    db = Database(pg_url)
    running = Cluster(db, rules, replicas)
    try:
        for replica in replicas:
            await replica.start()
        yield running
    finally:
        for watcher in running.watchers:
            watcher.stream.cancel()
            if watcher.task is not None:
                await asyncio.gather(watcher.task, return_exceptions=True)
        for replica in replicas:
            process = replica.service.process
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGCONT)
                replica.service.kill(signal.SIGTERM)
            if replica.channel is not None:
                await replica.channel.close()
        await rules.stop(grace=0.5)
        await db.dispose()


def assert_nobody_paired_twice(pairs: list[tuple[str, str]]) -> None:
    seen = Counter(player for pair_ in pairs for player in pair_)
    assert all(n == 1 for n in seen.values()), seen


async def test_killed_leader_is_replaced_and_every_event_reaches_every_replica(
    pg_url: str, tmp_path: Path
) -> None:
    async with cluster(pg_url, tmp_path) as running:
        leader, survivor = await running.leader()

        # Lobby events reach the survivor's streams whichever replica produced them.
        hosts = {name: await running.watch(survivor, name) for name in ("h1", "h2", "j1", "j2")}
        made_on_leader = (await leader.mm.CreateTable(table_request("h1"))).table
        made_on_survivor = (await survivor.mm.CreateTable(table_request("h2"))).table
        await hosts["h1"].until(
            lambda: (made_on_leader.table_id, pb.TABLE_STATUS_OPEN) in hosts["h1"].tables()
        )
        await hosts["h2"].until(
            lambda: (made_on_survivor.table_id, pb.TABLE_STATUS_OPEN) in hosts["h2"].tables()
        )
        joined = await leader.mm.JoinTable(
            pb.JoinTableRequest(player_id="j1", table_id=made_on_leader.table_id)
        )
        await survivor.mm.JoinTable(pb.JoinTableRequest(player_id="j2", table_id=made_on_survivor.table_id))
        for host, joiner in (("h1", "j1"), ("h2", "j2")):
            for name in (host, joiner):
                await hosts[name].until(lambda name=name: len(hosts[name].ready()) == 1)
                await hosts[name].until(
                    lambda name=name: any(s == pb.TABLE_STATUS_PLAYING for _, s in hosts[name].tables())
                )
        assert hosts["j1"].ready() == [joined.table.match_id]

        # The leader pairs players whose streams are on the other replica: their MatchReady crosses over.
        quick = {name: await running.watch(survivor, name) for name in ("q1", "q2")}
        await survivor.mm.EnterQueue(queue_request("q1", 0))
        await leader.mm.EnterQueue(queue_request("q2", 0))
        for watcher in quick.values():
            await watcher.until(lambda watcher=watcher: len(watcher.ready()) == 1)

        # Players wait in the queue through both replicas, each without a partner yet...
        waiting = {}
        for pool, (first, second) in enumerate(
            [("a1", "b1"), ("a2", "b2"), ("a3", "b3"), ("a4", "b4"), ("a5", "b5")], start=1
        ):
            replica = leader if pool % 2 else survivor
            await replica.mm.EnterQueue(queue_request(first, pool))
            waiting[first] = await running.watch(survivor, first)
            waiting[second] = await running.watch(survivor, second)
        # ... then the leader stops (so it pairs nobody), their partners arrive, and it is killed.
        leader.service.process.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
        for pool, second in enumerate(["b1", "b2", "b3", "b4", "b5"], start=1):
            await survivor.mm.EnterQueue(queue_request(second, pool))
        assert await running.count(select(func.count()).select_from(mm_queue)) == 10
        assert len(await running.paired()) == 1  # q1 and q2 only
        killed_at = time.monotonic()
        leader.service.kill(signal.SIGKILL)

        await eventually(lambda: running.has_paired(6), BOUND_S + 5)
        resumed_s = time.monotonic() - killed_at
        assert resumed_s < BOUND_S, f"pairing resumed {resumed_s:.2f} s after the leader died"
        new_leader, _ = await running.leader()
        assert new_leader is survivor

        # Nobody paired twice, no match made twice (in matchmaking and on the rules shard).
        pairs = await running.paired()
        assert_nobody_paired_twice(pairs)
        expected = {frozenset(("q1", "q2")), *(frozenset((f"a{n}", f"b{n}")) for n in range(1, 6))}
        assert {frozenset(p) for p in pairs} == expected
        for watcher in waiting.values():
            await watcher.until(lambda watcher=watcher: len(watcher.ready()) == 1)
        assert await running.count(select(func.count()).select_from(mm_matches)) == 8
        await eventually(lambda: running.created_on_shard(8))
        assert await running.count(select(func.count()).select_from(matches)) == 8
        assert await running.count(select(func.count()).select_from(mm_queue)) == 0

        # The survivor alone: its tables' events still reach its streams, and every event came once.
        late = (await survivor.mm.CreateTable(table_request("h3"))).table
        watcher = await running.watch(survivor, "h3")
        await survivor.mm.LeaveTable(pb.LeaveTableRequest(player_id="h3", table_id=late.table_id))
        await watcher.until(lambda: (late.table_id, pb.TABLE_STATUS_CANCELLED) in watcher.tables())
        for watched in running.watchers:
            assert len(watched.ready()) == len(set(watched.ready())) <= 1, (watched.player, watched.ready())


async def test_a_paused_leader_that_was_replaced_makes_no_match(pg_url: str, tmp_path: Path) -> None:
    async with cluster(pg_url, tmp_path) as running:
        leader, other = await running.leader()
        _, epoch, _ = await running.lease()
        await other.mm.EnterQueue(queue_request("p1", 1))
        leader.service.process.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
        await other.mm.EnterQueue(queue_request("p2", 1))
        # The other replica takes the lease over once it has run out, with a new epoch, and pairs.
        await eventually(lambda: running.has_paired(1), BOUND_S + 5)
        holder, new_epoch, _ = await running.lease()
        assert int(holder.split("/")[1]) == other.service.pid
        assert new_epoch > epoch
        # The paused leader resumes believing it leads: it pairs nobody, and steps down.
        leader.service.process.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
        for pool, (first, second) in enumerate([("r1", "r2"), ("s1", "s2")], start=2):
            await leader.mm.EnterQueue(queue_request(first, pool))
            await leader.mm.EnterQueue(queue_request(second, pool))
        await eventually(lambda: running.has_paired(3), BOUND_S + 5)
        await asyncio.sleep(LEASE_MS / 1000)
        holder, last_epoch, _ = await running.lease()
        assert int(holder.split("/")[1]) == other.service.pid
        assert last_epoch == new_epoch
        pairs = await running.paired()
        assert len(pairs) == 3
        assert_nobody_paired_twice(pairs)
        await eventually(lambda: running.created_on_shard(3))
        assert await running.count(select(func.count()).select_from(matches)) == 3


async def test_events_published_while_a_replica_was_not_listening_reach_its_streams(
    pg_url: str, tmp_path: Path
) -> None:
    """A replica's listening session is ended (a database restart, a network cut): what the other replica
    published meanwhile is not lost for the streams connected to it: it catches them up from the database
    once it listens again (each table's state as stored, and the matches made)."""
    async with cluster(pg_url, tmp_path) as running:
        first, second = running.replicas
        watcher = await running.watch(first, "w1")
        async with running.db.begin() as conn:
            ended = await conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'matchmaking-lobby-listen' AND datname = current_database()"
                )
            )
            assert len(ended.all()) == 2
        table = (await second.mm.CreateTable(table_request("w1"))).table
        joined = await second.mm.JoinTable(pb.JoinTableRequest(player_id="w2", table_id=table.table_id))
        # Caught up from the database: the table's state as stored (its transitions during the gap may
        # come as one event, the latest), and the match.
        await watcher.until(lambda: (table.table_id, pb.TABLE_STATUS_PLAYING) in watcher.tables())
        await watcher.until(lambda: watcher.ready() == [joined.table.match_id])


# -- the fence itself, in this process: a leader's write after a takeover is refused ---------------------


@pytest.fixture
async def two_stores(pg_url: str) -> AsyncIterator[tuple[MatchmakingStore, MatchmakingStore]]:
    """Two stores on the same database, each on its own pool: two replicas."""
    dbs = [Database(pg_url), Database(pg_url)]
    stores = [MatchmakingStore(db) for db in dbs]
    yield stores[0], stores[1]
    for store, db in zip(stores, dbs, strict=True):
        await store.close()
        await db.dispose()


async def enter(store: MatchmakingStore, player: str, pool: int = 0) -> None:
    request = queue_request(player, pool)
    now = ServiceTime().now_ms()
    await store.enter_queue(
        {
            "player_id": player,
            "pool": f"pool-{pool}",
            "family": "chess",
            "request": request.SerializeToString(),
            "rating": 1500,
            "entered_at_ms": now,
        }
    )


async def test_a_write_under_a_superseded_lease_is_refused(
    two_stores: tuple[MatchmakingStore, MatchmakingStore],
) -> None:
    first, second = two_stores
    now = ServiceTime().now_ms()
    old = await first.claim_lease(PAIRING_LEASE, "first", now, 1_000)
    assert old == Lease(PAIRING_LEASE, "first", 1)
    assert await second.claim_lease(PAIRING_LEASE, "second", now, 1_000) is None  # still running
    await enter(first, "x1")
    await enter(first, "x2")
    # The first holder is paused past its lease; the second takes it over.
    new = await second.claim_lease(PAIRING_LEASE, "second", now + 1_001, 1_000)
    assert new == Lease(PAIRING_LEASE, "second", 2)
    shards = RecordingShards()
    mm = Matchmaker(first, shards, LobbyHub(), ServiceTime())
    row = await mm.new_match_row("chess", ("x1", "x2"), b"", b"", 100, "USD", None)
    with pytest.raises(LeaseLost):
        await first.pair_many([("x1", "x2", row)], lease=old)
    assert not await first.renew_lease(old, now + 1_002, 1_000)
    assert await first.still_queued(["x1", "x2"]) == {"x1", "x2"}  # nothing of the refused write
    assert await second.pair_many([("x1", "x2", row)], lease=new) == [True]
    await shards.close()


async def test_a_replica_paused_mid_pairing_makes_no_match_once_replaced(
    two_stores: tuple[MatchmakingStore, MatchmakingStore],
) -> None:
    """The leader decided on a pair and then stalled (a pause, a slow fairness call) past its lease;
    another replica took the lease over. Even believing it still leads, its write is refused: the players
    stay queued for the new leader, and no match row exists."""
    first, second = two_stores
    shards = RecordingShards()
    mm = Matchmaker(first, shards, LobbyHub(), ServiceTime(), replicas=ReplicaSettings(1_000, "first"))
    await mm.start()
    try:
        await eventually(lambda: asyncio.sleep(0, mm.leading), 5)
        for task in mm._tasks:  # the process stops: neither its renewals nor its rounds run on their own
            task.cancel()
        await asyncio.gather(*mm._tasks, return_exceptions=True)
        await enter(second, "y1")
        await enter(second, "y2")
        stalled = asyncio.Event()
        release = asyncio.Event()
        real_row = mm._match_row

        async def stalling_row(players: tuple[str, str], request: pb.EnterQueueRequest) -> dict[str, object]:
            row = await real_row(players, request)
            stalled.set()
            await release.wait()
            return row

        mm._match_row = stalling_row  # type: ignore[method-assign]
        await mm._load_queue()
        pairing = asyncio.get_running_loop().create_task(mm.pair_now())
        await asyncio.wait_for(stalled.wait(), 5)
        await asyncio.sleep(1.1)  # its lease runs out
        taken = await second.claim_lease(PAIRING_LEASE, "second", ServiceTime().now_ms(), 1_000)
        assert taken is not None
        assert mm.lease is not None
        assert taken.epoch == mm.lease.epoch + 1
        mm._lease_until = asyncio.get_running_loop().time() + 60  # it still believes it leads
        release.set()
        assert await pairing == 0
        assert not mm.leading  # it stepped down
        assert shards.created == []
        assert await second.still_queued(["y1", "y2"]) == {"y1", "y2"}
        assert await second.matches_starting() == []
    finally:
        await mm.close()  # (closes the shards too)
