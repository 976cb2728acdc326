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
from skillclassics.chess.v1 import chess_pb2
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.gin.v1 import gin_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm_pb
from skillclassics.rules.v1 import rules_pb2

from libs.fairness import Proof, UsedDraw, verify
from libs.runtime import RunningServer
from services.fairness.service import FairnessService
from services.matchmaking.service import MatchmakingService
from services.rules_chess.service import chess_rules_service
from services.rules_gin.service import gin_rules_service
from tests.services.gateway.test_gateway_service import Metadata, bearer, next_lobby, refused, start_gateway
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


async def sit_down(
    gw: gateway_pb2_grpc.GatewayServiceStub, table: pb.CreateTableRequest, host: Metadata, guest: Metadata
) -> mm_pb.MatchReady:
    """``host`` opens ``table`` (listening to the lobby first, so the news cannot be missed) and ``guest``
    joins it: what the lobby tells ``host`` of the match made."""
    lobby = gw.WatchLobby(pb.WatchLobbyRequest(), metadata=host)
    await next_lobby(lobby, "subscribed")
    opened = (await gw.CreateTable(table, metadata=host)).table
    await gw.JoinTable(pb.JoinTableRequest(table_id=opened.table_id), metadata=guest)
    ready: mm_pb.MatchReady = (await next_lobby(lobby, "match_ready")).match_ready
    lobby.cancel()
    return ready


async def test_a_gin_match_through_the_gateway_ends_with_a_verifiable_proof(platform: Platform) -> None:
    gw = platform.gateway
    ann, ben = bearer("gin-ann"), bearer("gin-ben")
    ready = await sit_down(gw, GIN_TABLE, ann, ben)
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


async def first_update(call: grpc.aio.UnaryStreamCall) -> rules_pb2.MatchUpdate:
    async with asyncio.timeout(5):
        response = await call.read()
    update: rules_pb2.MatchUpdate = response.update
    return update


async def first_play_update(
    gw: gateway_pb2_grpc.GatewayServiceStub, player: Metadata, match_id: str, from_sequence: int = 0
) -> rules_pb2.MatchUpdate:
    """The first update of a Play stream opened on ``match_id`` (after its ``opened``)."""
    call = gw.Play(metadata=player)
    try:
        await call.write(pb.PlayRequest(open=pb.PlayOpen(match_id=match_id, from_sequence=from_sequence)))
        async with asyncio.timeout(5):
            opened: pb.PlayResponse = await call.read()
            assert opened.WhichOneof("kind") == "opened", opened
            while True:
                response: pb.PlayResponse = await call.read()
                if response.WhichOneof("kind") == "update":
                    return response.update
    finally:
        call.cancel()


async def test_players_are_told_the_commitment_before_the_first_draw_and_on_every_stream(
    platform: Platform,
) -> None:
    gw = platform.gateway
    ann, ben, fan = bearer("pin-ann"), bearer("pin-ben"), bearer("pin-fan")
    lobbies = [gw.WatchLobby(pb.WatchLobbyRequest(), metadata=player) for player in (ann, ben)]
    for lobby in lobbies:
        await next_lobby(lobby, "subscribed")
    table = (await gw.CreateTable(GIN_TABLE, metadata=ann)).table
    await gw.JoinTable(pb.JoinTableRequest(table_id=table.table_id), metadata=ben)
    readies = [(await next_lobby(lobby, "match_ready")).match_ready for lobby in lobbies]
    for lobby in lobbies:
        lobby.cancel()
    match_id = readies[0].match_id
    history = (await gw.GetMatchHistory(pb.GetMatchHistoryRequest(family="gin"), metadata=ann)).matches
    commitment = history[0].fairness_commitment
    assert len(commitment) == 64
    assert history[0].fairness_version == 1
    # MatchReady names the commitment and its version, to both players, before anything is dealt.
    assert [(r.seat, r.fairness_commitment, r.fairness_version) for r in readies] == [
        (0, commitment, 1),
        (1, commitment, 1),
    ]

    # Before the first draw (no seed is in yet, so the deal waits): every view names it, and so does the
    # first update of every stream: WatchMatch (seated or spectator) and Play.
    before = await first_update(gw.WatchMatch(pb.WatchMatchRequest(match_id=match_id), metadata=ann))
    assert before.view.gin.phase == gin_pb2.PHASE_DEALING
    assert (before.fairness_commitment, before.fairness_version) == (commitment, 1)
    spectated = gw.WatchMatch(pb.WatchMatchRequest(match_id=match_id, spectator=True), metadata=fan)
    assert (await first_update(spectated)).fairness_commitment == commitment
    spectated.cancel()
    played = await first_play_update(gw, ben, match_id)
    assert (played.fairness_commitment, played.fairness_version) == (commitment, 1)
    shown = (await gw.GetMatch(pb.GetMatchRequest(match_id=match_id), metadata=ben)).update
    assert shown.fairness_commitment == commitment

    for player in (ann, ben):
        await gw.AddClientSeed(
            pb.AddClientSeedRequest(match_id=match_id, client_seed=bytes(range(32))), metadata=player
        )
    update = shown
    for _ in range(250):
        update = (await gw.GetMatch(pb.GetMatchRequest(match_id=match_id), metadata=ann)).update
        if update.HasField("to_move"):
            break
        await asyncio.sleep(0.02)
    assert update.HasField("to_move"), "dealt once both seeds were in"

    # After the draws, a stream opened from a later sequence still starts with the commitment (its first
    # update only), and the chance events name their draws (stream, index), never their values.
    watched = gw.WatchMatch(pb.WatchMatchRequest(match_id=match_id), metadata=ann)
    whole = [await first_update(watched) for _ in range(update.sequence)]
    watched.cancel()
    chance = [u for u in whole if u.event.kind == "chance"]
    assert [(u.event.draw.stream, u.event.draw.index) for u in chance] == [("dealer", 0), ("shuffle", 0)]
    assert all(not u.event.draw.values for u in chance)
    assert [u.sequence for u in whole if u.fairness_commitment] == [
        u.sequence for u in whole if u.sequence < chance[0].sequence
    ]  # from the start: the updates before the first draw (the first one among them)
    late = gw.WatchMatch(
        pb.WatchMatchRequest(match_id=match_id, from_sequence=chance[0].sequence), metadata=ann
    )
    resumed = await first_update(late)
    late.cancel()
    assert resumed.sequence == chance[0].sequence + 1  # made after the first draw...
    assert not whole[resumed.sequence - 1].fairness_commitment  # ...so it names it only as a first update
    assert (resumed.fairness_commitment, resumed.fairness_version) == (commitment, 1)
    again = await first_play_update(gw, ben, match_id, from_sequence=chance[0].sequence)
    assert again.fairness_commitment == commitment

    # Once over, the record lists the draws the match used, with the values the game used: exactly the
    # proof's draws.
    await gw.SubmitAction(
        pb.SubmitActionRequest(
            match_id=match_id,
            idempotency_key="pin-resign",
            action=rules_pb2.Action(resign=rules_pb2.Resign()),
        ),
        metadata=ann,
    )
    record = await gw.GetRecord(pb.GetRecordRequest(match_id=match_id), metadata=fan)
    assert (record.fairness_commitment, record.fairness_version) == (commitment, 1)
    for _ in range(250):
        try:
            proof_reply = await gw.GetFairnessProof(
                pb.GetFairnessProofRequest(match_id=match_id), metadata=fan
            )
            break
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.FAILED_PRECONDITION:  # not finished yet: wait, else fail
                raise
            await asyncio.sleep(0.02)
    proof = Proof.from_json(proof_reply.proof_json)
    used = [UsedDraw(d.stream, d.index, tuple(d.values)) for d in record.fairness_draws]
    assert [(d.stream, d.index) for d in used] == [("dealer", 0), ("shuffle", 0)]
    assert verify(proof, commitment=commitment, client_seeds={0: bytes(range(32))}, used_draws=used).ok
    assert {(d.stream, d.index, d.values) for d in proof.draws} == {
        (d.stream, d.index, d.values) for d in used
    }


async def test_a_chess_match_announces_no_commitment_where_a_gin_match_does(platform: Platform) -> None:
    gw = platform.gateway
    chess_table = pb.CreateTableRequest(
        family="chess",
        options=rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions()),
        time_control=rules_pb2.TimeControl(base_ms=5 * 60_000),
        currency="USD",
        idempotency_key="pin-chess",
    )
    gin_table = pb.CreateTableRequest()
    gin_table.CopyFrom(GIN_TABLE)
    gin_table.idempotency_key = "pin-gin"
    announced: dict[str, tuple[str, int, str, int, str, int]] = {}
    for request in (chess_table, gin_table):  # a player plays one match at a time: two pairs of players
        ann, ben = bearer(f"pin-{request.family}-ann"), bearer(f"pin-{request.family}-ben")
        ready = await sit_down(gw, request, ann, ben)
        assert ready.match_id.startswith(f"{request.family}.")
        watched = gw.WatchMatch(pb.WatchMatchRequest(match_id=ready.match_id), metadata=ann)
        first = await first_update(watched)
        watched.cancel()
        assert first.sequence == 1
        played = await first_play_update(gw, ben, ready.match_id)
        announced[request.family] = (
            ready.fairness_commitment,
            ready.fairness_version,
            first.fairness_commitment,
            first.fairness_version,
            played.fairness_commitment,
            played.fairness_version,
        )
    assert announced["chess"] == ("", 0, "", 0, "", 0)  # no chance, nothing to commit to
    commitment = announced["gin"][0]
    assert len(commitment) == 64
    assert announced["gin"] == (commitment, 1, commitment, 1, commitment, 1)


async def test_a_tables_disconnect_policy_goes_through_the_gateway_to_matchmaking_and_the_match(
    platform: Platform,
) -> None:
    """CreateTable, ListTables and EnterQueue through the gateway carry the disconnect policy to
    matchmaking: a gin table with the stand-in is listed with it (and under its filter only), its match
    is made with seed 002's 120 s stand-in, and a queue entry asking for it waits in a pool of its own; a
    chess table asking for a stand-in is refused, chess having none."""
    gw = platform.gateway
    host, guest = bearer("policy-host"), bearer("policy-guest")
    table = pb.CreateTableRequest()
    table.CopyFrom(GIN_TABLE)
    table.idempotency_key = "gin-stand-in-table"
    table.disconnect_policy = mm_pb.DISCONNECT_POLICY_STAND_IN
    opened = (await gw.CreateTable(table, metadata=host)).table
    assert opened.disconnect_policy == mm_pb.DISCONNECT_POLICY_STAND_IN
    listed = (await gw.ListTables(pb.ListTablesRequest(family="gin"), metadata=guest)).tables
    assert [t.disconnect_policy for t in listed if t.table_id == opened.table_id] == [
        mm_pb.DISCONNECT_POLICY_STAND_IN
    ]
    for policy, found in ((mm_pb.DISCONNECT_POLICY_STAND_IN, True), (mm_pb.DISCONNECT_POLICY_FORFEIT, False)):
        filtered = await gw.ListTables(
            pb.ListTablesRequest(family="gin", disconnect_policy=policy), metadata=guest
        )
        assert (opened.table_id in {t.table_id for t in filtered.tables}) is found
    joined = (await gw.JoinTable(pb.JoinTableRequest(table_id=opened.table_id), metadata=guest)).table
    match = await gw.GetMatch(pb.GetMatchRequest(match_id=joined.match_id), metadata=guest)
    assert (match.seat, match.stand_in_after_ms) == (1, 120_000)

    queued = await gw.EnterQueue(
        pb.EnterQueueRequest(
            family="gin",
            options=GIN_TABLE.options,
            time_control=GIN_TABLE.time_control,
            entry_fee_minor=250,
            currency="USD",
            disconnect_policy=mm_pb.DISCONNECT_POLICY_STAND_IN,
        ),
        metadata=bearer("policy-queued"),
    )
    assert queued.pool.endswith("|stand-in")
    assert (await gw.LeaveQueue(pb.LeaveQueueRequest(), metadata=bearer("policy-queued"))).left

    chess = pb.CreateTableRequest(
        family="chess",
        time_control=rules_pb2.TimeControl(base_ms=5 * 60_000),
        currency="USD",
        idempotency_key="chess-stand-in-table",
        disconnect_policy=mm_pb.DISCONNECT_POLICY_STAND_IN,
    )
    await refused(
        gw.CreateTable(chess, metadata=bearer("policy-chess")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "chess has no stand-in",
    )
