"""Trust boundaries between services, over real gRPC with mutual TLS (docs/security.md).

Every backend method is called three ways: with no client certificate, with the certificate of a service
the authorisation table does not allow, and with the certificate of one it does. Then the attacks a
review found from inside the cluster (against a live gin match made through matchmaking) are replayed
as every identity that is not the rightful caller, and must all be refused, changing nothing.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from google.protobuf import descriptor_pool, message_factory
from grpc_health.v1 import health_pb2
from prometheus_client import REGISTRY
from skillclassics.clock.v1 import clock_pb2
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc
from skillclassics.gateway.v1 import gateway_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm_pb
from skillclassics.matchmaking.v1 import matchmaking_pb2_grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.runtime import RunningServer
from libs.runtime.authz import ANYONE, POLICY, RULES, Rule
from libs.runtime.config import sqlite_url
from libs.runtime.pki import Authority
from tests.services.matchmaking.test_matchmaking_chance import gin_table
from tests.support import Backends, backend_channel, start_backends, start_fairness, tls_dir

BACKENDS = {
    "skillclassics.fairness.v1.FairnessService": "fairness",
    "skillclassics.clock.v1.ClockService": "clock",
    "skillclassics.matchmaking.v1.MatchmakingService": "matchmaking",
    "skillclassics.rules.v1.RulesService": "gin",
}
"""Each backend service, and the server of the platform below that serves it (rules: the gin shard)."""
CALLERS = ("gateway", "matchmaking", "fairness", "clock", "rules-gin-0", "operator")
"""Identities the matrix picks a caller from."""
MATCH = "gin.0.trustmatrix"
"""The match id the matrix's requests name (owned by rules-gin-0)."""
REFUSED = (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def platform(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Backends]:
    """Fairness, clock, matchmaking and the chess and gin rules shards, wired as in production."""
    backends = await start_backends(tmp_path_factory.mktemp("trust"))
    try:
        yield backends
    finally:
        await backends.stop()


def address_of(platform: Backends, server: str) -> str:
    running: RunningServer = getattr(platform, server)
    return running.address


# -- the matrix: every backend method, three callers ----------------------------------------------------


@dataclass(frozen=True)
class Method:
    path: str
    service: str
    name: str
    request: type[Any]
    client_streaming: bool
    server_streaming: bool


def backend_methods() -> list[Method]:
    methods = []
    pool = descriptor_pool.Default()
    for service_name in BACKENDS:
        service = pool.FindServiceByName(service_name)
        for method in service.methods:
            methods.append(
                Method(
                    f"/{service_name}/{method.name}",
                    service_name,
                    method.name,
                    message_factory.GetMessageClass(method.input_type),
                    method.client_streaming,
                    method.server_streaming,
                )
            )
    return methods


def request_for(method: Method, caller: str) -> Any:
    """A request that satisfies the method's constraints when ``caller`` is the rightful one."""
    request = method.request()
    fields = request.DESCRIPTOR.fields_by_name
    if "match_id" in fields:
        request.match_id = MATCH
    if "owner" in fields:
        request.owner = caller
    return request


async def call(address: str, method: Method, request: Any, channel: grpc.aio.Channel) -> grpc.StatusCode:
    """Call ``method`` once (a stream: until its first message or its end) and return the status."""
    serialize = type(request).SerializeToString
    try:
        if method.client_streaming:
            # Reader-writer style, not an empty request iterator: grpc's iterator consumer cancels the call
            # locally when closing the write side loses the race with a refused handshake, and the test
            # would see a CancelledError instead of the status the server gave.
            stream = channel.stream_stream(method.path, request_serializer=serialize)(timeout=3)
            with contextlib.suppress(Exception):  # grpc's batch error if the call has ended; read() says why
                await stream.done_writing()
            await stream.read()
            stream.cancel()
        elif method.server_streaming:
            reading = channel.unary_stream(method.path, request_serializer=serialize)(request, timeout=3)
            async for _ in reading:
                break
            reading.cancel()
        else:
            await channel.unary_unary(method.path, request_serializer=serialize)(request, timeout=3)
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


def allowed_caller(rule: Rule) -> str:
    if RULES in rule:
        return "rules-gin-0"
    return next(caller for caller in CALLERS if caller in rule)


def refused_caller(rule: Rule) -> str:
    for caller in CALLERS:
        kind = RULES if caller.startswith("rules-") else caller
        if kind not in rule:
            return caller
    raise AssertionError("every caller is allowed")


def refusals(caller: str, reason: str) -> float:
    total = 0.0
    for metric in REGISTRY.collect():
        if metric.name != "skillclassics_rpc_refused":
            continue
        for sample in metric.samples:
            labels = sample.labels
            if sample.name.endswith("_total") and (labels.get("reason"), labels.get("caller")) == (
                reason,
                caller,
            ):
                total += sample.value
    return total


def test_every_method_of_every_service_has_exactly_one_rule() -> None:
    pool = descriptor_pool.Default()
    services = [*BACKENDS, "skillclassics.gateway.v1.GatewayService", "grpc.health.v1.Health"]
    listed = {f"/{name}/{m.name}" for name in services for m in pool.FindServiceByName(name).methods}
    assert listed <= set(POLICY)
    reflection = {path for path in POLICY if "ServerReflection" in path}
    assert set(POLICY) - listed == reflection
    for path, rule in POLICY.items():
        is_public = path.startswith(("/skillclassics.gateway.", "/grpc.health."))
        assert (ANYONE in rule) == is_public, path  # no backend method is open without a certificate


@pytest.mark.parametrize("method", backend_methods(), ids=lambda m: f"{m.service.split('.')[1]}.{m.name}")
async def test_a_backend_method_needs_a_certificate_of_a_service_it_allows(
    platform: Backends, method: Method
) -> None:
    rule = POLICY[method.path]
    address = address_of(platform, BACKENDS[method.service])
    right, wrong = allowed_caller(rule), refused_caller(rule)

    ca = (tls_dir() / "ca.pem").read_bytes()
    anonymous = grpc.ssl_channel_credentials(root_certificates=ca)  # TLS, but no client certificate
    async with grpc.aio.secure_channel(
        address, anonymous, options=[("grpc.ssl_target_name_override", "localhost")]
    ) as channel:
        assert await call(address, method, request_for(method, right), channel) == grpc.StatusCode.UNAVAILABLE
    async with grpc.aio.insecure_channel(address) as channel:
        assert await call(address, method, request_for(method, right), channel) == grpc.StatusCode.UNAVAILABLE

    wrong_kind = RULES if wrong.startswith("rules-") else wrong
    before = refusals(wrong_kind, "not_allowed")
    async with backend_channel(address, wrong) as channel:
        assert (
            await call(address, method, request_for(method, wrong), channel)
            == grpc.StatusCode.PERMISSION_DENIED
        )
    assert refusals(wrong_kind, "not_allowed") == before + 1

    async with backend_channel(address, right) as channel:
        code = await call(address, method, request_for(method, right), channel)
    assert code not in (*REFUSED, grpc.StatusCode.UNAVAILABLE), f"{right} was refused {method.name}: {code}"


async def test_a_certificate_from_another_authority_cannot_connect(
    platform: Backends, tmp_path: Path
) -> None:
    """A workload that made its own CA and a certificate naming itself "gateway" gets no connection."""
    forger = Authority.create("not the platform's CA")
    certificate, key = forger.issue("gateway")
    ca = (tls_dir() / "ca.pem").read_bytes()
    credentials = grpc.ssl_channel_credentials(
        root_certificates=ca, private_key=key, certificate_chain=certificate
    )
    async with grpc.aio.secure_channel(
        platform.gin.address, credentials, options=[("grpc.ssl_target_name_override", "localhost")]
    ) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await rules_pb2_grpc.RulesServiceStub(channel).GetMatch(
                rules_pb2.GetMatchRequest(match_id=MATCH, seat=1), timeout=3
            )
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_a_client_refuses_a_server_that_is_not_the_service_it_called(platform: Backends) -> None:
    """The gateway calling "fairness" at an address where rules-gin answers does not get through."""
    async with backend_channel(platform.gin.address, "gateway", service="fairness") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await fairness_pb2_grpc.FairnessServiceStub(channel).Reveal(
                fairness_pb2.RevealRequest(match_id=MATCH), timeout=3
            )
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize(
    ("caller", "path", "request_message"),
    [
        ("rules-gin-1", "/skillclassics.fairness.v1.FairnessService/Draw", fairness_pb2.DrawRequest()),
        ("rules-chess-0", "/skillclassics.fairness.v1.FairnessService/Finish", fairness_pb2.FinishRequest()),
        (
            "rules-chess-0",
            "/skillclassics.matchmaking.v1.MatchmakingService/ReportResult",
            mm_pb.ReportResultRequest(),
        ),
        ("rules-gin-1", "/skillclassics.fairness.v1.FairnessService/Reveal", fairness_pb2.RevealRequest()),
    ],
)
async def test_only_the_shard_that_owns_a_match_may_act_on_it(
    platform: Backends, caller: str, path: str, request_message: Any
) -> None:
    request_message.match_id = MATCH
    server = "fairness" if "Fairness" in path else "matchmaking"
    before = refusals(RULES, "constraint")
    async with backend_channel(address_of(platform, server), caller) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await channel.unary_unary(path, request_serializer=type(request_message).SerializeToString)(
                request_message, timeout=3
            )
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "only rules-gin-0" in (refused.value.details() or "")
    assert refusals(RULES, "constraint") == before + 1


async def test_a_shard_uses_only_its_own_timers(platform: Backends) -> None:
    async with backend_channel(platform.clock.address, "rules-chess-0") as channel:
        arm = channel.unary_unary(
            "/skillclassics.clock.v1.ClockService/Arm",
            request_serializer=clock_pb2.ArmRequest.SerializeToString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await arm(clock_pb2.ArmRequest(owner="rules-gin-0", timer_id="t", deadline_ms=1), timeout=3)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "own timers" in (refused.value.details() or "")


async def test_the_health_port_serves_health_and_nothing_else(tmp_path: Path) -> None:
    fairness = await start_fairness(sqlite_url(tmp_path / "f.db"), tmp_path, HEALTH_PORT="0")
    try:
        assert fairness.health_port is not None
        async with grpc.aio.insecure_channel(f"127.0.0.1:{fairness.health_port}") as channel:
            check = channel.unary_unary(
                "/grpc.health.v1.Health/Check",
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )
            assert (
                await check(health_pb2.HealthCheckRequest())
            ).status == health_pb2.HealthCheckResponse.SERVING
            stub = fairness_pb2_grpc.FairnessServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.Commit(fairness_pb2.CommitRequest(match_id=MATCH, idempotency_key="k"), timeout=3)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            list_health = channel.unary_unary(
                "/grpc.health.v1.Health/List",
                request_serializer=health_pb2.HealthListRequest.SerializeToString,
            )
            with pytest.raises(grpc.aio.AioRpcError) as unimplemented:
                await list_health(health_pb2.HealthListRequest(), timeout=3)
            assert unimplemented.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        await fairness.stop(grace=0.5)


# -- the attacks, against a live gin match ----------------------------------------------------------------


@dataclass
class LiveMatch:
    match_id: str
    players: tuple[str, str]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def live_gin(platform: Backends) -> LiveMatch:
    """A gin match made the real way: a table opened and joined through matchmaking (as the gateway)."""
    host, guest = f"ann-{uuid.uuid4().hex[:6]}", f"ben-{uuid.uuid4().hex[:6]}"
    async with backend_channel(platform.matchmaking.address, "gateway") as channel:
        mm = matchmaking_pb2_grpc.MatchmakingServiceStub(channel)
        table = (await mm.CreateTable(gin_table(host))).table
        joined = (await mm.JoinTable(mm_pb.JoinTableRequest(player_id=guest, table_id=table.table_id))).table
    assert joined.match_id.startswith("gin.0.")
    return LiveMatch(joined.match_id, (host, guest))


ATTACKERS = ("operator", "matchmaking", "fairness", "clock", "rules-chess-0", "rules-gin-1")
"""Everything in the cluster that is not the rightful caller of the attacks below."""


async def refused_as(address: str, caller: str, path: str, request: Any) -> grpc.StatusCode:
    async with backend_channel(address, caller) as channel:
        try:
            await channel.unary_unary(path, request_serializer=type(request).SerializeToString)(
                request, timeout=3
            )
        except grpc.aio.AioRpcError as error:
            return error.code()
    return grpc.StatusCode.OK


async def view_of(platform: Backends, match_id: str) -> rules_pb2.GetMatchResponse:
    async with backend_channel(platform.gin.address, "gateway") as channel:
        stub = rules_pb2_grpc.RulesServiceStub(channel)
        reply: rules_pb2.GetMatchResponse = await stub.GetMatch(
            rules_pb2.GetMatchRequest(match_id=match_id, spectator=True), timeout=3
        )
        return reply


@pytest.mark.parametrize("attacker", ATTACKERS)
async def test_nobody_but_the_gateway_reads_a_hidden_hand_or_acts_for_a_seat(
    platform: Backends, live_gin: LiveMatch, attacker: str
) -> None:
    rules = "/skillclassics.rules.v1.RulesService/"
    hand = rules_pb2.GetMatchRequest(match_id=live_gin.match_id, seat=1)
    assert (
        await refused_as(platform.gin.address, attacker, rules + "GetMatch", hand)
        == grpc.StatusCode.PERMISSION_DENIED
    )
    resign = rules_pb2.SubmitActionRequest(
        match_id=live_gin.match_id,
        seat=1,
        idempotency_key=uuid.uuid4().hex,
        action=rules_pb2.Action(resign=rules_pb2.Resign()),
    )
    assert (
        await refused_as(platform.gin.address, attacker, rules + "SubmitAction", resign)
        == grpc.StatusCode.PERMISSION_DENIED
    )
    assert not (await view_of(platform, live_gin.match_id)).update.HasField("result")


@pytest.mark.parametrize("attacker", [*ATTACKERS, "gateway"])
async def test_nobody_but_the_owning_shard_draws_finishes_or_reveals_a_live_stream(
    platform: Backends, live_gin: LiveMatch, attacker: str
) -> None:
    fairness = "/skillclassics.fairness.v1.FairnessService/"
    ahead = fairness_pb2.DrawRequest(
        match_id=live_gin.match_id, stream="deal-2", kind=fairness_pb2.DRAW_KIND_SHUFFLE, count=52
    )
    assert (
        await refused_as(platform.fairness.address, attacker, fairness + "Draw", ahead)
        == grpc.StatusCode.PERMISSION_DENIED
    )
    finish = fairness_pb2.FinishRequest(match_id=live_gin.match_id)
    assert (
        await refused_as(platform.fairness.address, attacker, fairness + "Finish", finish)
        == grpc.StatusCode.PERMISSION_DENIED
    )
    reveal = fairness_pb2.RevealRequest(match_id=live_gin.match_id)
    code = await refused_as(platform.fairness.address, attacker, fairness + "Reveal", reveal)
    if attacker in ("gateway", "operator"):  # may ask for proofs, but a live stream has none to give
        assert code == grpc.StatusCode.FAILED_PRECONDITION
    else:
        assert code == grpc.StatusCode.PERMISSION_DENIED
    async with backend_channel(platform.fairness.address, "operator") as channel:
        status = await fairness_pb2_grpc.FairnessServiceStub(channel).GetCommitment(
            fairness_pb2.GetCommitmentRequest(match_id=live_gin.match_id), timeout=3
        )
    assert status.state != fairness_pb2.MATCH_STATE_FINISHED
    assert all(progress.stream != "deal-2" for progress in status.streams)


@pytest.mark.parametrize("attacker", [*ATTACKERS, "gateway"])
async def test_nobody_but_the_owning_shard_reports_a_result(
    platform: Backends, live_gin: LiveMatch, attacker: str
) -> None:
    forged = mm_pb.ReportResultRequest(
        match_id=live_gin.match_id,
        result=rules_pb2.Result(winner=0, termination=rules_pb2.TERMINATION_RESIGNATION),
    )
    path = "/skillclassics.matchmaking.v1.MatchmakingService/ReportResult"
    assert (
        await refused_as(platform.matchmaking.address, attacker, path, forged)
        == grpc.StatusCode.PERMISSION_DENIED
    )
    async with backend_channel(platform.matchmaking.address, "operator") as channel:
        mm = matchmaking_pb2_grpc.MatchmakingServiceStub(channel)
        history = await mm.GetMatchHistory(
            mm_pb.GetMatchHistoryRequest(player_id=live_gin.players[0]), timeout=3
        )
    [record] = [m for m in history.matches if m.match_id == live_gin.match_id]
    assert not record.HasField("result")


@pytest.mark.parametrize("attacker", ["fairness", "clock", "rules-gin-0", "matchmaking"])
async def test_a_players_history_is_served_only_to_the_gateway_and_operators(
    platform: Backends, live_gin: LiveMatch, attacker: str
) -> None:
    request = mm_pb.GetMatchHistoryRequest(player_id=live_gin.players[1])
    path = "/skillclassics.matchmaking.v1.MatchmakingService/GetMatchHistory"
    assert (
        await refused_as(platform.matchmaking.address, attacker, path, request)
        == grpc.StatusCode.PERMISSION_DENIED
    )
    for reader in ("gateway", "operator"):
        assert await refused_as(platform.matchmaking.address, reader, path, request) == grpc.StatusCode.OK


def test_the_gateway_protos_are_public() -> None:
    """The gateway's methods check the player's token themselves (tests/services/gateway)."""
    assert all(
        POLICY[f"/skillclassics.gateway.v1.GatewayService/{m.name}"] == {ANYONE: None}
        for m in gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"].methods
    )
