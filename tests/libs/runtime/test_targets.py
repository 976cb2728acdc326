"""Channel targets naming several replicas: a list of IP addresses, or a dns:/// name, balanced per call."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from libs.runtime.config import ConfigError
from libs.runtime.targets import RETRY_ATTEMPTS, ROUND_ROBIN, replica_target, retry_policy
from libs.runtime.tls import TransportSecurity
from services.clock.service import ClockService
from tests.support import backend_channel, start_in_process


def test_one_address_is_left_as_it_is() -> None:
    assert replica_target("matchmaking:50051") == ("matchmaking:50051", [])
    assert replica_target(" 127.0.0.1:50070 ") == ("127.0.0.1:50070", [])


def test_a_list_of_ip_addresses_is_balanced_round_robin() -> None:
    target, options = replica_target("127.0.0.1:50070, 127.0.0.1:50270")
    assert target == "ipv4:127.0.0.1:50070,127.0.0.1:50270"
    assert options == [("grpc.service_config", ROUND_ROBIN)]
    assert json.loads(ROUND_ROBIN) == {"loadBalancingConfig": [{"round_robin": {}}]}
    assert replica_target("[::1]:1,[::1]:2")[0] == "ipv6:[::1]:1,[::1]:2"


def test_a_dns_target_is_balanced_over_what_the_name_resolves_to() -> None:
    assert replica_target("dns:///matchmaking-replicas:50051") == (
        "dns:///matchmaking-replicas:50051",
        [("grpc.service_config", ROUND_ROBIN)],
    )


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("mm-0:50051,mm-1:50051", "names a host"),
        ("127.0.0.1:1,127.0.0.1", "is not host:port"),
        ("127.0.0.1:1,[::1]:2", "mixes IPv4 and IPv6"),
    ],
)
def test_a_list_that_cannot_be_balanced_is_a_configuration_error(address: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        replica_target(address)


async def _server() -> tuple[grpc.aio.Server, int, health.aio.HealthServicer]:
    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port, servicer


async def test_calls_are_spread_over_every_replica_and_skip_one_that_is_gone() -> None:
    """Two servers behind one channel: calls reach both; once one is stopped, every call still succeeds
    (on the other) after the calls that were on it."""
    first, first_port, first_health = await _server()
    second, second_port, second_health = await _server()
    await first_health.set("which", health_pb2.HealthCheckResponse.SERVING)
    await second_health.set("which", health_pb2.HealthCheckResponse.NOT_SERVING)
    channel = TransportSecurity.plaintext().channel(f"127.0.0.1:{first_port},127.0.0.1:{second_port}", "test")
    try:
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest(service="which")
        seen = {(await stub.Check(request, wait_for_ready=True)).status for _ in range(20)}
        assert seen == {health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING}
        await first.stop(0.2)  # (graceful: grpc logs an abrupt one's GOAWAY at every client)
        answers, failed = [], []
        for _ in range(20):
            try:
                answers.append((await stub.Check(request, timeout=2)).status)
            except grpc.aio.AioRpcError as error:  # a call that was on the stopped one as it went
                failed.append(error.code())
        assert set(failed) <= {grpc.StatusCode.UNAVAILABLE}
        assert answers[-10:] == [health_pb2.HealthCheckResponse.NOT_SERVING] * 10
    finally:
        await channel.close()
        await first.stop(0.2)
        await second.stop(0.2)


def test_retry_policies_join_the_service_config_with_or_without_balancing() -> None:
    policy = retry_policy("pkg.Svc", ["Read", "Put"])
    read, put = {"service": "pkg.Svc", "method": "Read"}, {"service": "pkg.Svc", "method": "Put"}
    assert policy["name"] == [read, put]
    assert policy["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"]  # type: ignore[index]
    assert policy["retryPolicy"]["maxAttempts"] == RETRY_ATTEMPTS  # type: ignore[index]
    _, options = replica_target("127.0.0.1:1,127.0.0.1:2", [policy])
    config = json.loads(str(dict(options)["grpc.service_config"]))
    assert config == {"loadBalancingConfig": [{"round_robin": {}}], "methodConfig": [policy]}
    _, single = replica_target("matchmaking:50051", [policy])
    assert json.loads(str(dict(single)["grpc.service_config"])) == {"methodConfig": [policy]}


class _Hanging(health.aio.HealthServicer):  # type: ignore[misc]
    """A replica whose Check never answers (the calls on it are in flight when it goes)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()

    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        self.entered.set()
        await asyncio.sleep(60)
        return health_pb2.HealthCheckResponse()


@pytest.mark.parametrize("retried", [True, False], ids=["retried", "not-retried"])
async def test_a_call_in_flight_on_a_replica_that_goes_is_tried_again_on_the_next(retried: bool) -> None:
    """Calls spread over a replica that hangs and one that answers; the hanging one goes away with calls
    on it (its connections cut, as when its process is killed). A method with a retry policy ends well,
    answered by the other replica; one without ends ``UNAVAILABLE``, as those calls did before."""
    hanging = _Hanging()
    gone = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(hanging, gone)
    gone_port = gone.add_insecure_port("127.0.0.1:0")
    await gone.start()
    other, other_port, _ = await _server()
    retry = [retry_policy("grpc.health.v1.Health", ["Check"])] if retried else []
    channel = TransportSecurity.plaintext().channel(
        f"127.0.0.1:{gone_port},127.0.0.1:{other_port}", "test", retry=retry
    )
    try:
        stub = health_pb2_grpc.HealthStub(channel)
        await channel.channel_ready()
        calls: list[asyncio.Future[health_pb2.HealthCheckResponse]] = []
        for _ in range(40):  # calls until some are on the hanging replica (the other answers at once)
            calls.append(asyncio.ensure_future(stub.Check(health_pb2.HealthCheckRequest(), timeout=10)))
            await asyncio.sleep(0.05)
            if hanging.entered.is_set() and len(calls) >= 4:
                break
        in_flight = [call for call in calls if not call.done()]
        assert in_flight, "no call reached the hanging replica"
        await gone.stop(None)  # at once: the calls on it are cut
        ends = await asyncio.gather(*calls, return_exceptions=True)
        codes = [e.code() if isinstance(e, grpc.aio.AioRpcError) else grpc.StatusCode.OK for e in ends]
        if retried:
            assert codes == [grpc.StatusCode.OK] * len(calls)
        else:
            assert grpc.StatusCode.UNAVAILABLE in codes
            assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE}
    finally:
        await channel.close()
        await gone.stop(None)
        await other.stop(0.2)


async def test_a_server_with_a_connection_age_closes_connections_but_not_the_calls_on_them(
    tmp_path: Path,
) -> None:
    """GRPC_MAX_CONNECTION_AGE_MS: a stream opened before the age passes goes on past it, and unary calls
    after it succeed on a new connection (the client re-resolved and connected again)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'clock.db'}"
    running = await start_in_process("clock", ClockService, url, GRPC_MAX_CONNECTION_AGE_MS="300")
    try:
        async with backend_channel(running.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            watch = stub.Watch(health_pb2.HealthCheckRequest())
            first = await watch.read()
            assert first.status == health_pb2.HealthCheckResponse.SERVING
            for _ in range(8):  # 1.6 s: five connection ages
                await asyncio.sleep(0.2)
                reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
            assert not watch.done()  # the stream on the first connection is still open
            watch.cancel()
    finally:
        await running.stop(grace=0.5)
