"""Matchmaking for a family that uses chance (gin rummy) over real gRPC, with fairness running (and then
not), on SQLite and PostgreSQL: the commitment made before the match, joins refused before any
commitment is asked for, and nothing half-done when fairness is down."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc
from skillclassics.gin.v1 import gin_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.matchmaking.v1 import matchmaking_pb2_grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc
from sqlalchemy import func, select

from libs.persistence import Database
from libs.persistence.schema import fairness_commitments, mm_matches
from tests.services.matchmaking.test_matchmaking_service import (
    FAILED,
    Platform,
    next_event,
    running_platform,
)
from tests.support import backend_channel, refused, start_fairness

UNAVAILABLE = grpc.StatusCode.UNAVAILABLE


@pytest.fixture
async def platform(database_url: str, tmp_path: Path) -> AsyncIterator[Platform]:
    async with running_platform(database_url, tmp_path, chance=True) as running:
        yield running


def gin_table(player: str) -> pb.CreateTableRequest:
    return pb.CreateTableRequest(
        player_id=player,
        family="gin",
        options=rules_pb2.MatchOptions(gin=gin_pb2.GinOptions(variant=gin_pb2.VARIANT_STANDARD)),
        time_control=rules_pb2.TimeControl(base_ms=10 * 60_000, increment_ms=5_000),
        entry_fee_minor=250,
        currency="USD",
        visibility=pb.VISIBILITY_PUBLIC,
        idempotency_key=uuid.uuid4().hex,
    )


def gin_queue(player: str) -> pb.EnterQueueRequest:
    table = gin_table(player)
    return pb.EnterQueueRequest(
        player_id=player,
        family="gin",
        options=table.options,
        time_control=table.time_control,
        entry_fee_minor=table.entry_fee_minor,
        currency=table.currency,
    )


async def counts(platform: Platform) -> tuple[int, int]:
    """How many fairness commitments and matchmaking matches the shared database holds."""
    db = Database(platform.database_url)
    try:
        async with db.connect() as conn:
            commitments = await conn.scalar(select(func.count()).select_from(fairness_commitments))
            matches = await conn.scalar(select(func.count()).select_from(mm_matches))
    finally:
        await db.dispose()
    return int(commitments or 0), int(matches or 0)


async def fairness_down(platform: Platform) -> int:
    """Stop fairness; its port, to bring it back on."""
    assert platform.fairness is not None
    port = platform.fairness.port
    await platform.fairness.stop(grace=0.5)
    return port


async def fairness_back(platform: Platform, port: int, data_dir: Path) -> None:
    platform.fairness = await start_fairness(platform.database_url, data_dir, GRPC_PORT=str(port))


async def test_a_gin_table_join_makes_the_match_with_a_fairness_commitment(platform: Platform) -> None:
    mm = platform.mm
    assert platform.fairness is not None
    assert platform.gin is not None
    lobby = {p: mm.WatchLobby(pb.WatchLobbyRequest(player_id=p)) for p in ("ann", "ben")}
    for stream in lobby.values():
        await next_event(stream, "subscribed")
    table = (await mm.CreateTable(gin_table("ann"))).table
    joined = (await mm.JoinTable(pb.JoinTableRequest(player_id="ben", table_id=table.table_id))).table
    assert joined.status == pb.TABLE_STATUS_PLAYING
    assert joined.match_id.startswith("gin.0.")
    ready = {p: (await next_event(s, "match_ready")).match_ready for p, s in lobby.items()}
    assert (ready["ann"].seat, ready["ben"].seat) == (0, 1)
    assert ready["ann"].match_id == ready["ben"].match_id == joined.match_id

    [played] = (await mm.GetMatchHistory(pb.GetMatchHistoryRequest(player_id="ben"))).matches
    assert len(played.fairness_commitment) == 64
    async with backend_channel(platform.fairness.address, "operator") as channel:
        committed = await fairness_pb2_grpc.FairnessServiceStub(channel).GetCommitment(
            fairness_pb2.GetCommitmentRequest(match_id=joined.match_id)
        )
    assert committed.commitment == played.fairness_commitment  # the one fairness holds for this match
    async with backend_channel(platform.gin.address, "gateway") as channel:
        match = await rules_pb2_grpc.RulesServiceStub(channel).GetMatch(
            rules_pb2.GetMatchRequest(match_id=joined.match_id, spectator=True)
        )
    assert [s.player_id for s in match.seats] == ["ann", "ben"]
    for stream in lobby.values():
        stream.cancel()


async def test_refused_joins_ask_fairness_for_nothing(platform: Platform) -> None:
    mm = platform.mm
    table = (await mm.CreateTable(gin_table("host"))).table
    other = (await mm.CreateTable(gin_table("elsewhere"))).table
    before = await counts(platform)
    await refused(
        mm.JoinTable(pb.JoinTableRequest(player_id="host", table_id=table.table_id)), FAILED, "own table"
    )
    await refused(  # busy: waiting at their own table
        mm.JoinTable(pb.JoinTableRequest(player_id="elsewhere", table_id=table.table_id)), FAILED, "already"
    )
    assert await counts(platform) == before
    await mm.JoinTable(pb.JoinTableRequest(player_id="guest", table_id=table.table_id))
    assert await counts(platform) == (before[0] + 1, before[1] + 1)  # the one join that went through
    await refused(
        mm.JoinTable(pb.JoinTableRequest(player_id="late", table_id=table.table_id)), FAILED, "not open"
    )
    await refused(  # busy: playing the match just made
        mm.JoinTable(pb.JoinTableRequest(player_id="guest", table_id=other.table_id)),
        FAILED,
        "already playing",
    )
    assert await counts(platform) == (before[0] + 1, before[1] + 1)


async def test_fairness_down_refuses_the_join_and_leaves_the_table_open(
    platform: Platform, tmp_path: Path
) -> None:
    mm = platform.mm
    table = (await mm.CreateTable(gin_table("t-host"))).table
    full = (await mm.CreateTable(gin_table("f-host"))).table
    await mm.JoinTable(pb.JoinTableRequest(player_id="f-guest", table_id=full.table_id))
    before = await counts(platform)
    port = await fairness_down(platform)

    # The checks that need no commitment still answer with their own reasons.
    await refused(
        mm.JoinTable(pb.JoinTableRequest(player_id="t-host", table_id=table.table_id)), FAILED, "own table"
    )
    await refused(
        mm.JoinTable(pb.JoinTableRequest(player_id="t-guest", table_id=full.table_id)), FAILED, "not open"
    )
    await refused(
        mm.JoinTable(pb.JoinTableRequest(player_id="f-guest", table_id=table.table_id)),
        FAILED,
        "already playing",
    )
    # A join that would go through needs the commitment: refused as unavailable, with the reason.
    await refused(
        mm.JoinTable(pb.JoinTableRequest(player_id="t-guest", table_id=table.table_id)),
        UNAVAILABLE,
        "fairness service could not commit",
    )
    assert await counts(platform) == before  # no match row, no commitment
    [still] = [
        t
        for t in (await mm.ListTables(pb.ListTablesRequest(family="gin"))).tables
        if t.table_id == table.table_id
    ]
    assert still.status == pb.TABLE_STATUS_OPEN
    assert [s.player_id for s in still.seats] == ["t-host"]
    assert (await mm.GetMatchHistory(pb.GetMatchHistoryRequest(player_id="t-guest"))).matches == []

    await fairness_back(platform, port, tmp_path)
    async with asyncio.timeout(30):  # matchmaking's channel to fairness reconnects after its back-off
        while True:
            try:
                joined = await mm.JoinTable(pb.JoinTableRequest(player_id="t-guest", table_id=table.table_id))
                break
            except grpc.aio.AioRpcError as error:
                if error.code() != UNAVAILABLE:
                    raise
                await asyncio.sleep(0.2)
    assert joined.table.status == pb.TABLE_STATUS_PLAYING
    [played] = (await mm.GetMatchHistory(pb.GetMatchHistoryRequest(player_id="t-guest"))).matches
    assert len(played.fairness_commitment) == 64


async def test_fairness_down_keeps_queued_players_queued_until_it_is_back(
    platform: Platform, tmp_path: Path
) -> None:
    mm = platform.mm
    lobby = mm.WatchLobby(pb.WatchLobbyRequest(player_id="qa"))
    await next_event(lobby, "subscribed")
    port = await fairness_down(platform)
    await mm.EnterQueue(gin_queue("qa"))
    await mm.EnterQueue(gin_queue("qb"))
    await asyncio.sleep(1.0)  # about four pairing rounds, each failing to get a commitment
    assert await counts(platform) == (0, 0)
    for player in ("qa", "qb"):  # both still queued: entering again is refused as such
        await refused(mm.EnterQueue(gin_queue(player)), FAILED, "already in the queue")

    await fairness_back(platform, port, tmp_path)
    ready = (await next_event(lobby, "match_ready", within=30)).match_ready
    assert (ready.opponent_id, ready.seat) == ("qb", 0)  # qa waited longer: seat 0
    [played] = (await mm.GetMatchHistory(pb.GetMatchHistoryRequest(player_id="qb"))).matches
    assert played.match_id == ready.match_id
    assert len(played.fairness_commitment) == 64
    assert not (await mm.LeaveQueue(pb.LeaveQueueRequest(player_id="qb"))).left  # paired, not queued
    lobby.cancel()


async def test_a_chance_family_without_fairness_configured_is_refused_up_front(database_url: str) -> None:
    async with running_platform(database_url) as platform:  # chess only, no FAIRNESS_ADDRESS
        await refused(platform.mm.CreateTable(gin_table("nofair")), UNAVAILABLE, "")
        mm_env = {**platform.mm_env, "RULES_GIN_ADDRESSES": platform.rules.address}
        platform.mm_env = mm_env  # a gin shard configured, fairness still not
        await platform.restart_matchmaking()
        async with backend_channel(platform.matchmaking.address, "gateway") as channel:
            stub = matchmaking_pb2_grpc.MatchmakingServiceStub(channel)
            await refused(stub.CreateTable(gin_table("nofair")), UNAVAILABLE, "FAIRNESS_ADDRESS")
            await refused(stub.EnterQueue(gin_queue("nofair")), UNAVAILABLE, "FAIRNESS_ADDRESS")
