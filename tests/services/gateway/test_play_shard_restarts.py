"""Play streams through a real gateway while their rules shard, a real process, is killed or restarted.

Every Play stream must end with a status the client sees (``UNAVAILABLE``, asking it to reconnect from
its last sequence), at once; while the shard is away every reopened stream must end the same way, never
hang after ``opened``; a graceful restart (SIGTERM) must move the streams at once rather than after the
shard's drain grace; and once the shard is back, the streams resume from their last sequence and play on,
as soon as the shard is SERVING.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.runtime import RunningServer
from libs.runtime.config import sqlite_url
from libs.runtime.errors import code_number
from tests.services.gateway.test_gateway_service import MINUTE, bearer, start_gateway
from tests.services.gateway.test_play import PlayClient, moves
from tests.support import ServiceProcess, backend_channel

MATCHES = 4
"""Matches in play when the shard goes: two Play streams each."""
DRAIN_GRACE_S = 30
"""The shard's drain grace (``SHUTDOWN_GRACE_SECONDS``): far longer than any status may take."""
STATUS_WITHIN_S = 8.0
"""How long a Play stream may take to end once its shard is gone or draining (generous: a loaded
2-core machine; measured well under a second)."""
ATTEMPT_S = 10.0
"""How long one reopening may take to be answered or ended; past it the stream hung after ``opened``."""
PROBE = "Ke3"
"""An action no seat can play in these matches (after 1. e4): the shard refuses it, which proves that the
stream reaches the shard."""
DOWN_S = 4.0
"""How long the killed shard stays down before it is started again."""
RETRY_S = 0.05
"""How long a client here waits before reopening a stream that ended."""
BACK_WITHIN_S = 1.5
"""How soon after the restarted shard reports SERVING an action through the gateway must succeed."""


@dataclass
class Seat:
    player: str
    match_id: str
    client: PlayClient
    last: int = 0
    """The last sequence this seat saw."""
    reopened: int = 0
    seen_after: list[rules_pb2.MatchUpdate] = field(default_factory=list)


@dataclass
class Stack:
    shard: ServiceProcess
    gateway: RunningServer
    gw: gateway_pb2_grpc.GatewayServiceStub
    rules: rules_pb2_grpc.RulesServiceStub


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    shard = ServiceProcess(
        "services.rules_chess",
        {"DATABASE_URL": sqlite_url(tmp_path / "rules.db"), "SHUTDOWN_GRACE_SECONDS": str(DRAIN_GRACE_S)},
    )
    await shard.start()
    # Clients here reopen every few tens of milliseconds while the shard is away: a stream-open rate
    # to match (the rate limit itself is tested elsewhere).
    gateway = await start_gateway(
        tmp_path,
        {"RULES_CHESS_ADDRESSES": shard.address, "GATEWAY_STREAM_RATE": "100", "GATEWAY_STREAM_BURST": "100"},
    )
    try:
        async with (
            grpc.aio.insecure_channel(gateway.address) as gateway_channel,
            backend_channel(shard.address, "matchmaking") as rules_channel,
        ):
            yield Stack(
                shard,
                gateway,
                gateway_pb2_grpc.GatewayServiceStub(gateway_channel),
                rules_pb2_grpc.RulesServiceStub(rules_channel),
            )
    finally:
        await gateway.stop(grace=0.5)
        if shard.process is not None and shard.process.poll() is None:
            shard.kill()


async def create_match(stack: Stack, white: str, black: str) -> str:
    match_id = f"chess.0.{uuid.uuid4().hex}"
    await stack.rules.CreateMatch(
        rules_pb2.CreateMatchRequest(
            match_id=match_id,
            seats=[
                rules_pb2.SeatAssignment(seat=0, player_id=white),
                rules_pb2.SeatAssignment(seat=1, player_id=black),
            ],
            time_control=rules_pb2.TimeControl(base_ms=5 * MINUTE),
            idempotency_key=match_id,
        ),
        timeout=10,
    )
    return match_id


async def matches_in_play(stack: Stack) -> list[Seat]:
    """:data:`MATCHES` matches, each with both seats on Play streams and 1. e4 played and seen by both."""
    seats: list[Seat] = []
    for n in range(MATCHES):
        white, black = f"white-{n}-{uuid.uuid4().hex[:6]}", f"black-{n}-{uuid.uuid4().hex[:6]}"
        match_id = await create_match(stack, white, black)
        pair = [
            Seat(white, match_id, PlayClient(stack.gw, bearer(white))),
            Seat(black, match_id, PlayClient(stack.gw, bearer(black))),
        ]
        for seat in pair:
            await seat.client.open(match_id)
        await pair[0].client.play("e4")
        for seat in pair:
            seat.last = (await seat.client.update(lambda u: moves(u) == ["e4"])).sequence
        seats.extend(pair)
    return seats


async def ended_within(seat: Seat) -> tuple[grpc.aio.AioRpcError, float]:
    """The status that ended ``seat``'s stream and when it came (``time.monotonic``)."""
    error = await seat.client.ended(within_s=STATUS_WITHIN_S)
    return error, time.monotonic()


async def reopen(stack: Stack, seat: Seat) -> float:
    """Reopen ``seat``'s Play stream from its last sequence until an action reaches the shard, as a client
    does; every attempt must be answered or ended within :data:`ATTEMPT_S`, and a stream the client sees
    end must end ``UNAVAILABLE`` with a reason. When it worked (``time.monotonic``)."""
    while True:
        client = PlayClient(stack.gw, bearer(seat.player))
        ended: grpc.aio.AioRpcError | None = None
        answer = None
        try:
            async with asyncio.timeout(ATTEMPT_S):
                await client.open(seat.match_id, from_sequence=seat.last)
                try:
                    key = await client.act(PROBE)
                except grpc.aio.AioRpcError:
                    # The stream ended before the write: grpc then reports INTERNAL ("Internal error from
                    # Core") on the client's side, whatever the status (the client library reopens).
                    key = None
                if key is not None:
                    answer = await client.answer(key)
        except grpc.aio.AioRpcError as error:
            ended = error
        except TimeoutError:
            raise AssertionError(
                f"{seat.player}'s reopened Play stream was neither answered nor ended within {ATTEMPT_S} s"
            ) from None
        if ended is not None:
            assert ended.code() == grpc.StatusCode.UNAVAILABLE, (ended.code(), ended.details())
            assert ended.details(), "a status without a reason"
        if answer is None or answer.code == code_number(grpc.StatusCode.UNAVAILABLE):
            seat.reopened += 1  # ended, or the link to the shard failed: try again
            client.call.cancel()
            await asyncio.sleep(RETRY_S)
            continue
        assert answer.code == code_number(grpc.StatusCode.FAILED_PRECONDITION), answer
        seat.client = client
        return time.monotonic()


async def restart(shard: ServiceProcess) -> float:
    """Start the shard again; the instant (``time.monotonic``) it first answered SERVING, polled every
    10 ms over a channel that tries to connect again every 10-20 ms (with grpc's default backoff the
    poll itself would see SERVING seconds late)."""
    starting = asyncio.create_task(shard.start())
    options = [("grpc.initial_reconnect_backoff_ms", 10), ("grpc.max_reconnect_backoff_ms", 20)]
    try:
        async with grpc.aio.insecure_channel(shard.health_address, options=options) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while True:
                try:
                    reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=0.5)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        return time.monotonic()
                except grpc.aio.AioRpcError:
                    pass
                assert not starting.done() or starting.exception() is None, "the shard did not start"
                await asyncio.sleep(0.01)
    finally:
        await starting


async def exited(shard: ServiceProcess, within_s: float) -> float:
    """Wait (without blocking the event loop) for the shard's process to end; how long it took."""
    assert shard.process is not None
    started = time.monotonic()
    while shard.process.poll() is None:
        assert time.monotonic() - started < within_s, f"the shard did not exit within {within_s} s"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def resumes(seats: list[Seat]) -> None:
    """Every match goes on over the reopened streams: Black plays 1... e5 and both seats see it, and each
    reopened stream brought only updates after its seat's last sequence, in order."""
    for white, black in zip(seats[::2], seats[1::2], strict=True):
        await black.client.play("e5")
        for seat in (white, black):
            await seat.client.update(lambda u: moves(u) == ["e4", "e5"])
            sequences = [u.sequence for u in seat.client.updates]
            assert sequences, seat.player
            assert sequences[0] > seat.last, (seat.player, seat.last, sequences)
            assert sequences == sorted(set(sequences)), sequences
    for seat in seats:
        seat.client.call.cancel()


def assert_reconnect_reason(error: grpc.aio.AioRpcError) -> None:
    assert error.code() == grpc.StatusCode.UNAVAILABLE, (error.code(), error.details())
    assert "reconnect from your last sequence" in (error.details() or ""), error.details()


async def test_a_killed_shard_ends_every_play_stream_with_a_status_and_they_resume_once_it_is_back(
    stack: Stack,
) -> None:
    seats = await matches_in_play(stack)
    killed = time.monotonic()
    stack.shard.kill(signal.SIGKILL)
    endings = await asyncio.gather(*(ended_within(seat) for seat in seats))
    for error, _ in endings:
        assert_reconnect_reason(error)
    slowest = max(at for _, at in endings) - killed
    assert slowest < STATUS_WITHIN_S

    # Every client reopens at once and keeps trying while the shard is down and restarting: each try is
    # answered or ended (never "opened" and then nothing), and the streams work again once it is back.
    reopening = [asyncio.create_task(reopen(stack, seat)) for seat in seats]
    # Down for a while: clients try again and again, and the gateway's channel to the shard fails to
    # connect again and again (with grpc's default backoff it would then wait seconds between tries).
    await asyncio.sleep(DOWN_S)
    serving = await restart(stack.shard)
    back = await asyncio.gather(*reopening)
    first, last = min(back) - serving, max(back) - serving
    print(
        f"\nSIGKILL: every Play stream ended within {slowest:.2f} s; "
        f"{sum(s.reopened for s in seats)} reopenings refused while down; "
        f"back {first:.2f}-{last:.2f} s after SERVING"
    )
    assert all(s.reopened > 0 for s in seats)  # they did try while it was down
    assert first < BACK_WITHIN_S, f"the first action after SERVING took {first:.2f} s"
    await resumes(seats)


async def test_a_shard_restarting_gracefully_moves_every_play_stream_at_once(stack: Stack) -> None:
    seats = await matches_in_play(stack)
    assert stack.shard.process is not None
    stopped = time.monotonic()
    stack.shard.process.send_signal(signal.SIGTERM)
    endings = await asyncio.gather(*(ended_within(seat) for seat in seats))
    for error, _ in endings:
        assert_reconnect_reason(error)
        assert "restarting" in (error.details() or ""), error.details()
    slowest = max(at for _, at in endings) - stopped
    assert slowest < STATUS_WITHIN_S < DRAIN_GRACE_S  # at once, not after the drain grace

    reopening = [asyncio.create_task(reopen(stack, seat)) for seat in seats]
    took = await exited(stack.shard, within_s=DRAIN_GRACE_S + 10)
    # Nothing held it: its Exchange streams ended at once instead of carrying watches to the grace's end.
    assert took < DRAIN_GRACE_S / 2, f"the shard held its streams for {took:.1f} s"
    serving = await restart(stack.shard)
    back = await asyncio.gather(*reopening)
    first, last = min(back) - serving, max(back) - serving
    print(
        f"\nSIGTERM: every Play stream ended within {slowest:.2f} s (grace {DRAIN_GRACE_S} s); "
        f"the shard exited after {took:.2f} s; back {first:.2f}-{last:.2f} s after SERVING"
    )
    assert first < BACK_WITHIN_S, f"the first action after SERVING took {first:.2f} s"
    await resumes(seats)


async def test_a_stream_whose_headers_went_first_gets_its_status_even_with_its_first_write_cancelled() -> (
    None
):
    """The grpc behaviour Play relies on (services/gateway/servicer.py, Play): a handler that sent its
    response headers on their own may cancel a write under way and still end the stream with a status
    the client sees. (Had the headers gone with that write, grpc would refuse the status batch,
    GRPC_CALL_ERROR_TOO_MANY_OPERATIONS, and the client would wait forever: grpcio 1.85.)"""

    async def handler(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> None:
        await context.send_initial_metadata(())
        writer = asyncio.create_task(context.write(b"opened"))
        await asyncio.sleep(0)  # the write is under way in grpc's core
        writer.cancel()
        await context.abort(grpc.StatusCode.UNAVAILABLE, "the shard went away; reconnect")

    server = grpc.aio.server()
    method = grpc.stream_stream_rpc_method_handler(handler)  # raw bytes: no serializers
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.T", {"Play": method}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.stream_stream("/t.T/Play")()
            await call.write(b"open")
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                await asyncio.wait_for(_read_to_the_end(call), STATUS_WITHIN_S)
            assert (ended.value.code(), ended.value.details()) == (
                grpc.StatusCode.UNAVAILABLE,
                "the shard went away; reconnect",
            )
    finally:
        await server.stop(0)


async def _read_to_the_end(call: grpc.aio.StreamStreamCall) -> None:
    while await call.read() is not grpc.aio.EOF:
        pass
