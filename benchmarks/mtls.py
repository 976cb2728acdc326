"""What mutual TLS costs: the same loopback gRPC calls in plaintext and over mutual TLS, in one run.

A bare ``grpc.aio`` server (the health service only, no interceptor) runs in its own process, once
listening in plaintext and once requiring a client certificate (the platform's own credentials:
:class:`libs.runtime.tls.TransportSecurity`, development PKI), with one client process keeping
``CONCURRENCY`` calls in flight for ``SECONDS`` each way. Printed: calls per second, latency p50 and p99,
and the CPU both processes spent per call, then the difference, which is what mutual TLS adds to every
call between two services (the handshake is once per connection, and connections are long-lived).

The cost per player action on the whole platform is in :mod:`benchmarks.gateway_e2e` and
:mod:`benchmarks.platform_load`, which run the stack with mutual TLS on as it always runs
(``BENCH_TLS_MODE=plaintext`` runs them without, for a before/after on the same machine).

Run alone: ``python -m benchmarks mtls``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2_grpc

from benchmarks.grpc_baseline import timed_checks
from benchmarks.support import percentile
from clients.load.procstat import read_sample
from libs.runtime.identity import Identity
from libs.runtime.pki import ensure_development_pki
from libs.runtime.tls import TransportSecurity
from tests.support import free_port

CONCURRENCY = 16
SECONDS = 5.0


def transport(pki: Path, identity: str) -> TransportSecurity:
    return TransportSecurity("mtls", Identity.parse(identity), development_dir=pki)


async def serve(port: int, pki: str) -> None:
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    if pki:
        server.add_secure_port(f"127.0.0.1:{port}", transport(Path(pki), "fairness").server_credentials())
    else:
        server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


async def measure(channel: grpc.aio.Channel, server_pid: int) -> dict[str, float]:
    """The rate, latency and CPU per call (both processes) of health ``Check`` calls on ``channel``."""
    await timed_checks(channel, 1, 0.0, warm_up=500)  # the handshake and the code paths, not counted
    server_before, client_before = _cpu(server_pid), time.process_time()
    latencies, elapsed = await timed_checks(channel, CONCURRENCY, SECONDS, warm_up=0)
    cpu = (_cpu(server_pid) - server_before) + (time.process_time() - client_before)
    return {
        "rate": len(latencies) / elapsed,
        "p50": percentile(latencies, 0.50),
        "p99": percentile(latencies, 0.99),
        "cpu_us": cpu / len(latencies) * 1e6,
    }


def _cpu(pid: int) -> float:
    sample = read_sample(pid)
    return sample.cpu_s if sample is not None else 0.0


async def one_way(pki: Path | None) -> dict[str, float]:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.mtls", "serve", str(port), str(pki or "")
    )
    address = f"127.0.0.1:{port}"
    try:
        if pki is None:
            channel = grpc.aio.insecure_channel(address)
        else:
            channel = transport(pki, "gateway").channel(address, "fairness")
        async with channel:
            await asyncio.wait_for(channel.channel_ready(), timeout=20)
            return await measure(channel, process.pid)
    finally:
        process.terminate()
        await process.wait()


async def run() -> None:
    with tempfile.TemporaryDirectory() as folder:
        pki = Path(folder) / "pki"
        ensure_development_pki(pki, ["gateway", "fairness"])
        plain = await one_way(None)
        mutual = await one_way(pki)
    print(
        "mutual TLS on loopback gRPC (health Check, bare server in its own process, "
        f"{CONCURRENCY} in flight):"
    )
    for name, figures in (("plaintext", plain), ("mutual TLS", mutual)):
        print(
            f"  {name:<10} {figures['rate']:>8,.0f} calls/s  p50 {figures['p50']:.2f} ms  "
            f"p99 {figures['p99']:.2f} ms  CPU {figures['cpu_us']:.0f} µs/call (client + server)"
        )
    extra = mutual["cpu_us"] - plain["cpu_us"]
    rate = 100 * (mutual["rate"] / plain["rate"] - 1)
    print(
        f"  => mutual TLS adds {extra:.0f} µs of CPU per call ({100 * extra / plain['cpu_us']:+.0f} %), "
        f"p50 {mutual['p50'] - plain['p50']:+.2f} ms, rate {rate:+.0f} %"
    )


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        asyncio.run(serve(int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else ""))
    else:
        asyncio.run(run())


if __name__ == "__main__":
    main()
