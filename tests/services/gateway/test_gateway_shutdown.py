"""What a player's unary call gets when it is cut short by a shutdown, over real gRPC: an in-process
gateway in front of a scripted rules shard that answers ``SubmitAction`` slowly (or cuts it short
itself). A call the gateway cuts short because it is shutting down, or that a backend cut short, ends
``UNAVAILABLE`` with a reason a player can read and the gateway's request id, never ``CANCELLED``
(which clients do not retry; these calls are safe to retry: actions carry idempotency keys)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from clients.player import REQUEST_ID_METADATA, GatewayError
from libs.runtime import RunningServer, Service, ServiceConfig, start_server
from tests.services.gateway.test_gateway_service import bearer, start_gateway
from tests.support import tls_settings

MATCH = "chess.0.slow"
SHUTTING_DOWN = "the gateway is shutting down; retry"


class ScriptedShard(rules_pb2_grpc.RulesServiceServicer):
    """A rules shard whose match ``chess.0.slow`` seats alice and bob, and whose ``SubmitAction`` takes
    ``delay_s`` (or, with ``cut``, ends ``CANCELLED``, as a shard shutting down ends the calls it had
    received but not begun)."""

    def __init__(self, delay_s: float = 0.0, *, cut: bool = False) -> None:
        self.delay_s = delay_s
        self.cut = cut
        self.submitted = asyncio.Event()

    async def GetMatch(
        self, request: rules_pb2.GetMatchRequest, context: grpc.aio.ServicerContext
    ) -> rules_pb2.GetMatchResponse:
        seats = [rules_pb2.SeatAssignment(seat=0, player_id="alice"), rules_pb2.SeatAssignment(seat=1)]
        seats[1].player_id = "bob"
        return rules_pb2.GetMatchResponse(seats=seats)

    async def SubmitAction(
        self, request: rules_pb2.SubmitActionRequest, context: grpc.aio.ServicerContext
    ) -> rules_pb2.SubmitActionResponse:
        self.submitted.set()
        if self.cut:  # what the caller of a server that is shutting down may see (grpc/grpc#41785)
            await context.abort(grpc.StatusCode.CANCELLED, "CANCELLED")
        await asyncio.sleep(self.delay_s)
        return rules_pb2.SubmitActionResponse(sequence=7)


class ScriptedShardService(Service):
    name = "rules-chess"

    def __init__(self, servicer: ScriptedShard) -> None:
        self.servicer = servicer

    @property
    def service_names(self) -> Sequence[str]:
        return [rules_pb2.DESCRIPTOR.services_by_name["RulesService"].full_name]

    async def start(self, server: grpc.aio.Server) -> None:
        rules_pb2_grpc.add_RulesServiceServicer_to_server(self.servicer, server)


@dataclass
class Door:
    gateway: RunningServer
    stub: gateway_pb2_grpc.GatewayServiceStub
    shard: ScriptedShard

    def submit(self) -> grpc.aio.UnaryUnaryCall:
        request = pb.SubmitActionRequest(
            match_id=MATCH, idempotency_key="k1", action=rules_pb2.Action(resign=rules_pb2.Resign())
        )
        return self.stub.SubmitAction(request, metadata=bearer("alice"), timeout=30)


@pytest.fixture
async def scripted(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Door]:
    # The stubs' methods it does not serve are UNIMPLEMENTED.
    shard = ScriptedShard(**getattr(request, "param", {}))  # type: ignore[abstract]
    config = ServiceConfig.from_env(
        "rules-chess", {"GRPC_PORT": "0", "METRICS_PORT": "-1", "HEALTH_PORT": "-1", **tls_settings()}
    )
    rules = await start_server(ScriptedShardService(shard), config)
    gateway = await start_gateway(
        tmp_path, {"RULES_CHESS_ADDRESSES": rules.address, "GATEWAY_BACKEND_TIMEOUT_MS": "20000"}
    )
    try:
        async with grpc.aio.insecure_channel(gateway.address) as channel:
            yield Door(gateway, gateway_pb2_grpc.GatewayServiceStub(channel), shard)
    finally:
        await gateway.stop(grace=0.1)
        await rules.stop(grace=0.1)


async def refusal(call: grpc.aio.UnaryUnaryCall) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


@pytest.mark.parametrize("scripted", [{"delay_s": 5.0}], indirect=True)
async def test_a_submit_action_the_gateways_shutdown_cuts_short_is_unavailable_retry(scripted: Door) -> None:
    call = scripted.submit()
    await scripted.shard.submitted.wait()
    started = time.monotonic()
    stopping = asyncio.create_task(scripted.gateway.stop(grace=1.5))
    error = await refusal(call)
    await stopping
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error.details()
    assert error.details() == SHUTTING_DOWN
    assert time.monotonic() - started < 1.5  # answered before grpc cancels what is left at the grace's end
    refused = GatewayError.from_rpc(error)
    assert refused.reached  # the gateway's own answer (its request id), not a lost connection
    assert REQUEST_ID_METADATA in dict(error.trailing_metadata() or ())


@pytest.mark.parametrize("scripted", [{"delay_s": 0.5}], indirect=True)
async def test_a_submit_action_answered_within_the_grace_gets_its_answer(scripted: Door) -> None:
    call = scripted.submit()
    await scripted.shard.submitted.wait()
    stopping = asyncio.create_task(scripted.gateway.stop(grace=3.0))
    assert (await call).sequence == 7
    await stopping


@pytest.mark.parametrize("scripted", [{"cut": True}], indirect=True)
async def test_a_call_a_backend_cuts_short_is_unavailable_naming_it(scripted: Door) -> None:
    error = await refusal(scripted.submit())
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error.details()
    assert "rules-chess shard 0 is unavailable" in (error.details() or "")
    assert GatewayError.from_rpc(error).backend == "rules-chess shard 0"
