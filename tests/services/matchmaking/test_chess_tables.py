"""Chess lobby tables over real gRPC, on SQLite and PostgreSQL (matchmaking and rules-chess): each ruleset
(contest, FIDE) and Skirmish Chess with its duel options, at every lobby clock, make a match carrying exactly
those and the forfeit rule; chess has no stand-in, so the stand-in policy is refused with the reason, as are
positions, clocks and duel settings the lobby does not offer; quick match pairs only equal pools; a result
moves chess's Elo only. (Skirmish Chess's random setups and draws: test_skirmish_tables.py.)"""

from __future__ import annotations

import asyncio

import pytest
from skillclassics.chess.v1 import chess_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.rules.v1 import rules_pb2

from tests.services.matchmaking.family_lobby import (
    MINUTE,
    FamilyPlatform,
    a_result_moves_only_this_familys_elo,
    fresh_fee,
    module_platform,
    players,
    queue_request,
    quick_match_pairs_only_equal_pools,
    refused_on_tables_and_queue,
    table_makes_its_match,
    the_stand_in_policy_is_refused,
)

platform = module_platform("chess")

CONTEST = rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions(ruleset=chess_pb2.RULESET_CONTEST))
FIDE = rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions(ruleset=chess_pb2.RULESET_FIDE))
SKIRMISH = rules_pb2.MatchOptions(
    chess=chess_pb2.ChessOptions(
        ruleset=chess_pb2.RULESET_FIDE,
        variant=chess_pb2.VARIANT_SKIRMISH,
        skirmish=chess_pb2.SkirmishOptions(
            preset=chess_pb2.SKIRMISH_PRESET_FORTRESS,
            clock_base_ms=120_000,
            clock_increment_ms=2_000,
            countdown_ms=5_000,
            no_odds=True,
            draw_rule=chess_pb2.SKIRMISH_DRAW_RULE_DEFENDER_WINS,
        ),
    )
)


def minutes(n: int, increment_ms: int = 0) -> rules_pb2.TimeControl:
    return rules_pb2.TimeControl(base_ms=n * MINUTE, increment_ms=increment_ms)


@pytest.mark.parametrize(
    ("table_options", "time_control", "policy"),
    [
        (CONTEST, minutes(3), pb.DISCONNECT_POLICY_UNSPECIFIED),
        (rules_pb2.MatchOptions(), minutes(5), pb.DISCONNECT_POLICY_FORFEIT),  # the defaults: contest
        (FIDE, minutes(10), pb.DISCONNECT_POLICY_FORFEIT),
        (FIDE, minutes(20), pb.DISCONNECT_POLICY_UNSPECIFIED),
        (SKIRMISH, minutes(30), pb.DISCONNECT_POLICY_FORFEIT),
    ],
    ids=["contest-3", "defaults-5", "fide-10", "fide-20", "skirmish-30"],
)
async def test_a_table_with_each_offered_option_makes_a_match_with_exactly_those(
    platform: FamilyPlatform,
    table_options: rules_pb2.MatchOptions,
    time_control: rules_pb2.TimeControl,
    policy: pb.DisconnectPolicy.ValueType,
) -> None:
    match = await table_makes_its_match(platform, table_options, time_control, policy)
    assert match.options.chess.ruleset == (table_options.chess.ruleset or chess_pb2.RULESET_CONTEST)
    assert match.options.chess.skirmish == table_options.chess.skirmish


async def test_chess_has_no_stand_in(platform: FamilyPlatform) -> None:
    await the_stand_in_policy_is_refused(platform, CONTEST, minutes(5))


async def test_options_and_clocks_the_lobby_does_not_offer_are_refused_with_the_reason(
    platform: FamilyPlatform,
) -> None:
    fen = rules_pb2.MatchOptions()
    fen.CopyFrom(FIDE)
    fen.chess.initial_fen = "4k3/8/8/8/8/8/8/4K2R w K - 0 1"
    await refused_on_tables_and_queue(
        platform, fen, minutes(5), "initial position", why="OPTIONS_NOT_OFFERED"
    )
    odd_duel = rules_pb2.MatchOptions()
    odd_duel.CopyFrom(SKIRMISH)
    odd_duel.chess.skirmish.clock_base_ms = 45_000
    await refused_on_tables_and_queue(
        platform, odd_duel, minutes(5), "duel clocks", why="OPTIONS_NOT_OFFERED"
    )
    for clock in (minutes(7), minutes(5, 2_000)):
        await refused_on_tables_and_queue(
            platform,
            CONTEST,
            clock,
            "chess lobby clocks are 3, 5, 10, 20, 30 minutes",
            why="TIME_CONTROL_NOT_OFFERED",
        )


async def test_quick_match_pairs_only_the_same_ruleset_and_clock(platform: FamilyPlatform) -> None:
    await quick_match_pairs_only_equal_pools(
        platform,
        FIDE,
        minutes(10),
        pb.DISCONNECT_POLICY_FORFEIT,
        different=[
            (CONTEST, minutes(10), pb.DISCONNECT_POLICY_FORFEIT),
            (FIDE, minutes(20), pb.DISCONNECT_POLICY_FORFEIT),
        ],
    )


async def test_the_forfeit_rule_said_or_unsaid_is_one_pool(platform: FamilyPlatform) -> None:
    fee = fresh_fee()
    said, unsaid = players("said", "unsaid")
    first = await platform.mm.EnterQueue(
        queue_request("chess", said, CONTEST, minutes(3), fee, pb.DISCONNECT_POLICY_FORFEIT)
    )
    second = await platform.mm.EnterQueue(
        queue_request("chess", unsaid, CONTEST, minutes(3), fee, pb.DISCONNECT_POLICY_UNSPECIFIED)
    )
    assert first.pool == second.pool
    async with asyncio.timeout(10):  # paired with each other
        while True:
            history = await platform.mm.GetMatchHistory(pb.GetMatchHistoryRequest(player_id=said))
            if history.matches:
                break
            await asyncio.sleep(0.05)
    assert history.matches[0].opponent_id == unsaid


async def test_a_result_moves_chesss_elo_and_no_other(platform: FamilyPlatform) -> None:
    await a_result_moves_only_this_familys_elo(platform, FIDE, minutes(5))
