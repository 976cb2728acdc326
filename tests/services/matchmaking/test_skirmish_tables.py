"""Skirmish Chess in the lobby over real gRPC, on SQLite and PostgreSQL: tables and quick match with its
options, the options the lobby does not offer refused with their reason, random duel setups needing the
fairness service (a commitment made before the match, the setup drawn from it), and a drawn game
counted half in Elo."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from skillclassics.chess.v1 import chess_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.rules.v1 import rules_pb2

from tests.services.matchmaking.test_matchmaking_service import (
    Platform,
    next_event,
    queue_request,
    rated_games,
    running_platform,
    table_request,
)
from tests.support import refused

INVALID = grpc.StatusCode.INVALID_ARGUMENT


def skirmish(**settings: object) -> rules_pb2.MatchOptions:
    duel = chess_pb2.SkirmishOptions(
        preset=chess_pb2.SKIRMISH_PRESET_CLASSIC,
        clock_base_ms=60_000,
        draw_rule=chess_pb2.SKIRMISH_DRAW_RULE_BOTH_STAY,
    )
    for name, value in settings.items():
        setattr(duel, name, value)
    return rules_pb2.MatchOptions(
        chess=chess_pb2.ChessOptions(
            ruleset=chess_pb2.RULESET_FIDE, variant=chess_pb2.VARIANT_SKIRMISH, skirmish=duel
        )
    )


def skirmish_table(player: str, options: rules_pb2.MatchOptions) -> pb.CreateTableRequest:
    request = table_request(player)
    request.options.CopyFrom(options)
    return request


@pytest.fixture
async def chance_platform(database_url: str, tmp_path: Path) -> AsyncIterator[Platform]:
    async with running_platform(database_url, tmp_path, chance=True) as running:
        yield running


@pytest.fixture
async def platform(database_url: str) -> AsyncIterator[Platform]:
    async with running_platform(database_url) as running:
        yield running


async def _move(platform: Platform, match_id: str, seat: int, notation: str) -> rules_pb2.MatchUpdate:
    reply = await platform.chess.SubmitAction(
        rules_pb2.SubmitActionRequest(
            match_id=match_id,
            seat=seat,
            idempotency_key=uuid.uuid4().hex,
            action=rules_pb2.Action(chess=chess_pb2.ChessAction(move=notation)),
        )
    )
    update: rules_pb2.MatchUpdate = reply.update
    return update


async def test_a_skirmish_table_is_listed_with_its_options_and_makes_a_skirmish_match(
    platform: Platform,
) -> None:
    mm = platform.mm
    options = skirmish(preset=chess_pb2.SKIRMISH_PRESET_WINGS, no_odds=True, countdown_ms=3_000)
    table = (await mm.CreateTable(skirmish_table("sk-host", options))).table
    [listed] = [
        t
        for t in (await mm.ListTables(pb.ListTablesRequest(family="chess"))).tables
        if t.table_id == table.table_id
    ]
    assert listed.options == options
    joined = await mm.JoinTable(pb.JoinTableRequest(player_id="sk-guest", table_id=table.table_id))
    match_id = joined.table.match_id
    for seat, notation in enumerate(["e4", "d5"]):
        await _move(platform, match_id, seat, notation)
    update = await _move(platform, match_id, 0, "exd5")
    assert update.view.chess.variant == chess_pb2.VARIANT_SKIRMISH
    assert update.view.chess.duel.preset == chess_pb2.SKIRMISH_PRESET_WINGS
    assert update.view.chess.duel.counting_down


async def test_options_the_lobby_does_not_offer_are_refused_with_the_reason(platform: Platform) -> None:
    mm = platform.mm
    for options, text in [
        (skirmish(clock_base_ms=45_000), "duel clocks of 30/60/120 s"),
        (skirmish(clock_increment_ms=1_000), "duel increments of 0/2/5 s"),
        (skirmish(countdown_ms=10_000), "countdowns of 0/3/5 s"),
    ]:
        await refused(
            mm.CreateTable(skirmish_table("picky", options)), INVALID, text, why="OPTIONS_NOT_OFFERED"
        )
    fen = skirmish()
    fen.chess.initial_fen = "4k3/8/8/8/8/8/8/4K2R w K - 0 1"
    await refused(
        mm.CreateTable(skirmish_table("picky", fen)),
        INVALID,
        "initial position",
        why="OPTIONS_NOT_OFFERED",
    )
    contest = skirmish()
    contest.chess.ruleset = chess_pb2.RULESET_CONTEST
    await refused(
        mm.CreateTable(skirmish_table("picky", contest)), INVALID, "FIDE", why="OPTIONS_NOT_OFFERED"
    )


async def test_random_setups_need_the_fairness_service(platform: Platform) -> None:
    options = skirmish(preset=chess_pb2.SKIRMISH_PRESET_RANDOM)
    await refused(
        platform.mm.CreateTable(skirmish_table("rnd", options)),
        grpc.StatusCode.UNAVAILABLE,
        "fairness",
        why="NOT_CONFIGURED",
    )
    await platform.mm.CreateTable(skirmish_table("fixed", skirmish()))  # a fixed preset needs none


async def test_quick_match_pairs_players_who_ask_for_the_same_skirmish(platform: Platform) -> None:
    mm = platform.mm
    watchers = {p: mm.WatchLobby(pb.WatchLobbyRequest(player_id=p)) for p in ("qa", "qb", "qc")}
    for stream in watchers.values():
        await next_event(stream, "subscribed")
    for player, options in [("qa", skirmish()), ("qc", skirmish(no_odds=True)), ("qb", skirmish())]:
        request = queue_request(player)
        request.options.CopyFrom(options)
        await mm.EnterQueue(request)
    ready_a = (await next_event(watchers["qa"], "match_ready")).match_ready
    ready_b = (await next_event(watchers["qb"], "match_ready")).match_ready
    assert ready_a.match_id == ready_b.match_id
    history = await mm.GetMatchHistory(pb.GetMatchHistoryRequest(player_id="qc"))
    assert history.matches == []  # no odds is another pool: nobody to play
    assert (await mm.LeaveQueue(pb.LeaveQueueRequest(player_id="qc"))).left
    for stream in watchers.values():
        stream.cancel()


async def test_a_random_setup_is_committed_before_the_match_and_drawn_from_it(
    chance_platform: Platform,
) -> None:
    mm = chance_platform.mm
    table = (
        await mm.CreateTable(skirmish_table("r-host", skirmish(preset=chess_pb2.SKIRMISH_PRESET_RANDOM)))
    ).table
    joined = await mm.JoinTable(pb.JoinTableRequest(player_id="r-guest", table_id=table.table_id))
    [played] = (await mm.GetMatchHistory(pb.GetMatchHistoryRequest(player_id="r-guest"))).matches
    assert len(played.fairness_commitment) == 64
    match_id = joined.table.match_id
    await _move(chance_platform, match_id, 0, "e4")
    await _move(chance_platform, match_id, 1, "d5")
    await _move(chance_platform, match_id, 0, "exd5")
    async with asyncio.timeout(10):  # the setup is drawn from fairness just after the capture is logged
        while True:
            got = await chance_platform.chess.GetMatch(
                rules_pb2.GetMatchRequest(match_id=match_id, spectator=True)
            )
            if got.update.view.chess.duel.fen:
                break
            await asyncio.sleep(0.05)
    duel = got.update.view.chess.duel
    assert duel.preset == chess_pb2.SKIRMISH_PRESET_RANDOM
    assert duel.fen  # drawn: the setup is there
    white, black = (
        duel.fen.split()[0].split("/")[-1] + duel.fen.split()[0].split("/")[-2],
        duel.fen.split()[0].split("/")[0] + duel.fen.split()[0].split("/")[1],
    )
    assert sorted(c for c in white if c.isalpha()) == sorted("KQRBNPPP")
    assert sorted(c for c in black if c.isalpha()) == sorted("kqrbnppp")


async def test_a_drawn_skirmish_game_counts_half_in_elo(platform: Platform) -> None:
    mm = platform.mm
    table = (await mm.CreateTable(skirmish_table("d-host", skirmish()))).table
    joined = await mm.JoinTable(pb.JoinTableRequest(player_id="d-guest", table_id=table.table_id))
    match_id = joined.table.match_id
    await _move(platform, match_id, 0, "e4")
    for seat, kind in [(1, chess_pb2.DRAW_ACTION_OFFER), (0, chess_pb2.DRAW_ACTION_ACCEPT)]:
        await chance_free_draw(platform, match_id, seat, kind)
    ratings = await rated_games(mm, "d-host", 1)
    [chess_rating] = [r for r in ratings.ratings if r.family == "chess"]
    assert chess_rating.rating == 1500  # a draw between equals moves nobody
    history = await mm.GetMatchHistory(pb.GetMatchHistoryRequest(player_id="d-guest"))
    assert history.matches[0].result.termination == rules_pb2.TERMINATION_DRAW_AGREED


async def chance_free_draw(
    platform: Platform, match_id: str, seat: int, kind: chess_pb2.DrawAction.ValueType
) -> None:
    await platform.chess.SubmitAction(
        rules_pb2.SubmitActionRequest(
            match_id=match_id,
            seat=seat,
            idempotency_key=uuid.uuid4().hex,
            action=rules_pb2.Action(chess=chess_pb2.ChessAction(draw=kind)),
        )
    )
