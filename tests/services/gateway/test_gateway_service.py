"""The gateway over real gRPC, in front of matchmaking and the chess rules service (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import stat
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from skillclassics.chess.v1 import chess_pb2
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm_pb
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.runtime import RunningServer, ServiceConfig, start_server
from libs.runtime.config import ConfigError
from libs.runtime.errors import retry_in_ms
from services.gateway import tokens
from services.gateway.limits import TokenBuckets
from services.gateway.service import GatewayService
from services.gateway.tokens import KeyRing, SigningKey, TokenError, TokenVerifier, mint_token
from services.matchmaking.service import MatchmakingService
from services.rules_chess.service import chess_rules_service
from tests.support import backend_channel, free_port, tls_settings

KEY = SigningKey.of(Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
"""The token issuer's key in these tests: the gateways started here trust it (a JWKS file)."""
MINUTE = 60_000
Metadata = tuple[tuple[str, str], ...]


def forger(seed: bytes) -> SigningKey:
    """A key that is not :data:`KEY` but names :data:`KEY`'s ``kid``: its tokens are forgeries."""
    return SigningKey.of(Ed25519PrivateKey.from_private_bytes(hashlib.sha256(seed).digest()), kid=KEY.kid)


def bearer(
    player: str, *, key: SigningKey | bytes = KEY, ttl: int = 3600, now: int | None = None
) -> Metadata:
    """A token for ``player`` signed with ``key`` (bytes: with a forger's key made from them)."""
    signer = forger(key) if isinstance(key, bytes) else key
    token = mint_token(signer, player, ttl, int(time.time()) if now is None else now)
    return (("authorization", f"Bearer {token}"),)


def publish_jwks(path: Path, *keys: SigningKey) -> Path:
    """Write the JWKS of ``keys`` to ``path`` (what an issuer publishes; ``GATEWAY_JWKS_FILE``)."""
    path.write_text(json.dumps({"keys": [key.public_jwk() for key in keys]}))
    return path


async def start_gateway(tmp: Path, env: Mapping[str, str]) -> RunningServer:
    """A gateway trusting :data:`KEY` (unless ``env`` names other keys)."""
    config = ServiceConfig.from_env(
        "gateway",
        {"GRPC_PORT": "0", "METRICS_PORT": "-1", "HEALTH_PORT": "-1", "DATA_DIR": str(tmp), **tls_settings()},
    )
    environment = {"GATEWAY_JWKS_FILE": str(publish_jwks(tmp / "test-issuer-jwks.json", KEY)), **env}
    return await start_server(GatewayService(config, environment), config)


@dataclass
class Platform:
    gateway: gateway_pb2_grpc.GatewayServiceStub
    rules: rules_pb2_grpc.RulesServiceStub
    """The chess rules service, called as matchmaking (creating matches)."""
    rules_address: str
    mm_address: str
    seat_views: rules_pb2_grpc.RulesServiceStub
    """The chess rules service, called as the gateway (reading a match as a seat or spectator)."""


@pytest.fixture
async def platform(database_url: str, tmp_path: Path) -> AsyncIterator[Platform]:
    mm_port = free_port()
    rules_config = ServiceConfig.from_env(
        "rules-chess",
        {
            "GRPC_PORT": "0",
            "METRICS_PORT": "-1",
            "HEALTH_PORT": "-1",
            "DATABASE_URL": database_url,
            **tls_settings(),
        },
    )
    rules = await start_server(
        chess_rules_service(rules_config, {"MATCHMAKING_ADDRESS": f"127.0.0.1:{mm_port}"}), rules_config
    )
    mm_config = ServiceConfig.from_env(
        "matchmaking",
        {
            "GRPC_PORT": str(mm_port),
            "METRICS_PORT": "-1",
            "HEALTH_PORT": "-1",
            "DATABASE_URL": database_url,
            **tls_settings(),
        },
    )
    matchmaking = await start_server(
        MatchmakingService(mm_config, {"RULES_CHESS_ADDRESSES": rules.address}), mm_config
    )
    gateway = await start_gateway(
        tmp_path, {"MATCHMAKING_ADDRESS": matchmaking.address, "RULES_CHESS_ADDRESSES": rules.address}
    )
    async with (
        grpc.aio.insecure_channel(gateway.address) as gateway_channel,  # the players' door: plaintext
        backend_channel(rules.address, "matchmaking") as rules_channel,
        backend_channel(rules.address, "gateway") as seat_views_channel,
    ):
        yield Platform(
            gateway_pb2_grpc.GatewayServiceStub(gateway_channel),
            rules_pb2_grpc.RulesServiceStub(rules_channel),
            rules.address,
            matchmaking.address,
            rules_pb2_grpc.RulesServiceStub(seat_views_channel),
        )
    await gateway.stop(grace=0.5)
    await matchmaking.stop(grace=0.5)
    await rules.stop(grace=0.5)


async def refused(call: object, code: grpc.StatusCode, reason: str) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.code() == code, caught.value.details()
    assert reason in (caught.value.details() or ""), caught.value.details()
    return caught.value


async def stream_refused(
    stream: grpc.aio.UnaryStreamCall, code: grpc.StatusCode, reason: str
) -> grpc.aio.AioRpcError:
    return await refused(stream.read(), code, reason)


def retry_guidance_ms(error: grpc.aio.AioRpcError) -> int:
    """The wait a refusal asks for, checked to be the same in all three forms it is given in: the
    ``retry-after-ms`` trailer, the ``google.rpc.RetryInfo`` detail of its status (as gRPC's own status
    library reads it) and the words of its reason ("retry in N ms")."""
    trailers = dict(error.trailing_metadata() or ())
    assert "retry-after-ms" in trailers, trailers
    in_metadata = int(trailers["retry-after-ms"])
    status = rpc_status.from_call(error)  # also checks its code and message are the call's
    assert status is not None, "no google.rpc.Status in the trailing metadata"
    infos = [info for detail in status.details if detail.Unpack(info := error_details_pb2.RetryInfo())]
    assert len(infos) == 1, status
    in_detail = infos[0].retry_delay.ToMilliseconds()
    in_words = retry_in_ms(error.details() or "")
    assert in_metadata == in_detail == in_words, (in_metadata, in_detail, in_words, error.details())
    assert in_metadata > 0
    return in_metadata


async def next_lobby(stream: grpc.aio.UnaryStreamCall, kind: str) -> pb.WatchLobbyResponse:
    async with asyncio.timeout(5):
        while True:
            event: pb.WatchLobbyResponse = await stream.read()
            if event.WhichOneof("event") == kind:
                return event


async def next_update(stream: grpc.aio.UnaryStreamCall) -> rules_pb2.MatchUpdate:
    async with asyncio.timeout(5):
        response = await stream.read()
    assert response is not grpc.aio.EOF
    update: rules_pb2.MatchUpdate = response.update
    return update


async def read_to_the_end(stream: grpc.aio.UnaryStreamCall) -> None:
    while await stream.read() is not grpc.aio.EOF:
        pass


def move(match_id: str, san: str) -> pb.SubmitActionRequest:
    return pb.SubmitActionRequest(
        match_id=match_id,
        idempotency_key=uuid.uuid4().hex,
        action=rules_pb2.Action(chess=chess_pb2.ChessAction(move=san)),
    )


async def direct_match(platform: Platform, white: str, black: str) -> str:
    """A chess match created on the rules service directly (as matchmaking would)."""
    match_id = f"chess.0.{uuid.uuid4().hex}"
    await platform.rules.CreateMatch(
        rules_pb2.CreateMatchRequest(
            match_id=match_id,
            seats=[
                rules_pb2.SeatAssignment(seat=0, player_id=white),
                rules_pb2.SeatAssignment(seat=1, player_id=black),
            ],
            time_control=rules_pb2.TimeControl(base_ms=5 * MINUTE),
            idempotency_key=match_id,
        )
    )
    return match_id


async def connected_seats(platform: Platform, match_id: str) -> list[int]:
    reply = await platform.seat_views.GetMatch(rules_pb2.GetMatchRequest(match_id=match_id, spectator=True))
    return list(reply.update.connected_seats)


async def wait_for_presence(platform: Platform, match_id: str, expected: list[int]) -> None:
    deadline = time.monotonic() + 5
    while (seats := await connected_seats(platform, match_id)) != expected:
        assert time.monotonic() < deadline, f"connected seats stayed {seats}, expected {expected}"
        await asyncio.sleep(0.02)


# -- a whole game through the gateway --------------------------------------------------------------------


async def test_two_players_play_a_whole_game_through_the_gateway(platform: Platform) -> None:
    gw = platform.gateway
    alice, bob = bearer("alice"), bearer("bob")
    who = await gw.WhoAmI(pb.WhoAmIRequest(), metadata=alice)
    assert who.player_id == "alice"
    assert who.expires_at_ms == who.expires_at * 1000 > time.time() * 1000  # old field, in seconds
    alice_lobby = gw.WatchLobby(pb.WatchLobbyRequest(), metadata=alice)
    bob_lobby = gw.WatchLobby(pb.WatchLobbyRequest(), metadata=bob)
    await next_lobby(alice_lobby, "subscribed")  # relayed: from here on nothing is missed
    await next_lobby(bob_lobby, "subscribed")
    table = (
        await gw.CreateTable(
            pb.CreateTableRequest(
                family="chess",
                options=rules_pb2.MatchOptions(
                    chess=chess_pb2.ChessOptions(ruleset=chess_pb2.RULESET_CONTEST)
                ),
                time_control=rules_pb2.TimeControl(base_ms=5 * MINUTE),
                entry_fee_minor=500,
                currency="USD",
                visibility=mm_pb.VISIBILITY_PUBLIC,
                idempotency_key="t-1",
            ),
            metadata=alice,
        )
    ).table
    assert table.creator_id == "alice"
    listed = await gw.ListTables(pb.ListTablesRequest(family="chess"), metadata=bob)
    assert [t.table_id for t in listed.tables] == [table.table_id]
    free = await gw.ListTables(pb.ListTablesRequest(family="chess", free_only=True), metadata=bob)
    assert list(free.tables) == []  # the filter reaches matchmaking: this table costs 500
    joined = (await gw.JoinTable(pb.JoinTableRequest(table_id=table.table_id), metadata=bob)).table
    alice_ready = (await next_lobby(alice_lobby, "match_ready")).match_ready
    bob_ready = (await next_lobby(bob_lobby, "match_ready")).match_ready
    assert alice_ready.match_id == bob_ready.match_id == joined.match_id
    assert (alice_ready.seat, bob_ready.seat) == (0, 1)
    match_id = joined.match_id

    alice_view = gw.WatchMatch(pb.WatchMatchRequest(match_id=match_id), metadata=alice)
    bob_view = gw.WatchMatch(pb.WatchMatchRequest(match_id=match_id), metadata=bob)
    first = await next_update(alice_view)
    assert first.legal_actions  # White to move: her legal moves are in her view
    players = {0: alice, 1: bob}
    for ply, san in enumerate(["f3", "e5", "g4", "Qh4#"]):
        reply = await gw.SubmitAction(move(match_id, san), metadata=players[ply % 2])
        assert reply.seat == ply % 2
    for view in (alice_view, bob_view):
        while not (update := await next_update(view)).HasField("result"):
            pass
        assert update.result.termination == rules_pb2.TERMINATION_CHECKMATE
        assert update.result.winner == 1
        assert update.view.chess.moves_san == ["f3", "e5", "g4", "Qh4#"]

    changed = (await next_lobby(bob_lobby, "rating_changed")).rating_changed
    assert (changed.before, changed.after) == (1500, 1520)
    ratings = await gw.GetRatings(pb.GetRatingsRequest(), metadata=alice)
    assert [(r.family, r.rating, r.games) for r in ratings.ratings] == [("chess", 1480, 1)]
    [played] = (await gw.GetMatchHistory(pb.GetMatchHistoryRequest(), metadata=bob)).matches
    assert (played.match_id, played.seat, played.opponent_id) == (match_id, 1, "alice")
    assert (played.rating_before, played.rating_after) == (1500, 1520)
    record = await gw.GetRecord(pb.GetRecordRequest(match_id=match_id), metadata=alice)
    assert "Qh4#" in record.record
    got = await gw.GetMatch(pb.GetMatchRequest(match_id=match_id), metadata=bob)
    assert got.seat == 1
    assert [s.player_id for s in got.seats] == ["alice", "bob"]
    for stream in (alice_lobby, bob_lobby, alice_view, bob_view):
        stream.cancel()


async def test_a_table_is_told_on_its_creators_lobby_stream_and_a_private_one_on_no_other(
    platform: Platform,
) -> None:
    gw = platform.gateway
    alice, bob = bearer("alice"), bearer("bob")
    alice_lobby = gw.WatchLobby(pb.WatchLobbyRequest(), metadata=alice)
    bob_lobby = gw.WatchLobby(pb.WatchLobbyRequest(), metadata=bob)
    await next_lobby(alice_lobby, "subscribed")
    await next_lobby(bob_lobby, "subscribed")

    def table(visibility: mm_pb.Visibility.ValueType) -> pb.CreateTableRequest:
        return pb.CreateTableRequest(
            family="chess",
            options=rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions(ruleset=chess_pb2.RULESET_CONTEST)),
            time_control=rules_pb2.TimeControl(base_ms=5 * MINUTE),
            currency="USD",
            visibility=visibility,
            idempotency_key=uuid.uuid4().hex,
        )

    public = (await gw.CreateTable(table(mm_pb.VISIBILITY_PUBLIC), metadata=alice)).table
    assert (await next_lobby(alice_lobby, "table_updated")).table_updated == public
    await gw.LeaveTable(pb.LeaveTableRequest(table_id=public.table_id), metadata=alice)
    left = (await next_lobby(alice_lobby, "table_updated")).table_updated
    assert (left.table_id, left.status) == (public.table_id, mm_pb.TABLE_STATUS_CANCELLED)
    private = (await gw.CreateTable(table(mm_pb.VISIBILITY_PRIVATE), metadata=alice)).table
    assert (await next_lobby(alice_lobby, "table_updated")).table_updated == private
    # Bob's stream: the first table it tells of is his own, created after Alice's private table was told.
    own = (await gw.CreateTable(table(mm_pb.VISIBILITY_PUBLIC), metadata=bob)).table
    assert (await next_lobby(bob_lobby, "table_updated")).table_updated == own
    for stream in (alice_lobby, bob_lobby):
        stream.cancel()


# -- security --------------------------------------------------------------------------------------------


async def test_only_signed_in_players_act_and_only_for_their_own_seat(platform: Platform) -> None:
    gw = platform.gateway
    unauthenticated = grpc.StatusCode.UNAUTHENTICATED
    await refused(gw.WhoAmI(pb.WhoAmIRequest()), unauthenticated, "no token")
    await refused(gw.GetRatings(pb.GetRatingsRequest()), unauthenticated, "no token")
    await refused(
        gw.WhoAmI(pb.WhoAmIRequest(), metadata=(("authorization", "Basic abc"),)), unauthenticated, "Bearer"
    )
    expired = bearer("alice", ttl=60, now=int(time.time()) - 120)
    await refused(gw.WhoAmI(pb.WhoAmIRequest(), metadata=expired), unauthenticated, "expired")
    forged = bearer("alice", key=b"x" * 32)
    await refused(gw.WhoAmI(pb.WhoAmIRequest(), metadata=forged), unauthenticated, "signature")
    header, payload, signature = bearer("alice")[0][1].removeprefix("Bearer ").split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    tampered_payload = base64.urlsafe_b64encode(json.dumps({**claims, "sub": "bob"}).encode()).rstrip(b"=")
    tampered = (("authorization", f"Bearer {header}.{tampered_payload.decode()}.{signature}"),)
    await refused(gw.WhoAmI(pb.WhoAmIRequest(), metadata=tampered), unauthenticated, "signature")
    await refused(
        gw.WatchMatch(pb.WatchMatchRequest(match_id="chess.0.x", spectator=True)).read(),
        unauthenticated,
        "no token",
    )

    match_id = await direct_match(platform, "alice", "bob")
    alice, bob, carol = bearer("alice"), bearer("bob"), bearer("carol")
    denied = grpc.StatusCode.PERMISSION_DENIED
    await refused(gw.SubmitAction(move(match_id, "e4"), metadata=carol), denied, "not seated")
    await stream_refused(
        gw.WatchMatch(pb.WatchMatchRequest(match_id=match_id), metadata=carol), denied, "not seated"
    )
    await refused(gw.GetMatch(pb.GetMatchRequest(match_id=match_id), metadata=carol), denied, "not seated")
    # Bob is seated, but it is White's move: the rules service's refusal passes through.
    await refused(
        gw.SubmitAction(move(match_id, "e5"), metadata=bob), grpc.StatusCode.FAILED_PRECONDITION, ""
    )
    await refused(
        gw.SubmitAction(move(match_id, "Ke2"), metadata=alice), grpc.StatusCode.FAILED_PRECONDITION, ""
    )
    await refused(
        gw.SubmitAction(pb.SubmitActionRequest(match_id=match_id, idempotency_key="k"), metadata=alice),
        grpc.StatusCode.INVALID_ARGUMENT,
        "action is required",
    )
    await refused(
        gw.SubmitAction(move("not-a-match", "e4"), metadata=alice),
        grpc.StatusCode.INVALID_ARGUMENT,
        "match_id must match",
    )
    await refused(gw.SubmitAction(move("go.0.abc", "e4"), metadata=alice), grpc.StatusCode.NOT_FOUND, "go")
    await refused(
        gw.SubmitAction(move(f"chess.0.{uuid.uuid4().hex}", "e4"), metadata=alice),
        grpc.StatusCode.NOT_FOUND,
        "",
    )
    await gw.SubmitAction(move(match_id, "e4"), metadata=alice)

    spectator = gw.WatchMatch(pb.WatchMatchRequest(match_id=match_id, spectator=True), metadata=carol)
    seen = [await next_update(spectator), await next_update(spectator)]
    assert seen[-1].view.chess.moves_san == ["e4"]
    assert all(not u.legal_actions for u in seen)  # a spectator has no moves of anyone's
    black = gw.WatchMatch(pb.WatchMatchRequest(match_id=match_id), metadata=bob)
    while (update := await next_update(black)).sequence < seen[-1].sequence:
        pass
    assert update.legal_actions  # Black to move: Bob's own view lists his moves
    spectator.cancel()
    black.cancel()


# -- reconnect and presence ------------------------------------------------------------------------------


async def test_a_dropped_stream_resumes_without_gaps_and_presence_follows_streams(platform: Platform) -> None:
    gw = platform.gateway
    alice, bob = bearer("alice"), bearer("bob")
    match_id = await direct_match(platform, "alice", "bob")
    assert await connected_seats(platform, match_id) == []

    stream = gw.WatchMatch(pb.WatchMatchRequest(match_id=match_id), metadata=alice)
    await wait_for_presence(platform, match_id, [0])
    second = gw.WatchMatch(pb.WatchMatchRequest(match_id=match_id), metadata=alice)
    sequences: list[int] = []
    moves = ["e4", "e5", "Nf3", "Nc6", "Bb5", "a6"]
    players = [alice, bob]
    for ply, san in enumerate(moves[:3]):
        await gw.SubmitAction(move(match_id, san), metadata=players[ply % 2])
    while True:
        update = await next_update(stream)
        sequences.append(update.sequence)
        if update.view.chess.moves_san == moves[:3]:
            break
    stream.cancel()  # dropped mid-game
    await asyncio.sleep(0.2)
    assert await connected_seats(platform, match_id) == [0]  # her second stream is still open
    for ply, san in enumerate(moves[3:], start=3):
        await gw.SubmitAction(move(match_id, san), metadata=players[ply % 2])
    resumed = gw.WatchMatch(
        pb.WatchMatchRequest(match_id=match_id, from_sequence=sequences[-1]), metadata=alice
    )
    while True:
        update = await next_update(resumed)
        sequences.append(update.sequence)
        if update.view.chess.moves_san == moves:
            break
    assert sequences == list(range(sequences[0], sequences[-1] + 1))  # every update exactly once
    assert sequences[0] == 1

    resumed.cancel()
    second.cancel()
    await wait_for_presence(platform, match_id, [])  # her last stream closed: disconnected
    spectator = gw.WatchMatch(pb.WatchMatchRequest(match_id=match_id, spectator=True), metadata=bob)
    await next_update(spectator)
    await asyncio.sleep(0.1)
    assert await connected_seats(platform, match_id) == []  # watching as a spectator is not presence
    spectator.cancel()


async def test_a_gateway_shutting_down_ends_streams_and_reports_the_disconnect(
    platform: Platform, tmp_path: Path
) -> None:
    match_id = await direct_match(platform, "alice", "bob")
    gateway = await start_gateway(
        tmp_path,
        {"MATCHMAKING_ADDRESS": platform.mm_address, "RULES_CHESS_ADDRESSES": platform.rules_address},
    )
    async with grpc.aio.insecure_channel(gateway.address) as channel:
        gw = gateway_pb2_grpc.GatewayServiceStub(channel)
        stream = gw.WatchMatch(pb.WatchMatchRequest(match_id=match_id), metadata=bearer("bob"))
        await next_update(stream)
        await wait_for_presence(platform, match_id, [1])
        started = time.monotonic()
        await gateway.stop(grace=5)
        assert time.monotonic() - started < 3  # the streams ended at once, not after the grace
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await read_to_the_end(stream)  # the presence update may come first
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, caught.value.details()
        assert "shutting down" in (caught.value.details() or "")
    await wait_for_presence(platform, match_id, [])


# -- limits and failures ---------------------------------------------------------------------------------


async def test_rate_limits_answer_resource_exhausted(platform: Platform, tmp_path: Path) -> None:
    limited = await start_gateway(
        tmp_path,
        {
            "MATCHMAKING_ADDRESS": platform.mm_address,
            "RULES_CHESS_ADDRESSES": platform.rules_address,
            "GATEWAY_CALL_RATE": "1",
            "GATEWAY_CALL_BURST": "3",
            "GATEWAY_STREAM_RATE": "1",
            "GATEWAY_STREAM_BURST": "2",
        },
    )
    try:
        async with grpc.aio.insecure_channel(limited.address) as channel:
            gw = gateway_pb2_grpc.GatewayServiceStub(channel)
            dave = bearer("dave")
            missing, exhausted = grpc.StatusCode.NOT_FOUND, grpc.StatusCode.RESOURCE_EXHAUSTED
            # Refused calls count too (and these ones are quick). A request that breaks the contract's
            # rules is refused before the limit is counted, for less than the count costs
            # (docs/validation.md); these are well formed and refused by the service.
            nowhere = "chess.0.no-such-match"
            for _ in range(3):
                await refused(gw.GetRecord(pb.GetRecordRequest(match_id=nowhere), metadata=dave), missing, "")
            limited_call = await refused(
                gw.ListTables(pb.ListTablesRequest(family="chess"), metadata=dave),
                exhausted,
                "too many calls",
            )
            # The wait is machine-readable too, as for a database outage (docs/gateway.md, "Errors and
            # retry guidance"): at most a token's refill time, 1 s at 1/s.
            assert retry_guidance_ms(limited_call) <= 1001
            await gw.ListTables(pb.ListTablesRequest(family="chess"), metadata=bearer("erin"))  # per player
            for _ in range(2):
                await stream_refused(
                    gw.WatchMatch(pb.WatchMatchRequest(match_id=nowhere), metadata=dave), missing, ""
                )
            limited_open = await stream_refused(
                gw.WatchLobby(pb.WatchLobbyRequest(), metadata=dave), exhausted, "too many stream opens"
            )
            assert retry_guidance_ms(limited_open) <= 1001
    finally:
        await limited.stop(grace=0.2)


def test_token_buckets_refill_at_their_rate() -> None:
    now = [0.0]
    buckets = TokenBuckets("calls", rate=2, burst=2, clock=lambda: now[0])
    buckets.take("p")
    buckets.take("p")
    with pytest.raises(Exception, match="too many calls"):
        buckets.take("p")
    now[0] = 0.5
    buckets.take("p")  # one token back after half a second at 2/s


async def test_a_backend_that_is_down_is_unavailable_quickly(tmp_path: Path) -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    gateway = await start_gateway(
        tmp_path, {"MATCHMAKING_ADDRESS": nowhere, "RULES_CHESS_ADDRESSES": nowhere}
    )
    unconfigured = await start_gateway(tmp_path, {})
    try:
        async with (
            grpc.aio.insecure_channel(gateway.address) as channel,
            grpc.aio.insecure_channel(unconfigured.address) as other,
        ):
            gw = gateway_pb2_grpc.GatewayServiceStub(channel)
            unavailable = grpc.StatusCode.UNAVAILABLE
            alice = bearer("alice")
            started = time.monotonic()
            await refused(
                gw.ListTables(pb.ListTablesRequest(family="chess"), metadata=alice),
                unavailable,
                "matchmaking",
            )
            await refused(
                gw.GetMatch(pb.GetMatchRequest(match_id="chess.0.abc"), metadata=alice),
                unavailable,
                "rules-chess shard 0",
            )
            await refused(
                gw.SubmitAction(move("chess.0.abc", "e4"), metadata=alice), unavailable, "rules-chess"
            )
            await stream_refused(
                gw.WatchLobby(pb.WatchLobbyRequest(), metadata=alice), unavailable, "matchmaking"
            )
            assert time.monotonic() - started < 3
            lone = gateway_pb2_grpc.GatewayServiceStub(other)
            await refused(
                lone.GetRatings(pb.GetRatingsRequest(), metadata=alice), unavailable, "MATCHMAKING_ADDRESS"
            )
            await refused(
                lone.GetRecord(pb.GetRecordRequest(match_id="chess.0.abc"), metadata=alice),
                grpc.StatusCode.NOT_FOUND,
                "RULES_CHESS_ADDRESSES",
            )
    finally:
        await gateway.stop(grace=0.2)
        await unconfigured.stop(grace=0.2)


# -- tokens ----------------------------------------------------------------------------------------------


def test_tokens_round_trip_and_refuse_forgeries() -> None:
    verifier = TokenVerifier(KeyRing.of(KEY))
    token = mint_token(KEY, "alice", 60, 1_000)
    claims = verifier.verify(token, 1_059)
    assert (claims.player_id, claims.expires_at, claims.issuer) == ("alice", 1_060, tokens.DEV_ISSUER)
    assert verifier.verify(token, 1_060 + tokens.LEEWAY_S - 1).player_id == "alice"  # clock skew
    with pytest.raises(TokenError, match="expired"):
        verifier.verify(token, 1_060 + tokens.LEEWAY_S)
    with pytest.raises(TokenError, match="signature"):
        verifier.verify(mint_token(forger(b"y"), "alice", 60, 1_000), 1_000)
    with pytest.raises(TokenError, match="malformed"):
        verifier.verify("garbage", 1_000)
    with pytest.raises(TokenError, match="not one the gateway trusts"):
        verifier.verify(mint_token(SigningKey.generate(), "alice", 60, 1_000), 1_000)
    with pytest.raises(ValueError, match="player_id"):
        mint_token(KEY, "bad player", 60, 1_000)


def test_the_mint_command_uses_the_gateway_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"DATA_DIR": str(tmp_path)}
    assert tokens.main(["mint", "alice", "--ttl", "120"], env) == 0
    token = capsys.readouterr().out.strip()
    key_file = tmp_path / tokens.DEV_KEY_FILE
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert tokens.token_verifier(env).verify(token, int(time.time())).player_id == "alice"
    key = tokens.token_key(env)
    assert tokens.token_key(env).kid == key.kid  # generated once, then read back
    assert tokens.main(["jwks"], env) == 0
    assert json.loads(capsys.readouterr().out) == key.jwks()
    production = {"DATA_DIR": str(tmp_path), "SKILLCLASSICS_ENV": "production"}
    with pytest.raises(ConfigError, match="not signed in production"):
        tokens.token_key(production)
    with pytest.raises(ConfigError, match="GATEWAY_JWKS_FILE or GATEWAY_JWKS_URL"):
        tokens.token_verifier({**production, "GATEWAY_TOKEN_ISSUERS": "https://id.example"})
    assert tokens.main(["mint", "alice", "--ttl", "86401"], env) == 2
    assert "at most 86400" in capsys.readouterr().err


async def test_a_stream_ends_when_its_token_expires(platform: Platform) -> None:
    """A token is checked when a stream opens; the stream must not outlive it."""
    gw = platform.gateway
    match_id = await direct_match(platform, "short-lived", "bob")
    soon = bearer("short-lived", ttl=2)
    stream = gw.WatchMatch(pb.WatchMatchRequest(match_id=match_id), metadata=soon)
    lobby = gw.WatchLobby(pb.WatchLobbyRequest(), metadata=soon)
    assert (await next_update(stream)).sequence >= 1  # open and live
    await next_lobby(lobby, "subscribed")
    await wait_for_presence(platform, match_id, [0])
    for call in (stream, lobby):
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await read_until_refused(call)
        assert ended.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "token expired" in (ended.value.details() or "")
    await wait_for_presence(platform, match_id, [])  # its seat counts as gone: the forfeit clock runs


async def read_until_refused(call: grpc.aio.UnaryStreamCall) -> None:
    """Read a stream's messages until it is refused (raises its AioRpcError) or 6 s passed."""
    async with asyncio.timeout(6):
        while True:
            await call.read()


async def test_a_rotated_out_key_is_still_accepted_and_new_tokens_use_the_new_key(tmp_path: Path) -> None:
    new_key, old_key = SigningKey.generate("ES256"), KEY
    jwks = publish_jwks(tmp_path / "rotating.json", old_key, new_key)  # the new key published first
    gateway = await start_gateway(tmp_path, {"GATEWAY_JWKS_FILE": str(jwks)})
    try:
        async with grpc.aio.insecure_channel(gateway.address) as channel:
            gw = gateway_pb2_grpc.GatewayServiceStub(channel)
            for key in (new_key, old_key):
                who = await gw.WhoAmI(pb.WhoAmIRequest(), metadata=bearer("rotating", key=key))
                assert who.player_id == "rotating"
            await refused(
                gw.WhoAmI(pb.WhoAmIRequest(), metadata=bearer("rotating", key=b"stranger")),
                grpc.StatusCode.UNAUTHENTICATED,
                "signature is invalid",
            )
            await refused(
                gw.WhoAmI(pb.WhoAmIRequest(), metadata=bearer("rotating", key=SigningKey.generate())),
                grpc.StatusCode.UNAUTHENTICATED,
                "not one the gateway trusts",
            )
    finally:
        await gateway.stop(grace=0.5)
