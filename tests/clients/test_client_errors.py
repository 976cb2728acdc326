"""What the player library and the command line say when something is down, and how they retry
``UNAVAILABLE`` (issue #17): a gateway that cannot be reached is not the same as a gateway that answered
that a service behind it is down, and a refusal that says when to retry is retried then, within bounds,
for calls that are safe to repeat.

Through real gRPC: a stack in this process (SQLite) whose fairness service is stopped, no gateway at all,
and a stand-in gateway that refuses with retry guidance as the real one relays it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from skillclassics.errors.v1 import errors_pb2
from skillclassics.gateway.v1 import gateway_pb2 as gw
from skillclassics.rules.v1 import rules_pb2

from clients.cli.main import main_async
from clients.load.harness import OutageTolerance
from clients.player import (
    GatewayError,
    PlayerSession,
    RetryPolicy,
    _Attempts,
    _Reopening,
    development_token,
    expires_at_ms,
)
from libs.runtime import RunningServer
from libs.runtime.config import sqlite_url
from libs.runtime.errors import SERVICE_METADATA, ErrorReason, Unavailable, status_trailers
from services.gateway.service import GatewayService
from tests.support import Backends, free_port, start_backends, start_in_process

GIN = rules_pb2.TimeControl(base_ms=300_000)
_GATEWAY = "skillclassics.gateway.v1.GatewayService"


class _Stack:
    def __init__(self, backends: Backends, gateway: RunningServer, data_dir: Path) -> None:
        self.backends = backends
        self.gateway = gateway
        self.env = {"DATA_DIR": str(data_dir)}

    def token(self, player: str) -> str:
        return development_token(player, self.env)


@pytest_asyncio.fixture(loop_scope="session")
async def stack(tmp_path: Path) -> AsyncIterator[_Stack]:
    backends = await start_backends(tmp_path)
    try:
        gateway = await start_in_process(
            "gateway",
            GatewayService,
            sqlite_url(tmp_path / "gateway.db"),
            backends.gateway_env(),
            DATA_DIR=str(tmp_path),
        )
        try:
            yield _Stack(backends, gateway, tmp_path)
        finally:
            await gateway.stop(grace=0.5)
    finally:
        await backends.stop()


async def test_a_backend_that_is_down_is_named_not_taken_for_the_gateway(
    stack: _Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    async with PlayerSession(stack.gateway.address, stack.token("host-1")) as host:
        table = await host.create_table("gin", time_control=GIN)
    # Joining a gin table needs fairness's commitment to the match's seed: with fairness down, the
    # gateway answers that matchmaking could not make the match, and why.
    await stack.backends.fairness.stop(grace=0.1)

    async with PlayerSession(stack.gateway.address, stack.token("guest-1")) as guest:
        with pytest.raises(GatewayError) as caught:
            await guest.join_table(table.table_id)
    refused = caught.value
    assert refused.code == grpc.StatusCode.UNAVAILABLE
    assert refused.reached
    assert refused.backend == "matchmaking"
    assert refused.details.startswith("matchmaking is unavailable: the fairness service could not commit")
    assert "cannot reach the gateway" not in refused.details

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("GATEWAY_ADDRESS", stack.gateway.address)
    monkeypatch.setenv("SKILLCLASSICS_TOKEN", stack.token("guest-2"))
    assert await main_async(["join", table.table_id]) == 1
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("skillclassics join:")]
    assert len(said) == 1, said
    assert said[0].startswith(
        "skillclassics join: error: UNAVAILABLE (BACKEND_UNAVAILABLE): matchmaking is unavailable: "
        "the fairness service could not commit to a seed for a gin match"
    )
    assert "cannot reach the gateway" not in said[0]


async def test_no_gateway_is_reported_as_a_gateway_that_cannot_be_reached(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    async with PlayerSession(nowhere, "t", retry=RetryPolicy(unavailable_attempts=1)) as lost:
        with pytest.raises(GatewayError) as caught:
            await lost.whoami()
    assert not caught.value.reached
    assert caught.value.backend is None
    assert caught.value.details == f"cannot reach the gateway at {nowhere} (is the stack running? `make run`)"

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("GATEWAY_ADDRESS", nowhere)
    monkeypatch.setenv("SKILLCLASSICS_TOKEN", "t")
    assert await main_async(["join", "t-1"]) == 1
    assert f"skillclassics join: error: UNAVAILABLE: cannot reach the gateway at {nowhere}" in (
        capsys.readouterr().err
    )


# -- retrying as the refusal asks -------------------------------------------------------------------------


class _Refusing:
    """A stand-in gateway: ``WhoAmI`` and ``JoinTable`` refused ``UNAVAILABLE`` the first ``refusals``
    times, with retry guidance as the real gateway relays a backend's (``retry-after-ms``, ``RetryInfo``,
    the request id), then answered."""

    def __init__(self, refusals: int, wait_ms: int) -> None:
        self.refusals = refusals
        self.wait_ms = wait_ms
        self.calls: dict[str, int] = {}
        self.server = grpc.aio.server()
        handlers = {
            "WhoAmI": grpc.unary_unary_rpc_method_handler(
                self._whoami, gw.WhoAmIRequest.FromString, gw.WhoAmIResponse.SerializeToString
            ),
            "JoinTable": grpc.unary_unary_rpc_method_handler(
                self._join, gw.JoinTableRequest.FromString, gw.JoinTableResponse.SerializeToString
            ),
        }
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_GATEWAY, handlers),))
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"

    async def _refuse_or(self, name: str, context: grpc.aio.ServicerContext) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if self.calls[name] <= self.refusals:
            reason = (
                f"matchmaking is unavailable: the database is unavailable (x); retry in {self.wait_ms} ms"
            )
            refusal = Unavailable(
                reason,
                reason=ErrorReason.ERROR_REASON_BACKEND_UNAVAILABLE,
                retry_after_ms=self.wait_ms,
                metadata={SERVICE_METADATA: "matchmaking"},
            )
            trailers = (("x-request-id", "r1"), *status_trailers(refusal))
            await context.abort(refusal.code, reason, trailers)

    async def _whoami(
        self, request: gw.WhoAmIRequest, context: grpc.aio.ServicerContext
    ) -> gw.WhoAmIResponse:
        await self._refuse_or("WhoAmI", context)
        return gw.WhoAmIResponse(player_id="p")

    async def _join(
        self, request: gw.JoinTableRequest, context: grpc.aio.ServicerContext
    ) -> gw.JoinTableResponse:
        await self._refuse_or("JoinTable", context)
        return gw.JoinTableResponse()


@pytest_asyncio.fixture(loop_scope="session")
async def refusing() -> AsyncIterator[_Refusing]:
    gateway = _Refusing(refusals=3, wait_ms=100)
    await gateway.server.start()
    try:
        yield gateway
    finally:
        await gateway.server.stop(0)


async def test_a_repeatable_call_is_retried_after_the_wait_the_refusal_asks_for(refusing: _Refusing) -> None:
    async with PlayerSession(refusing.address, "t") as session:
        began = time.monotonic()
        assert (await session.whoami()).player_id == "p"
        assert time.monotonic() - began >= 0.3  # three refusals, each asking for 100 ms
    assert refusing.calls["WhoAmI"] == 4


async def test_a_call_that_is_not_repeatable_is_not_retried_and_keeps_the_guidance(
    refusing: _Refusing,
) -> None:
    async with PlayerSession(refusing.address, "t") as session:
        with pytest.raises(GatewayError) as caught:
            await session.join_table("t-1")
    assert refusing.calls["JoinTable"] == 1
    assert caught.value.retry_after_s == pytest.approx(0.1)
    assert caught.value.reached
    assert caught.value.backend == "matchmaking"


async def test_the_guided_waits_are_bounded(refusing: _Refusing) -> None:
    policy = RetryPolicy(unavailable_wait_s=0.15)  # room for one 100 ms wait, not two
    async with PlayerSession(refusing.address, "t", retry=policy) as session:
        with pytest.raises(GatewayError, match="retry in 100 ms"):
            await session.whoami()
    assert refusing.calls["WhoAmI"] == 2


def test_a_rate_limit_is_waited_out_as_its_metadata_asks_before_its_words() -> None:
    exhausted = grpc.StatusCode.RESOURCE_EXHAUSTED
    attempts = _Attempts(RetryPolicy(), repeatable=False)  # any call is retried after a rate limit
    # The gateway's retry-after-ms (or RetryInfo), as GatewayError.from_rpc reads it, comes first...
    guided = GatewayError(exhausted, "too many calls: at most 20/s (bursts of 40)", retry_after_s=0.03)
    assert attempts.wait_after(guided) == pytest.approx(0.03)
    # ... as does a refusal inside a stream, from its answer's details; the words are never read.
    answer = gw.PlayAnswer(
        idempotency_key="k",
        code=8,
        message="too many actions; retry in 999 ms",
        details=errors_pb2.ErrorDetails(reason=ErrorReason.ERROR_REASON_RATE_LIMITED, retry_after_ms=40),
    )
    streamed = GatewayError.from_answer(answer)
    assert (streamed.code, streamed.reason) == (exhausted, "RATE_LIMITED")
    assert attempts.wait_after(streamed) == pytest.approx(0.04)
    worded = GatewayError(exhausted, "too many calls: at most 20/s (bursts of 40); retry in 40 ms")
    assert attempts.wait_after(worded) == pytest.approx(0.2)  # no guidance in the details: the default


# -- the token's expiry, in milliseconds --------------------------------------------------------------------


class _Answering:
    """A stand-in gateway whose ``WhoAmI`` answers ``reply``."""

    def __init__(self, reply: gw.WhoAmIResponse) -> None:
        self.reply = reply
        self.server = grpc.aio.server()
        handlers = {
            "WhoAmI": grpc.unary_unary_rpc_method_handler(
                self._whoami, gw.WhoAmIRequest.FromString, gw.WhoAmIResponse.SerializeToString
            ),
        }
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_GATEWAY, handlers),))
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"

    async def _whoami(
        self, request: gw.WhoAmIRequest, context: grpc.aio.ServicerContext
    ) -> gw.WhoAmIResponse:
        return self.reply


_EXPIRY_S = 1_800_000_000  # 2027-01-15 08:00 UTC


@pytest.mark.parametrize(
    "reply",
    [
        gw.WhoAmIResponse(player_id="p", expires_at=_EXPIRY_S, expires_at_ms=_EXPIRY_S * 1000),  # today's
        gw.WhoAmIResponse(player_id="p", expires_at=_EXPIRY_S),  # a gateway older than expires_at_ms
        gw.WhoAmIResponse(player_id="p", expires_at_ms=_EXPIRY_S * 1000),  # one past the deprecated field
    ],
    ids=["both", "seconds only", "milliseconds only"],
)
async def test_whoami_reads_the_expiry_in_milliseconds_falling_back_on_the_deprecated_seconds(
    reply: gw.WhoAmIResponse,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    gateway = _Answering(reply)
    await gateway.server.start()
    try:
        async with PlayerSession(gateway.address, "t") as session:
            assert expires_at_ms(await session.whoami()) == _EXPIRY_S * 1000
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
        monkeypatch.setenv("GATEWAY_ADDRESS", gateway.address)
        monkeypatch.setenv("SKILLCLASSICS_TOKEN", "t")
        assert await main_async(["whoami"]) == 0
        assert capsys.readouterr().out == "p (token valid until 2027-01-15 08:00 UTC)\n"
    finally:
        await gateway.server.stop(0)


# -- the load harness's outage tolerance -------------------------------------------------------------------


def test_the_load_harness_rides_out_an_outage_as_long_as_it_tolerates() -> None:
    now = [0.0]
    outage = OutageTolerance(5.0, clock=lambda: now[0])
    down = GatewayError(grpc.StatusCode.UNAVAILABLE, "matchmaking is unavailable: ...", retry_after_s=1.0)
    unguided = GatewayError(grpc.StatusCode.UNAVAILABLE, "rules-chess shard 0 is unavailable: restarting")
    assert outage.wait_after(down) == pytest.approx(1.0)  # as the refusal asks
    now[0] = 1.0
    assert outage.wait_after(unguided) == pytest.approx(0.2)  # doubling from 0.1 s
    now[0] = 4.5
    assert outage.wait_after(down) == pytest.approx(0.5)  # cut to what the tolerance has left
    now[0] = 5.0
    assert outage.wait_after(down) is None  # the outage outlasted the tolerance: the match fails
    assert OutageTolerance(5.0).wait_after(GatewayError(grpc.StatusCode.INTERNAL, "bug")) is None
    assert OutageTolerance(0.0).wait_after(down) is None


async def test_an_outage_longer_than_the_wait_still_fails_in_the_end() -> None:
    gateway = _Refusing(refusals=1000, wait_ms=20)
    await gateway.server.start()
    try:
        async with PlayerSession(gateway.address, "t", retry=RetryPolicy(unavailable_wait_s=0.2)) as session:
            with pytest.raises(GatewayError):
                await asyncio.wait_for(session.whoami(), 5)
        assert 5 <= gateway.calls["WhoAmI"] <= 12
    finally:
        await gateway.server.stop(0)


async def test_a_stream_whose_writes_keep_breaking_gives_up_unavailable_not_internal() -> None:
    """grpc reports a write that failed on a stream the gateway was ending as ``INTERNAL`` ("Internal
    error from Core"): a client-side view of a broken connection. A Play stream reopens after it like after
    ``UNAVAILABLE``, and once it gives up (the breaks went on too long) it says ``UNAVAILABLE``; a real
    ``INTERNAL`` of the gateway's, with no write under way, is still reported as it is."""
    session = PlayerSession("127.0.0.1:1", "token", retry=RetryPolicy(stream_attempts=2, stream_outage_s=0))
    internal = grpc.aio.AioRpcError(
        grpc.StatusCode.INTERNAL, grpc.aio.Metadata(), grpc.aio.Metadata(), details="Internal error from Core"
    )
    reopening = _Reopening(session, seen=True)
    await reopening.after_error(internal, broken=True)  # the first break: reopened after a pause
    with pytest.raises(GatewayError) as gave_up:
        await reopening.after_error(internal, broken=True)
    assert gave_up.value.code == grpc.StatusCode.UNAVAILABLE
    assert not gave_up.value.reached
    assert "kept breaking" in gave_up.value.details
    with pytest.raises(GatewayError) as refused:
        await _Reopening(session, seen=True).after_error(internal)
    assert refused.value.code == grpc.StatusCode.INTERNAL
    await session.close()


def test_a_call_the_gateway_ended_without_an_answer_is_unavailable_and_retried() -> None:
    """A gateway shutting down ends the calls it had received but not begun with CANCELLED and no
    answer of its own (grpc/grpc#41785): like a lost connection, not the caller's cancellation."""
    unanswered = grpc.aio.AioRpcError(
        grpc.StatusCode.CANCELLED, grpc.aio.Metadata(), grpc.aio.Metadata(), details="CANCELLED"
    )
    refused = GatewayError.from_rpc(unanswered, "127.0.0.1:1")
    assert refused.code == grpc.StatusCode.UNAVAILABLE
    assert not refused.reached
    assert (
        refused.details
        == "the gateway at 127.0.0.1:1 ended the call without answering it (shutting down?); retry"
    )
    assert _Attempts(RetryPolicy(), repeatable=True).wait_after(refused) is not None
    assert _Attempts(RetryPolicy(), repeatable=False).wait_after(refused) is None
    answered = grpc.aio.AioRpcError(
        grpc.StatusCode.CANCELLED,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(("x-request-id", "r1")),
        details="the match was cancelled",
    )
    assert GatewayError.from_rpc(answered).code == grpc.StatusCode.CANCELLED  # the gateway's own answer
