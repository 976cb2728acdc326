"""Fairness figures: draws per second in-process and through the service, and the service's memory."""

from __future__ import annotations

import asyncio
import base64
import os
import time

from skillclassics.fairness.v1 import fairness_pb2 as pb
from skillclassics.fairness.v1 import fairness_pb2_grpc

from benchmarks.support import bench_service, percentile, rss_mib
from libs.fairness.derivation import DrawSpec, draw_values, stream_key
from tests.callers import Callers, fairness_callers

IN_PROCESS_DRAWS = 50_000
SERVICE_DRAWS = 3_000
CONCURRENCY = 16


def in_process() -> None:
    key = stream_key(bytes(32), "bench", {0: b"a", 1: b"b"})
    for label, spec in (("dice x2", DrawSpec.dice(2)), ("shuffle 52", DrawSpec.shuffle(52))):
        count = IN_PROCESS_DRAWS if spec.count == 2 else IN_PROCESS_DRAWS // 10
        started = time.perf_counter()
        for index in range(count):
            draw_values(key, "s", index, spec)
        elapsed = time.perf_counter() - started
        print(f"in-process {label:<11} {count / elapsed:>12,.0f} draws/s")


async def through_service() -> None:
    seed_key = base64.b64encode(os.urandom(32)).decode()
    async with bench_service("services.fairness", {"FAIRNESS_SEED_KEY": seed_key}) as (service, backend):
        idle_rss = rss_mib(service.pid)
        # Matchmaking commits; rules-gin-0, the shard that owns the matches (gin.0.*), draws.
        async with Callers(service.address) as callers:
            stub = callers.stub(fairness_pb2_grpc.FairnessServiceStub, fairness_callers("rules-gin-0"))
            matches = [f"gin.0.bench-{os.getpid()}-{i}" for i in range(CONCURRENCY)]
            for match_id in matches:
                await stub.Commit(pb.CommitRequest(match_id=match_id, idempotency_key="k"))
            latencies: list[float] = []

            async def player(match_id: str, draws: int) -> None:
                request = pb.DrawRequest(match_id=match_id, stream="dice", kind=pb.DRAW_KIND_DICE, count=2)
                for _ in range(draws):
                    started = time.perf_counter()
                    await stub.Draw(request)
                    latencies.append(time.perf_counter() - started)

            started = time.perf_counter()
            await asyncio.gather(*(player(m, SERVICE_DRAWS // CONCURRENCY) for m in matches))
            elapsed = time.perf_counter() - started
        latencies.sort()
        print(
            f"through the service ({backend}, {CONCURRENCY} concurrent matches): "
            f"{len(latencies) / elapsed:,.0f} draws/s, "
            f"latency p50 {percentile(latencies, 0.5) * 1000:.2f} ms, "
            f"p99 {percentile(latencies, 0.99) * 1000:.2f} ms (each draw durable before the answer)"
        )
        print(f"service memory: {idle_rss:.1f} MiB idle, {rss_mib(service.pid):.1f} MiB after the run")


async def run() -> None:
    in_process()
    await through_service()
