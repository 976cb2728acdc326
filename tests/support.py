"""Helpers shared by tests: free ports, waiting for a service to serve, channels."""

from __future__ import annotations

import asyncio
import socket

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_until_serving(address: str, within: float = 20.0, service: str = "") -> None:
    """Poll the gRPC health service at ``address`` until it answers SERVING."""
    deadline = asyncio.get_running_loop().time() + within
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"{address} did not report SERVING within {within} s")
            await asyncio.sleep(0.05)
