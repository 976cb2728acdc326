"""Gin rummy lobby tables over real gRPC, on SQLite and PostgreSQL (matchmaking, rules-gin and fairness):
each variant (seed 000: "The table creator picks the variant"), the best of five (first to 3 hands), every
lobby clock and either disconnect policy make a match carrying exactly those; other match lengths and clocks
are refused with the reason; quick match pairs only equal pools; a result moves gin's Elo only."""

from __future__ import annotations

import pytest
from skillclassics.gin.v1 import gin_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.rules.v1 import rules_pb2

from tests.services.matchmaking.family_lobby import (
    MINUTE,
    FamilyPlatform,
    a_result_moves_only_this_familys_elo,
    module_platform,
    quick_match_pairs_only_equal_pools,
    refused_on_tables_and_queue,
    table_makes_its_match,
)

platform = module_platform("gin")

FORFEIT, STAND_IN = pb.DISCONNECT_POLICY_FORFEIT, pb.DISCONNECT_POLICY_STAND_IN


def options(variant: gin_pb2.Variant.ValueType, hands_to_win: int = 0) -> rules_pb2.MatchOptions:
    return rules_pb2.MatchOptions(gin=gin_pb2.GinOptions(variant=variant, hands_to_win=hands_to_win))


def clock(minutes: int, increment_s: int = 0) -> rules_pb2.TimeControl:
    return rules_pb2.TimeControl(base_ms=minutes * MINUTE, increment_ms=increment_s * 1000)


@pytest.mark.parametrize(
    ("table_options", "time_control", "policy"),
    [
        (options(gin_pb2.VARIANT_STANDARD), clock(5), pb.DISCONNECT_POLICY_UNSPECIFIED),
        (options(gin_pb2.VARIANT_STRAIGHT, 3), clock(15, 5), STAND_IN),
        (options(gin_pb2.VARIANT_OKLAHOMA), clock(30, 10), FORFEIT),
        (options(gin_pb2.VARIANT_OKLAHOMA, 3), clock(10), STAND_IN),
    ],
    ids=["standard", "straight-stand-in", "oklahoma", "oklahoma-stand-in"],
)
async def test_a_table_with_each_offered_option_makes_a_match_with_exactly_those(
    platform: FamilyPlatform,
    table_options: rules_pb2.MatchOptions,
    time_control: rules_pb2.TimeControl,
    policy: pb.DisconnectPolicy.ValueType,
) -> None:
    match = await table_makes_its_match(platform, table_options, time_control, policy)
    assert match.options.gin.variant == table_options.gin.variant
    assert match.options.gin.hands_to_win == 3  # best of five (000), whether said (3) or not (0)


async def test_options_and_clocks_the_lobby_does_not_offer_are_refused_with_the_reason(
    platform: FamilyPlatform,
) -> None:
    for hands in (1, 5):
        await refused_on_tables_and_queue(
            platform,
            options(gin_pb2.VARIANT_STANDARD, hands),
            clock(10),
            "best of five",
            why="OPTIONS_NOT_OFFERED",
        )
    for refused_clock in (
        clock(3),
        clock(10, 2),
        rules_pb2.TimeControl(base_ms=10 * MINUTE, periods=3, period_ms=30_000),
    ):
        await refused_on_tables_and_queue(
            platform,
            options(gin_pb2.VARIANT_STANDARD),
            refused_clock,
            "gin lobby clocks are 5, 10, 15, 20, 30 minutes",
            why="TIME_CONTROL_NOT_OFFERED",
        )


async def test_quick_match_pairs_only_the_same_variant_clock_and_policy(platform: FamilyPlatform) -> None:
    oklahoma = options(gin_pb2.VARIANT_OKLAHOMA)
    await quick_match_pairs_only_equal_pools(
        platform,
        oklahoma,
        clock(10, 5),
        STAND_IN,
        different=[
            (oklahoma, clock(10, 5), FORFEIT),
            (options(gin_pb2.VARIANT_STRAIGHT), clock(10, 5), STAND_IN),
            (oklahoma, clock(10, 10), STAND_IN),
        ],
    )


async def test_a_result_moves_gins_elo_and_no_other(platform: FamilyPlatform) -> None:
    await a_result_moves_only_this_familys_elo(
        platform, options(gin_pb2.VARIANT_STANDARD), clock(5), STAND_IN
    )
