"""Matchmaking figures: quick-match pairings per second with 10,000 queued players (the algorithm alone,
and through the service: its database, the rules shard, the lobby), the p99 time from the second join
of a table to both players being told, and lobby calls per second.

The rules-chess and matchmaking services run as their own processes (SQLite files, or
``BENCH_DATABASE_URL``), the benchmark client in this one:

- *pairing alone*: :func:`libs.pairing.pair` over the queued seekers of one pool (no I/O);
- *second join to both players told*: a table is created, both players watch their lobby stream, the
  second player joins; the time from the ``JoinTable`` call until both streams have had ``MatchReady``
  (the match created on the rules shard and marked playing), one table at a time, then 20 at once;
- *lobby calls per second*: 500 tables are made and filled by 1,000 players, 100 of them at work at
  once (50 pairs, each a ``CreateTable`` by its host and then a ``JoinTable`` by its guest, which
  answers once the match exists on the rules shard): pairs and calls per second from the first call to
  the last answer, the set-up of 500 matches at once as the platform load benchmark makes them;
- *arrivals*: 2,000 players enter the queue over gRPC (``EnterQueue``, 100 calls in flight) while the
  service pairs them as they come: how fast they get in, the most waiting at once (the service pairs
  while they arrive, so the queue never holds them all), when the last match is playing;
- *a backlog of 10,000*: that many players are waiting when the service starts (as after a restart or
  an outage) and it pairs them all; pairings per second from its first pairing until the last match
  is playing on the rules shard. Their queue rows (exactly what ``EnterQueue`` writes: ``mm_queue`` and
  ``mm_activity``) are written in one transaction while the service is stopped: entering over gRPC,
  they would be paired as they arrive (see above) and never be 10,000 waiting at once.

Progress is read from matchmaking's tables every 100 ms (the match rows and their status).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
from skillclassics.chess.v1 import chess_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.matchmaking.v1 import matchmaking_pb2_grpc
from skillclassics.rules.v1 import rules_pb2
from sqlalchemy import func, insert, select

from benchmarks.support import bench_service, percentile
from libs.pairing import Seeker, pair
from libs.persistence import Database
from libs.persistence.schema import mm_activity, mm_matches, mm_queue
from libs.runtime.config import sqlite_url
from services.matchmaking.matchmaker import PAIRING_BATCH
from services.matchmaking.servicer import queue_pool
from tests.support import ServiceProcess, backend_channel

QUEUED = 10_000
"""The backlog: players waiting when the service starts."""
ARRIVALS = 2_000
"""Players entering the queue over gRPC (about 60 EnterQueue/s measured here: 10,000 take 3 minutes)."""
TABLES = 200
IN_FLIGHT = 100
LOBBY_PAIRS = 500
"""Tables made and filled for the lobby figure (each by two new players: a host and a guest)."""
LOBBY_PAIRS_AT_ONCE = 50
"""Pairs at work at once: 100 players, each with one lobby call in flight at a time."""
POLL_S = 0.1
MINUTE = 60_000
PAIRING_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Figures:
    """What one run measured (seconds)."""

    pairing_alone_per_s: float
    join_to_told_p99: dict[int, float]
    """Per number of tables started at once."""
    lobby_pairs: int
    lobby_s: float
    """From the first ``CreateTable`` until the last ``JoinTable`` answered."""
    arrivals_entered_s: float
    arrivals_most_waiting: int
    arrivals_all_paired_s: float
    backlog_pairs: int
    backlog_pairing_s: float
    backlog_start_to_paired_s: float

    @property
    def backlog_pairings_per_s(self) -> float:
        return self.backlog_pairs / self.backlog_pairing_s

    @property
    def lobby_calls_per_s(self) -> float:
        return 2 * self.lobby_pairs / self.lobby_s


def pairing_alone(queued: int) -> float:
    seekers = [
        Seeker(f"p{i}", 1200 + (i * 7919) % 800, i, "chess|contest|300000+0|100USD") for i in range(queued)
    ]
    started = time.perf_counter()
    pairs = pair(seekers, queued + 60_000)
    elapsed = time.perf_counter() - started
    print(
        f"pairing alone: {len(pairs):,} pairs from {queued:,} queued players in {elapsed * 1000:.0f} ms "
        f"({len(pairs) / elapsed:,.0f} pairings/s)"
    )
    return len(pairs) / elapsed


def _table_request(host: str) -> pb.CreateTableRequest:
    """A chess table opened by ``host``: 5 minutes each, a one-dollar entry fee."""
    return pb.CreateTableRequest(
        player_id=host,
        family="chess",
        options=rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions()),
        time_control=rules_pb2.TimeControl(base_ms=5 * MINUTE),
        entry_fee_minor=100,
        currency="USD",
        idempotency_key="t",
    )


async def table_to_told(
    stub: matchmaking_pb2_grpc.MatchmakingServiceStub, run: str, latencies: list[float], i: int
) -> None:
    host, guest = f"{run}-host{i}", f"{run}-guest{i}"
    streams = [stub.WatchLobby(pb.WatchLobbyRequest(player_id=p)) for p in (host, guest)]
    for stream in streams:  # registered: from now on nothing for the player is missed
        assert (await stream.read()).WhichOneof("event") == "subscribed"
    table = await stub.CreateTable(_table_request(host))
    started = time.perf_counter()
    await stub.JoinTable(pb.JoinTableRequest(player_id=guest, table_id=table.table.table_id))

    async def told(stream: grpc.aio.UnaryStreamCall) -> None:
        while (await stream.read()).WhichOneof("event") != "match_ready":
            pass

    await asyncio.gather(*(told(s) for s in streams))
    latencies.append(time.perf_counter() - started)
    for stream in streams:
        stream.cancel()


def queue_request(player: str) -> pb.EnterQueueRequest:
    return pb.EnterQueueRequest(
        player_id=player,
        family="chess",
        time_control=rules_pb2.TimeControl(base_ms=5 * MINUTE),
        entry_fee_minor=100,
        currency="USD",
    )


class Progress:
    """Matchmaking's progress with one group of players, read from its tables."""

    def __init__(self, db: Database, prefix: str) -> None:
        self._db = db
        self._like = f"{prefix}%"

    async def counts(self) -> tuple[int, int]:
        """(players of the group waiting in the queue, their matches playing on a rules shard)."""
        async with self._db.connect() as conn:
            waiting = await conn.scalar(
                select(func.count()).select_from(mm_queue).where(mm_queue.c.player_id.like(self._like))
            )
            playing = await conn.scalar(
                select(func.count())
                .select_from(mm_matches)
                .where(mm_matches.c.player0.like(self._like), mm_matches.c.status == "playing")
            )
        return int(waiting or 0), int(playing or 0)

    async def first_match_ms(self) -> int:
        async with self._db.connect() as conn:
            first = await conn.scalar(
                select(func.min(mm_matches.c.created_at_ms)).where(mm_matches.c.player0.like(self._like))
            )
        return int(first or 0)

    async def until_playing(
        self, matches: int, on_sample: Callable[[int, int], None] = lambda waiting, playing: None
    ) -> float:
        """Poll until ``matches`` matches of the group are playing; the Unix time (s) it was seen."""
        deadline = time.monotonic() + PAIRING_TIMEOUT_S
        while True:
            waiting, playing = await self.counts()
            on_sample(waiting, playing)
            if playing >= matches:
                return time.time()
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {playing} of {matches} matches playing after {PAIRING_TIMEOUT_S} s")
            await asyncio.sleep(POLL_S)


async def join_to_told(
    stub: matchmaking_pb2_grpc.MatchmakingServiceStub, run: str, backend: str, tables: int
) -> dict[int, float]:
    p99 = {}
    for label, at_once, start in (("one at a time", 1, 0), ("20 at a time", 20, tables)):
        latencies: list[float] = []
        for batch in range(start, start + tables, at_once):
            await asyncio.gather(
                *(
                    table_to_told(stub, run, latencies, i)
                    for i in range(batch, min(batch + at_once, start + tables))
                )
            )
        latencies.sort()
        p99[at_once] = percentile(latencies, 0.99)
        print(
            f"second join to both players told ({backend}, {tables} tables {label}, "
            f"match created on the rules shard): p50 {percentile(latencies, 0.5) * 1000:.1f} ms, "
            f"p99 {p99[at_once] * 1000:.1f} ms"
        )
    return p99


async def lobby_calls(
    stub: matchmaking_pb2_grpc.MatchmakingServiceStub, run: str, backend: str, pairs: int
) -> float:
    """Make and fill ``pairs`` tables, ``LOBBY_PAIRS_AT_ONCE`` pairs of players at a time; the seconds
    taken."""
    slots = asyncio.Semaphore(LOBBY_PAIRS_AT_ONCE)

    async def make(i: int) -> None:
        async with slots:
            host, guest = f"{run}-lh{i}", f"{run}-lg{i}"
            table = await stub.CreateTable(_table_request(host))
            await stub.JoinTable(pb.JoinTableRequest(player_id=guest, table_id=table.table.table_id))

    started = time.perf_counter()
    await asyncio.gather(*(make(i) for i in range(pairs)))
    elapsed = time.perf_counter() - started
    print(
        f"lobby calls ({backend}): {pairs:,} tables made and filled (CreateTable, then JoinTable until the "
        f"match exists on the rules shard), {2 * LOBBY_PAIRS_AT_ONCE} players at work at once, in "
        f"{elapsed:.1f} s: {pairs / elapsed:,.0f} pairs/s, {2 * pairs / elapsed:,.0f} lobby calls/s"
    )
    return elapsed


async def enter_over_grpc(
    stub: matchmaking_pb2_grpc.MatchmakingServiceStub,
    progress: Progress,
    prefix: str,
    queued: int,
    backend: str,
) -> tuple[float, int, float]:
    slots = asyncio.Semaphore(IN_FLIGHT)
    last_entered = 0.0

    async def enter(i: int) -> None:
        nonlocal last_entered
        async with slots:
            await stub.EnterQueue(queue_request(f"{prefix}{i}"))
        last_entered = max(last_entered, time.time())

    most_waiting = 0

    def sample(waiting: int, playing: int) -> None:
        nonlocal most_waiting
        most_waiting = max(most_waiting, waiting)

    started = time.time()
    entering = asyncio.gather(*(enter(i) for i in range(queued)))
    all_paired = await progress.until_playing(queued // 2, sample)
    await entering
    entered = last_entered - started
    print(
        f"arrivals ({backend}): {queued:,} players entered the queue over gRPC, {IN_FLIGHT} calls in flight, "
        f"in {entered:.1f} s ({queued / entered:,.0f} EnterQueue/s); "
        f"at most {most_waiting:,} waiting at once; "
        f"all {queued // 2:,} matches playing {all_paired - started:.1f} s after the first call"
    )
    return entered, most_waiting, all_paired - started


async def write_backlog(db: Database, prefix: str, queued: int) -> None:
    """The queue rows of ``queued`` waiting players, as ``EnterQueue`` writes them, in one transaction;
    the first waited longest (one millisecond apart)."""
    now = int(time.time() * 1000)
    queue, activity = [], []
    for i in range(queued):
        request = queue_request(f"{prefix}{i}")
        _, pool = queue_pool(request)
        entered = now - (queued - i)
        queue.append(
            {
                "player_id": request.player_id,
                "pool": pool,
                "family": "chess",
                "request": request.SerializeToString(),
                "rating": 1500,
                "entered_at_ms": entered,
            }
        )
        activity.append({"player_id": request.player_id, "kind": "queue", "ref": pool, "since_ms": entered})
    async with db.begin() as conn:
        await conn.execute(insert(mm_queue), queue)
        await conn.execute(insert(mm_activity), activity)


async def backlog(
    matchmaking: ServiceProcess, db: Database, prefix: str, queued: int, backend: str
) -> tuple[int, float, float]:
    matchmaking.kill(signal.SIGTERM)
    await write_backlog(db, prefix, queued)
    progress = Progress(db, prefix)
    assert await progress.counts() == (queued, 0)
    spawned = time.time()
    await matchmaking.start()
    all_paired = await progress.until_playing(queued // 2)
    first_ms = await progress.first_match_ms()
    pairing = all_paired - first_ms / 1000
    pairs = queued // 2
    print(
        f"a backlog of {queued:,} queued players ({backend}), the service started with them waiting: "
        f"{pairs:,} pairings in {pairing:.1f} s = {pairs / pairing:,.0f} pairings/s from its first pairing "
        f"until the last match was playing on the rules shard ({all_paired - spawned:.1f} s from the "
        f"process start, which loads the queue); each batch of {PAIRING_BATCH} pairs is one transaction, "
        f"{PAIRING_BATCH} CreateMatch calls at once and one more transaction"
    )
    return pairs, pairing, all_paired - spawned


@contextlib.asynccontextmanager
async def stack() -> AsyncIterator[tuple[ServiceProcess, str, str]]:
    """rules-chess and matchmaking as processes; matchmaking, its database URL and the backend's name."""
    with tempfile.TemporaryDirectory() as scratch:
        url = os.environ.get("BENCH_DATABASE_URL") or sqlite_url(Path(scratch) / "matchmaking.db")
        async with (
            bench_service("services.rules_chess") as (rules, _),
            bench_service(
                "services.matchmaking", {"RULES_CHESS_ADDRESSES": rules.address, "DATABASE_URL": url}
            ) as (matchmaking, backend),
        ):
            yield matchmaking, url, backend


async def run(
    queued: int = QUEUED, arrivals: int = ARRIVALS, tables: int = TABLES, lobby_pairs: int = LOBBY_PAIRS
) -> Figures:
    """The whole benchmark; ``tests/benchmarks`` runs it with a handful of players."""
    alone = pairing_alone(queued)
    run_id = uuid.uuid4().hex[:6]  # players of earlier runs may still be in a BENCH_DATABASE_URL
    async with (
        stack() as (matchmaking, url, backend),
        backend_channel(matchmaking.address, "gateway") as channel,  # the lobby's calls come from the gateway
    ):
        stub = matchmaking_pb2_grpc.MatchmakingServiceStub(channel)
        db = Database(url)
        try:
            p99 = await join_to_told(stub, run_id, backend, tables)
            lobby_s = await lobby_calls(stub, run_id, backend, lobby_pairs)
            arrived = f"{run_id}-a"
            entered, most, all_paired = await enter_over_grpc(
                stub, Progress(db, arrived), arrived, arrivals, backend
            )
            pairs, pairing, from_start = await backlog(matchmaking, db, f"{run_id}-b", queued, backend)
        finally:
            await db.dispose()
    return Figures(alone, p99, lobby_pairs, lobby_s, entered, most, all_paired, pairs, pairing, from_start)
