"""Matchmaking figures: pairings per second with 10,000 queued players (the pairing itself, and through
the service's database), and the p99 time from the second join of a table to both players being told."""

from __future__ import annotations

import asyncio
import time

import grpc
from skillclassics.chess.v1 import chess_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.matchmaking.v1 import matchmaking_pb2_grpc
from skillclassics.rules.v1 import rules_pb2

from benchmarks.support import bench_service, percentile
from libs.pairing import Seeker, pair

QUEUED = 10_000
TABLES = 200
MINUTE = 60_000


def pairing_alone() -> None:
    seekers = [
        Seeker(f"p{i}", 1200 + (i * 7919) % 800, i, "chess|contest|300000+0|100USD") for i in range(QUEUED)
    ]
    started = time.perf_counter()
    pairs = pair(seekers, QUEUED + 60_000)
    elapsed = time.perf_counter() - started
    print(
        f"pairing alone: {len(pairs):,} pairs from {QUEUED:,} queued players in {elapsed * 1000:.0f} ms "
        f"({len(pairs) / elapsed:,.0f} pairings/s)"
    )


async def table_to_told(
    stub: matchmaking_pb2_grpc.MatchmakingServiceStub, latencies: list[float], i: int
) -> None:
    host, guest = f"host{i}", f"guest{i}"
    streams = [stub.WatchLobby(pb.WatchLobbyRequest(player_id=p)) for p in (host, guest)]
    await asyncio.sleep(0)
    table = await stub.CreateTable(
        pb.CreateTableRequest(
            player_id=host,
            family="chess",
            options=rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions()),
            time_control=rules_pb2.TimeControl(base_ms=5 * MINUTE),
            entry_fee_minor=100,
            currency="USD",
            idempotency_key="t",
        )
    )
    started = time.perf_counter()
    await stub.JoinTable(pb.JoinTableRequest(player_id=guest, table_id=table.table.table_id))

    async def told(stream: grpc.aio.UnaryStreamCall) -> None:
        while (await stream.read()).WhichOneof("event") != "match_ready":
            pass

    await asyncio.gather(*(told(s) for s in streams))
    latencies.append(time.perf_counter() - started)
    for stream in streams:
        stream.cancel()


async def run() -> None:
    pairing_alone()
    async with bench_service("services.rules_chess") as (rules, _):
        env = {"RULES_CHESS_ADDRESSES": rules.address}
        async with (
            bench_service("services.matchmaking", env) as (service, backend),
            grpc.aio.insecure_channel(service.address) as channel,
        ):
            stub = matchmaking_pb2_grpc.MatchmakingServiceStub(channel)
            for label, at_once, start in (("one at a time", 1, 0), ("20 at a time", 20, 1_000)):
                latencies: list[float] = []
                for batch in range(start, start + TABLES, at_once):
                    await asyncio.gather(
                        *(table_to_told(stub, latencies, i) for i in range(batch, batch + at_once))
                    )
                latencies.sort()
                print(
                    f"second join to both players told ({backend}, {TABLES} tables {label}, "
                    f"match created on the rules shard): p50 {percentile(latencies, 0.5) * 1000:.1f} ms, "
                    f"p99 {percentile(latencies, 0.99) * 1000:.1f} ms"
                )
            requests = [
                pb.EnterQueueRequest(
                    player_id=f"q{i}",
                    family="chess",
                    time_control=rules_pb2.TimeControl(base_ms=5 * MINUTE),
                    entry_fee_minor=100,
                    currency="USD",
                )
                for i in range(2_000)
            ]
            started = time.perf_counter()
            for chunk in range(0, len(requests), 100):
                await asyncio.gather(*(stub.EnterQueue(r) for r in requests[chunk : chunk + 100]))
            queued = time.perf_counter() - started
            deadline = time.perf_counter() + 120
            while time.perf_counter() < deadline:
                history = await stub.GetMatchHistory(
                    pb.GetMatchHistoryRequest(player_id=requests[-1].player_id)
                )
                if history.matches:
                    break
                await asyncio.sleep(0.1)
            total = time.perf_counter() - started
            print(
                f"through the service: 2,000 players queued in {queued:.1f} s; "
                f"the last paired after {total:.1f} s "
                f"(each pairing is a transaction plus a match created on the rules shard)"
            )
