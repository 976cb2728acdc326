"""The service runtime over real gRPC: health, reflection, errors, request ids, metrics and shutdown."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from prometheus_client import REGISTRY

from libs.runtime import RunningServer, ServiceConfig, start_server
from libs.runtime.server import garbage_collector_settled, settle_garbage_collector
from tests.libs.runtime.sample_service import SECRET, SERVICE, SampleService
from tests.support import free_port, wait_until_serving

ROOT = Path(__file__).resolve().parents[3]


def _identity(data: bytes) -> bytes:
    return data


def _config() -> ServiceConfig:
    # The sample service is no service of the platform's authorisation table: it runs without TLS (the
    # runtime's mutual TLS and authorisation are tested on the platform's own services).
    return ServiceConfig.from_env("sample", {"GRPC_PORT": "0", "METRICS_PORT": "0", "TLS_MODE": "plaintext"})


@pytest.fixture
async def running() -> AsyncIterator[RunningServer]:
    server = await start_server(SampleService(), _config())
    yield server
    await server.stop(grace=1)


def _call(channel: grpc.aio.Channel, method: str) -> grpc.aio.UnaryUnaryMultiCallable:
    return channel.unary_unary(
        f"/{SERVICE}/{method}", request_serializer=_identity, response_deserializer=_identity
    )


def _handled(method: str, code: str) -> float:
    labels = {"grpc_service": SERVICE, "grpc_method": method, "grpc_type": "unary", "grpc_code": code}
    return REGISTRY.get_sample_value("grpc_server_handled_total", labels) or 0.0


async def _handled_once_counted(method: str, code: str, expected: float) -> float:
    """The count, once it reaches ``expected`` or 5 s have passed: the server counts a refused call as
    it finishes it, which may be just after the client has read the status."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 5
    for _ in iter(lambda: _handled(method, code) < expected and loop.time() < give_up, False):
        await asyncio.sleep(0.01)
    return _handled(method, code)


async def test_health_reports_serving_for_the_server_and_each_service(running: RunningServer) -> None:
    async with grpc.aio.insecure_channel(running.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for name in ("", SERVICE):
            reply = await health.Check(health_pb2.HealthCheckRequest(service=name))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_reflection_lists_the_services(running: RunningServer) -> None:
    async with grpc.aio.insecure_channel(running.address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)

        async def requests() -> AsyncIterator[reflection_pb2.ServerReflectionRequest]:
            yield reflection_pb2.ServerReflectionRequest(list_services="")

        names = set()
        async for reply in stub.ServerReflectionInfo(requests()):
            names = {s.name for s in reply.list_services_response.service}
        assert {SERVICE, "grpc.health.v1.Health"} <= names


async def test_a_service_error_becomes_its_status_with_the_reason(running: RunningServer) -> None:
    before = _handled("Fail", "FAILED_PRECONDITION")
    async with grpc.aio.insecure_channel(running.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await _call(channel, "Fail")(b"")
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert caught.value.details() == "you cannot do that now"
    assert await _handled_once_counted("Fail", "FAILED_PRECONDITION", before + 1) == before + 1


async def test_an_unexpected_error_is_internal_and_leaks_nothing(running: RunningServer) -> None:
    async with grpc.aio.insecure_channel(running.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await _call(channel, "Crash")(b"", metadata=(("x-request-id", "req-crash-1"),))
    assert caught.value.code() == grpc.StatusCode.INTERNAL
    details = caught.value.details() or ""
    assert SECRET not in details
    assert "req-crash-1" in details


async def test_the_request_id_comes_back_and_metrics_count_the_call(running: RunningServer) -> None:
    before = _handled("Echo", "OK")
    async with grpc.aio.insecure_channel(running.address) as channel:
        call = _call(channel, "Echo")(b"hello", metadata=(("x-request-id", "req-42"),))
        assert await call == b"hello"
        assert ("x-request-id", "req-42") in tuple(await call.trailing_metadata() or ())
    assert _handled("Echo", "OK") == before + 1
    assert running.metrics_port is not None
    url = f"http://127.0.0.1:{running.metrics_port}/metrics"
    text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read().decode())
    assert 'grpc_server_handled_total{grpc_code="OK",grpc_method="Echo"' in text
    assert 'grpc_server_handling_seconds_bucket{grpc_method="Echo"' in text


async def test_stop_drains_in_flight_calls_refuses_new_ones_and_reports_not_serving() -> None:
    service = SampleService()
    server = await start_server(service, _config())
    async with grpc.aio.insecure_channel(server.address) as channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=SERVICE))
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
        in_flight = asyncio.ensure_future(_call(channel, "Sleep")(b"400"))
        stream = channel.unary_stream(
            f"/{SERVICE}/Ticks", request_serializer=_identity, response_deserializer=_identity
        )(b"5")
        await asyncio.sleep(0.1)
        stopping = asyncio.ensure_future(server.stop(grace=2))
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
        await asyncio.sleep(0.05)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _call(channel, "Echo")(b"late", timeout=2)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert await in_flight == b"slept"
        assert [tick async for tick in stream] == [b"0", b"1", b"2", b"3", b"4"]
        await stopping
    assert service.closed


@pytest.mark.parametrize(
    ("event_loop", "loop_module"),
    [(None, "uvloop"), ("uvloop", "uvloop"), ("asyncio", "asyncio.unix_events")],
)
async def test_sigterm_lets_calls_finish_logs_request_ids_and_exits_zero(
    tmp_path: Path, event_loop: str | None, loop_module: str
) -> None:
    """On either event loop (uvloop by default): serves, drains on SIGTERM, exits 0."""
    port = free_port()
    env = {
        **{name: value for name, value in os.environ.items() if name != "EVENT_LOOP"},
        **({"EVENT_LOOP": event_loop} if event_loop else {}),
        "GRPC_PORT": str(port),
        "METRICS_PORT": "-1",
        "LOG_FORMAT": "json",
        "LOG_LEVEL": "debug",
        "DATA_DIR": str(tmp_path),
        "TLS_MODE": "plaintext",
    }
    process = subprocess.Popen(  # noqa: ASYNC220 - started once, before any call is in flight
        [sys.executable, "-m", "tests.libs.runtime.sample_service"],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        address = f"127.0.0.1:{port}"
        await wait_until_serving(address)
        async with grpc.aio.insecure_channel(address) as channel:
            await _call(channel, "Echo")(b"x", metadata=(("x-request-id", "req-log-7"),))
            assert await _call(channel, "Loop")(b"") == loop_module.encode()
            slow = asyncio.ensure_future(_call(channel, "Sleep")(b"600"))
            await asyncio.sleep(0.2)
            process.send_signal(signal.SIGTERM)
            assert await slow == b"slept"
        assert await asyncio.to_thread(process.wait, 15) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert process.stderr is not None
    lines = [json.loads(line) for line in process.stderr.read().splitlines() if line.startswith("{")]
    echo_lines = [line for line in lines if line.get("request_id") == "req-log-7"]
    assert {line["event"] for line in echo_lines} == {"echo.handled", "rpc.finished"}
    assert all(line["service"] == "sample" for line in lines)
    assert any(line["event"] == "service.stopped" for line in lines)
    assert [line["event_loop"] for line in lines if line["event"] == "service.serving"] == [loop_module]


def test_a_serving_process_freezes_what_is_alive_and_collects_less_often() -> None:
    before = gc.get_threshold()
    survivor: list[list[int]] = [[1], [2]]  # alive when the service starts serving
    assert any(item is survivor for item in gc.get_objects())
    try:
        settle_garbage_collector((12_345, 7, 9))
        assert gc.get_threshold() == (12_345, 7, 9)
        assert gc.get_freeze_count() > 0
        # frozen: the cycle search no longer walks it (reference counting still frees it)
        assert not any(item is survivor for item in gc.get_objects())
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_a_settled_block_leaves_the_collector_as_it_was() -> None:
    """``garbage_collector_settled`` (the load generator's): frozen and slower inside the block; after
    it, even when the block fails, nothing is frozen and the thresholds are the ones before."""
    before = gc.get_threshold()
    survivor: list[list[int]] = [[3], [4]]
    inside: list[tuple[tuple[int, ...], bool]] = []

    def run() -> None:
        with garbage_collector_settled((23_456, 8, 10)):
            inside.append((gc.get_threshold(), any(item is survivor for item in gc.get_objects())))
            raise RuntimeError("the run failed")

    with pytest.raises(RuntimeError, match="the run failed"):
        run()
    assert inside == [((23_456, 8, 10), False)]  # settled, and the survivor frozen out of reach
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    assert any(item is survivor for item in gc.get_objects())


def test_keepalive_pings_are_not_faster_than_servers_accept() -> None:
    """A client pinging more often than a server allows gets its connection closed (GOAWAY
    ENHANCE_YOUR_CALM) after two strikes: one policy sets both sides, under the names grpc reads, and
    refuses intervals that would not agree. (Live, scaled down: tests/services/gateway/test_keepalive.py.)"""
    from libs.runtime.server import KEEPALIVE, KeepalivePolicy
    from services.gateway.service import channel_options

    server = dict(KEEPALIVE.server_options())
    client = dict(KEEPALIVE.channel_options())
    # The C core's GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS (the name once used here,
    # grpc.http2.min_recv_ping_interval_without_data_ms, is not one grpc knows: its 5-minute default applied).
    assert server["grpc.http2.min_ping_interval_without_data_ms"] == KEEPALIVE.min_ping_interval_ms
    assert client["grpc.keepalive_time_ms"] >= 2 * KEEPALIVE.min_ping_interval_ms  # type: ignore[operator]
    assert set(KEEPALIVE.channel_options()) <= set(channel_options())  # the gateway's shard channels use them
    with pytest.raises(ValueError, match="too close"):
        KeepalivePolicy(ping_interval_ms=15_000, min_ping_interval_ms=10_000)
