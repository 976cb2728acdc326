"""Clock figures: expiry lateness for 10,000 timers, arm calls per second, memory with 100,000 timers.

Lateness is measured where it matters, at the watcher: the instant the expiration arrives over gRPC
minus the timer's deadline (both Unix milliseconds on this machine). The timers' owners are rules shards
(a shard arms and watches only its own timers), each calling over mutual TLS as itself.
"""

from __future__ import annotations

import asyncio
import time

from skillclassics.clock.v1 import clock_pb2 as pb
from skillclassics.clock.v1 import clock_pb2_grpc

from benchmarks.support import bench_service, percentile, rss_mib
from tests.support import backend_channel

LATENESS_TIMERS = 10_000
SPREAD_MS = 4_000
MEMORY_TIMERS = 100_000
CONCURRENCY = 64
MEMORY_OWNER = "rules-chess-0"
LATENESS_OWNER = "rules-chess-1"
"""The rules shards whose timers the figures arm (each its own, so the lateness watch sees only its own)."""


def now_ms() -> float:
    return time.time_ns() / 1_000_000


async def arm_many(stub: clock_pb2_grpc.ClockServiceStub, owner: str, deadlines: list[int]) -> float:
    """Arm one timer per deadline with CONCURRENCY calls in flight; returns arms per second."""
    queue = list(enumerate(deadlines))
    started = time.perf_counter()

    async def worker() -> None:
        while queue:
            index, deadline = queue.pop()
            await stub.Arm(pb.ArmRequest(owner=owner, timer_id=f"t{index}", deadline_ms=deadline))

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return len(deadlines) / (time.perf_counter() - started)


async def lateness(stub: clock_pb2_grpc.ClockServiceStub, arm_rate: float) -> None:
    owner = LATENESS_OWNER
    received: list[float] = []
    server_side: list[float] = []
    call = stub.WatchExpirations(pb.WatchExpirationsRequest(owner=owner))
    head_start_ms = 1_000 + int(1.5 * 1000 * LATENESS_TIMERS / arm_rate)  # every arm lands first
    start = int(now_ms()) + head_start_ms
    deadlines = [start + (i * SPREAD_MS) // LATENESS_TIMERS for i in range(LATENESS_TIMERS)]
    await arm_many(stub, owner, deadlines)
    assert now_ms() < start, "arming took longer than the head start"
    while len(received) < LATENESS_TIMERS:
        reply = await call.read()
        received.append(now_ms() - reply.expiration.timer.deadline_ms)
        server_side.append(reply.expiration.lateness_ms)
    call.cancel()
    received.sort()
    server_side.sort()
    print(
        f"expiry lateness at the watcher, {LATENESS_TIMERS:,} timers over {SPREAD_MS / 1000:.0f} s: "
        f"p50 {percentile(received, 0.5):.2f} ms, p99 {percentile(received, 0.99):.2f} ms, "
        f"max {received[-1]:.2f} ms (fired by the service: p99 {percentile(server_side, 0.99):.0f} ms)"
    )


async def run() -> None:
    async with (
        bench_service("services.clock") as (service, backend),
        backend_channel(service.address, MEMORY_OWNER) as memory_channel,
        backend_channel(service.address, LATENESS_OWNER) as lateness_channel,
    ):
        stub = clock_pb2_grpc.ClockServiceStub(memory_channel)
        idle = rss_mib(service.pid)
        far = int(now_ms()) + 3_600_000
        arm_rate = await arm_many(stub, MEMORY_OWNER, [far + i for i in range(MEMORY_TIMERS)])
        print(f"arm calls: {arm_rate:,.0f} per second ({CONCURRENCY} in flight, {backend}, durable)")
        held = rss_mib(service.pid)
        print(
            f"memory: {idle:.1f} MiB before, {held:.1f} MiB with {MEMORY_TIMERS:,} armed timers "
            f"({(held - idle) * 1024 * 1024 / MEMORY_TIMERS:.0f} bytes per timer)"
        )
        await lateness(clock_pb2_grpc.ClockServiceStub(lateness_channel), arm_rate)
