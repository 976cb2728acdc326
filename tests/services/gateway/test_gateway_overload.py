"""Past capacity the gateway sheds load at once with RESOURCE_EXHAUSTED, new work first, and stays
responsive for the matches being played."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.rules.v1 import rules_pb2

from libs.runtime.errors import Problem, ResourceExhausted
from services.gateway.limits import Admission, Priority
from services.gateway.service import GatewayService
from tests.services.gateway.test_gateway_service import bearer, retry_guidance_ms, start_gateway


def test_new_work_is_refused_first_and_play_keeps_the_last_quarter() -> None:
    admission = Admission(max_calls=8, max_streams=4)
    with contextlib.ExitStack() as held:
        for _ in range(6):  # 75 % of 8
            held.enter_context(admission.call(Priority.NEW_WORK))
        with pytest.raises(ResourceExhausted, match="matches in progress come first"):
            held.enter_context(admission.call(Priority.NEW_WORK))
        held.enter_context(admission.call(Priority.PLAY))
        held.enter_context(admission.call(Priority.PLAY))
        assert admission.calls == 8
        with pytest.raises(ResourceExhausted, match="at capacity"):
            held.enter_context(admission.call(Priority.PLAY))
    assert admission.calls == 0  # every admitted call gave its place back, refused ones took none
    with contextlib.ExitStack() as streams:
        for priority in (Priority.PLAY, Priority.NEW_WORK, Priority.PLAY):
            streams.enter_context(admission.stream(priority))
        with pytest.raises(ResourceExhausted, match="streams"):
            streams.enter_context(admission.stream(Priority.NEW_WORK))
    assert admission.streams == 0


def test_a_failing_call_gives_its_place_back() -> None:
    admission = Admission(max_calls=1, max_streams=1)
    with pytest.raises(RuntimeError), admission.call(Priority.PLAY):
        raise RuntimeError("the backend broke")
    with admission.call(Priority.PLAY):
        assert admission.calls == 1


@contextlib.asynccontextmanager
async def silent_backend() -> AsyncIterator[str]:
    """A TCP listener that accepts connections and never answers: calls to it hang until their deadline."""
    held: list[asyncio.StreamWriter] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        for writer in held:
            writer.close()
        server.close()


async def test_at_capacity_new_work_is_shed_at_once_and_play_calls_still_get_through(tmp_path: Path) -> None:
    async with silent_backend() as matchmaking:
        gateway = await start_gateway(
            tmp_path,
            {
                "MATCHMAKING_ADDRESS": matchmaking,
                "GATEWAY_MAX_CALLS": "4",  # new work is admitted while fewer than 3 are in flight
                "GATEWAY_BACKEND_TIMEOUT_MS": "3000",
            },
        )
        try:
            async with grpc.aio.insecure_channel(gateway.address) as channel:
                gw = gateway_pb2_grpc.GatewayServiceStub(channel)
                lobby = [
                    asyncio.ensure_future(
                        gw.ListTables(pb.ListTablesRequest(family="chess"), metadata=bearer(p))
                    )
                    for p in ("p1", "p2", "p3")
                ]
                # Until all three wait on the silent backend: a fixed pause was not enough on a busy
                # machine, where the CreateTable below could reach the gateway before the third of them.
                service = gateway.service
                assert isinstance(service, GatewayService)
                assert service.servicer is not None
                for _ in range(1000):  # (10 s at most)
                    if service.servicer.admission.calls >= 3:
                        break
                    await asyncio.sleep(0.01)
                assert service.servicer.admission.calls == 3
                loop = asyncio.get_running_loop()
                started = loop.time()
                table = pb.CreateTableRequest(
                    family="chess",
                    time_control=rules_pb2.TimeControl(base_ms=300_000),
                    currency="USD",
                    idempotency_key="t1",
                )
                with pytest.raises(grpc.aio.AioRpcError) as shed:
                    await gw.CreateTable(table, metadata=bearer("p4"))
                assert shed.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert Problem.from_rpc_error(shed.value).reason == "OVERLOADED"
                assert "matches in progress come first" in (shed.value.details() or "")
                assert retry_guidance_ms(shed.value) == 200  # machine-readable, as in its words
                assert loop.time() - started < 1.0  # refused at once, not queued behind the stuck calls
                # A play call is still admitted (it fails for its own reason: no rules shard here).
                with pytest.raises(grpc.aio.AioRpcError) as played:
                    await gw.GetMatch(pb.GetMatchRequest(match_id="chess.0.x"), metadata=bearer("p5"))
                assert played.value.code() == grpc.StatusCode.NOT_FOUND
                for call in lobby:
                    with pytest.raises(grpc.aio.AioRpcError) as stuck:
                        await call
                    assert stuck.value.code() == grpc.StatusCode.UNAVAILABLE  # the backend deadline, named
                # Capacity is back once they ended.
                with pytest.raises(grpc.aio.AioRpcError) as later:
                    await gw.CreateTable(pb.CreateTableRequest(family="chess"), metadata=bearer("p4"))
                assert later.value.code() != grpc.StatusCode.RESOURCE_EXHAUSTED
        finally:
            await gateway.stop(grace=0.5)
