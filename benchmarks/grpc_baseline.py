"""The yardstick: raw loopback gRPC unary calls per second on this machine, in this run.

A bare ``grpc.aio`` server (only the standard health service, no interceptor, no database) runs in its own
process; one client process keeps ``CONCURRENCY`` calls in flight for ``SECONDS``. Every other figure
of the platform (end-to-end actions per second, issue #8's targets) is read against this one.

Run alone: ``python -m benchmarks grpc`` (the server: ``python -m benchmarks.grpc_baseline serve PORT``).
"""

from __future__ import annotations

import asyncio
import sys
import time

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from benchmarks.support import percentile
from libs.runtime import eventloop
from tests.support import free_port

CONCURRENCY = 32
SECONDS = 5.0


async def serve(port: int) -> None:
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


async def timed_checks(
    channel: grpc.aio.Channel, concurrency: int, seconds: float, warm_up: int = 200
) -> tuple[list[float], float]:
    """Health ``Check`` calls on ``channel``, ``concurrency`` in flight for ``seconds`` after ``warm_up``
    calls (connection, code paths): each call's latency (ms, sorted) and the seconds they took."""
    stub = health_pb2_grpc.HealthStub(channel)
    request = health_pb2.HealthCheckRequest()
    for _ in range(warm_up):
        await stub.Check(request)
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def caller() -> None:
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            await stub.Check(request)
            latencies.append((time.perf_counter() - started) * 1000)

    began = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    elapsed = time.perf_counter() - began
    latencies.sort()
    return latencies, elapsed


async def measure(address: str, concurrency: int = CONCURRENCY, seconds: float = SECONDS) -> dict[str, float]:
    """Calls per second and latency percentiles (ms) of health ``Check`` against ``address``."""
    async with grpc.aio.insecure_channel(address) as channel:
        latencies, elapsed = await timed_checks(channel, concurrency, seconds)
    return {
        "rate": len(latencies) / elapsed,
        "p50": percentile(latencies, 0.50),
        "p99": percentile(latencies, 0.99),
    }


async def baseline_rate(concurrency: int = CONCURRENCY, seconds: float = SECONDS) -> dict[str, float]:
    """Start the bare server as its own process and measure it."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.grpc_baseline", "serve", str(port)
    )
    try:
        address = f"127.0.0.1:{port}"
        async with grpc.aio.insecure_channel(address) as channel:
            await asyncio.wait_for(channel.channel_ready(), timeout=20)
        return await measure(address, concurrency, seconds)
    finally:
        process.terminate()
        await process.wait()


async def run() -> None:
    figures = await baseline_rate()
    print(
        f"raw loopback gRPC unary (health Check, bare grpc.aio server in its own process, "
        f"{CONCURRENCY} calls in flight, {SECONDS:g} s): {figures['rate']:,.0f} calls/s, "
        f"p50 {figures['p50']:.2f} ms, p99 {figures['p99']:.2f} ms"
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        eventloop.run(serve(int(sys.argv[2])))
    else:
        eventloop.run(run())
