"""Gin rummy through the gateway: a table made and joined in the lobby, a whole match played by two
players who each see only their own hand, and the fairness proof fetched and verified afterwards."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.gin.v1 import gin_pb2
from skillclassics.rules.v1 import rules_pb2

from libs.fairness import Proof, verify
from libs.runtime import RunningServer
from services.fairness.service import FairnessService
from services.matchmaking.service import MatchmakingService
from services.rules_chess.service import chess_rules_service
from services.rules_gin.service import gin_rules_service
from tests.services.gateway.test_gateway_service import bearer, next_lobby, refused, start_gateway
from tests.services.rules_gin.test_rules_gin_service import greedy
from tests.support import free_port, start_in_process

GIN_TABLE = pb.CreateTableRequest(
    family="gin",
    options=rules_pb2.MatchOptions(gin=gin_pb2.GinOptions(variant=gin_pb2.VARIANT_STANDARD)),
    time_control=rules_pb2.TimeControl(base_ms=10 * 60_000, increment_ms=5_000),
    entry_fee_minor=250,
    currency="USD",
    idempotency_key="gin-table",
)


@dataclass
class Platform:
    gateway: gateway_pb2_grpc.GatewayServiceStub
    chess_address: str


@pytest.fixture
async def platform(database_url: str, tmp_path: Path) -> AsyncIterator[Platform]:
    servers: list[RunningServer] = []
    fairness = await start_in_process(
        "fairness",
        FairnessService,
        database_url,
        {"FAIRNESS_SEED_KEY": base64.b64encode(bytes(32)).decode()},
        DATA_DIR=str(tmp_path),
    )
    servers.append(fairness)
    mm_port = free_port()
    reporting = {"FAIRNESS_ADDRESS": fairness.address, "MATCHMAKING_ADDRESS": f"127.0.0.1:{mm_port}"}
    gin = await start_in_process("rules-gin", gin_rules_service, database_url, reporting)
    chess = await start_in_process("rules-chess", chess_rules_service, database_url, reporting)
    servers += [gin, chess]
    routes = {"RULES_GIN_ADDRESSES": gin.address, "RULES_CHESS_ADDRESSES": chess.address}
    matchmaking = await start_in_process(
        "matchmaking",
        MatchmakingService,
        database_url,
        {**routes, "FAIRNESS_ADDRESS": fairness.address},
        GRPC_PORT=str(mm_port),
    )
    servers.append(matchmaking)
    gateway = await start_gateway(
        tmp_path,
        {
            **routes,
            "MATCHMAKING_ADDRESS": matchmaking.address,
            "FAIRNESS_ADDRESS": fairness.address,
            # The test's players act as fast as the machine allows (people make a few calls a second).
            "GATEWAY_CALL_RATE": "10000",
            "GATEWAY_CALL_BURST": "10000",
        },
    )
    servers.append(gateway)
    async with grpc.aio.insecure_channel(gateway.address) as channel:
        yield Platform(gateway_pb2_grpc.GatewayServiceStub(channel), chess.address)
    for server in reversed(servers):
        await server.stop(grace=0.5)


async def test_a_gin_match_through_the_gateway_ends_with_a_verifiable_proof(platform: Platform) -> None:
    gw = platform.gateway
    ann, ben = bearer("gin-ann"), bearer("gin-ben")
    lobby = gw.WatchLobby(pb.WatchLobbyRequest(), metadata=ann)
    await next_lobby(lobby, "subscribed")
    table = (await gw.CreateTable(GIN_TABLE, metadata=ann)).table
    await gw.JoinTable(pb.JoinTableRequest(table_id=table.table_id), metadata=ben)
    ready = (await next_lobby(lobby, "match_ready")).match_ready
    lobby.cancel()
    match_id = ready.match_id
    assert match_id.startswith("gin.0.")
    history = (await gw.GetMatchHistory(pb.GetMatchHistoryRequest(family="gin"), metadata=ann)).matches
    assert len(history[0].fairness_commitment) == 64  # published before the first card is dealt

    # Both players mix in their own seeds before the first deal (the match waits for them); nobody else
    # can, and the seat is the caller's.
    await refused(
        gw.AddClientSeed(
            pb.AddClientSeedRequest(match_id=match_id, client_seed=b"x"), metadata=bearer("eve")
        ),
        grpc.StatusCode.PERMISSION_DENIED,
        "not seated",
    )
    seeds = {0: bytes(range(32)), 1: bytes(range(100, 132))}
    for seat, player in ((1, ben), (0, ann)):
        added = await gw.AddClientSeed(
            pb.AddClientSeedRequest(match_id=match_id, client_seed=seeds[seat]), metadata=player
        )
        assert added.seat == seat
    assert added.seeds == 2
    update = (await gw.GetMatch(pb.GetMatchRequest(match_id=match_id), metadata=ann)).update
    for _ in range(100):  # dealt at once now that both seeds are in (the window is 5 s)
        if update.HasField("to_move"):
            break
        await asyncio.sleep(0.02)
        update = (await gw.GetMatch(pb.GetMatchRequest(match_id=match_id), metadata=ann)).update
    assert update.HasField("to_move")
    await refused(
        gw.AddClientSeed(pb.AddClientSeedRequest(match_id=match_id, client_seed=b"late"), metadata=ann),
        grpc.StatusCode.FAILED_PRECONDITION,
        "",
    )

    # No proof while the match is on: the seed would reveal the stock and the other hand.
    await refused(
        gw.GetFairnessProof(pb.GetFairnessProofRequest(match_id=match_id), metadata=ben),
        grpc.StatusCode.FAILED_PRECONDITION,
        "",
    )

    players = {0: ann, 1: ben}
    update = (await gw.GetMatch(pb.GetMatchRequest(match_id=match_id), metadata=ann)).update
    for _ in range(3000):
        if update.status == rules_pb2.MATCH_STATUS_FINISHED:
            break
        mover = update.to_move
        mine = (await gw.GetMatch(pb.GetMatchRequest(match_id=match_id), metadata=players[mover])).update
        assert mine.legal_actions, "the player to move is offered their legal actions"
        submitted = await gw.SubmitAction(
            pb.SubmitActionRequest(
                match_id=match_id,
                idempotency_key=f"{match_id}-{mine.sequence}",
                action=rules_pb2.Action(gin=gin_pb2.GinAction(action=greedy(mine))),
            ),
            metadata=players[mover],
        )
        assert submitted.seat == mover  # the seat comes from the token
        update = submitted.update
    assert update.result.termination == rules_pb2.TERMINATION_HANDS_WON

    # The opponent's hand never reached a player while a hand was on; the spectator saw no hand at all.
    whole = pb.WatchMatchRequest(match_id=match_id)
    watched = [r.update async for r in gw.WatchMatch(whole, metadata=ann)]
    ben_watched = [r.update async for r in gw.WatchMatch(whole, metadata=ben)]
    for mine, theirs in zip(watched, ben_watched, strict=True):
        view = mine.view.gin
        if view.phase in (gin_pb2.PHASE_UPCARD_OFFER, gin_pb2.PHASE_DRAW, gin_pb2.PHASE_DISCARD):
            public = {c for s in view.seats if s.seat == 1 for c in s.known_cards}
            assert not (set(theirs.view.gin.hand) - public) & set(view.hand)

    for viewer in (ann, ben, bearer("gin-auditor")):
        asked = pb.GetFairnessProofRequest(match_id=match_id)
        proof_reply = await gw.GetFairnessProof(asked, metadata=viewer)
        assert proof_reply.commitment == history[0].fairness_commitment
        proof = Proof.from_json(proof_reply.proof_json)
        assert verify(proof).ok
        assert {d.stream for d in proof.draws} == {"dealer", "shuffle"}
        assert {(c.seat, c.seed) for c in proof.client_seeds} == set(seeds.items())

    # Ratings moved for the family: the winner up, the loser down.
    for _ in range(50):
        ratings = (await gw.GetRatings(pb.GetRatingsRequest(), metadata=ann)).ratings
        if any(r.family == "gin" and r.games for r in ratings):
            break
        await asyncio.sleep(0.05)
    gin_rating = next(r for r in ratings if r.family == "gin")
    assert (gin_rating.rating > 1500) == (update.result.winner == 0)


async def test_a_chess_match_has_no_fairness_proof(platform: Platform) -> None:
    await refused(
        platform.gateway.GetFairnessProof(
            pb.GetFairnessProofRequest(match_id="chess.0.nochance"), metadata=bearer("someone")
        ),
        grpc.StatusCode.NOT_FOUND,
        "",
    )
    await refused(
        platform.gateway.GetFairnessProof(
            pb.GetFairnessProofRequest(match_id="no-dots"), metadata=bearer("x")
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "",
    )
