"""Backgammon lobby tables over real gRPC, on SQLite and PostgreSQL (matchmaking, rules-backgammon and
fairness): every option a table offers (variant; one game or a match to 1, 3, 5 or 9 points; automatic roll
and bear-off; 000's and 002's clocks; either disconnect policy) makes a match carrying exactly that; the
cube and what needs it, other lengths and other scoring are refused with the reason; quick match pairs only
equal pools; a result moves backgammon's Elo only."""

from __future__ import annotations

import pytest
from skillclassics.backgammon.v1 import backgammon_pb2 as bg
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

platform = module_platform("backgammon")

FORFEIT, STAND_IN = pb.DISCONNECT_POLICY_FORFEIT, pb.DISCONNECT_POLICY_STAND_IN
QUICK_002 = rules_pb2.TimeControl(
    base_ms=30_000, increment_ms=10_000, increment_within_ms=10_000, cap_ms=30_000
)
STANDARD_002 = rules_pb2.TimeControl(
    base_ms=120_000, increment_ms=20_000, increment_within_ms=20_000, cap_ms=120_000
)


def options(**given: object) -> rules_pb2.MatchOptions:
    return rules_pb2.MatchOptions(backgammon=bg.BackgammonOptions(**given))  # type: ignore[arg-type]


def minutes(n: int) -> rules_pb2.TimeControl:
    return rules_pb2.TimeControl(base_ms=n * MINUTE)


@pytest.mark.parametrize(
    ("given", "clock", "policy"),
    [
        ({"variant": bg.VARIANT_STANDARD}, minutes(3), pb.DISCONNECT_POLICY_UNSPECIFIED),
        ({"variant": bg.VARIANT_NACKGAMMON, "auto_roll": True}, QUICK_002, FORFEIT),
        ({"variant": bg.VARIANT_HYPERGAMMON, "auto_bearoff": True}, minutes(30), STAND_IN),
        ({"variant": bg.VARIANT_STANDARD, "match_to": 1, "gammons": True}, minutes(10), FORFEIT),
        ({"variant": bg.VARIANT_STANDARD, "match_to": 3, "gammons": True}, STANDARD_002, STAND_IN),
        (
            {"variant": bg.VARIANT_NACKGAMMON, "match_to": 5, "gammons": True, "auto_roll": True},
            minutes(20),
            STAND_IN,
        ),
        (
            {"variant": bg.VARIANT_STANDARD, "match_to": 9, "gammons": True, "auto_bearoff": True},
            STANDARD_002,
            FORFEIT,
        ),
    ],
    ids=["game", "nack-auto-roll-quick", "hyper-auto-bearoff", "match1", "match3-002", "match5", "match9"],
)
async def test_a_table_with_each_offered_option_makes_a_match_with_exactly_those(
    platform: FamilyPlatform,
    given: dict[str, object],
    clock: rules_pb2.TimeControl,
    policy: pb.DisconnectPolicy.ValueType,
) -> None:
    table_options = options(**given)
    match = await table_makes_its_match(platform, table_options, clock, policy)
    reported = match.options.backgammon
    assert (reported.variant, reported.match_to, reported.gammons) == (
        table_options.backgammon.variant,
        table_options.backgammon.match_to,
        table_options.backgammon.gammons,
    )
    assert (reported.auto_roll, reported.auto_bearoff) == (
        table_options.backgammon.auto_roll,
        table_options.backgammon.auto_bearoff,
    )
    assert (reported.cube, reported.beavers, reported.automatic_doubles, reported.jacoby) == (
        False,
        False,
        0,
        False,
    )
    assert match.update.view.backgammon.match_to == table_options.backgammon.match_to


@pytest.mark.parametrize(
    ("given", "text"),
    [
        ({"cube": True}, "never use the doubling cube"),
        ({"cube": True, "beavers": True}, "never use the doubling cube"),
        ({"cube": True, "automatic_doubles": 2}, "never use the doubling cube"),
        ({"cube": True, "gammons": True, "jacoby": True}, "never use the doubling cube"),
        ({"match_to": 7, "gammons": True}, "matches are to 1, 3, 5, 9 points"),
        ({"match_to": 3}, "score gammons and backgammons"),
        ({"gammons": True}, "does not score gammons"),
    ],
)
async def test_options_the_lobby_does_not_offer_are_refused_with_the_reason(
    platform: FamilyPlatform, given: dict[str, object], text: str
) -> None:
    await refused_on_tables_and_queue(platform, options(**given), minutes(5), text, why="OPTIONS_NOT_OFFERED")


async def test_clocks_the_lobby_does_not_offer_are_refused_with_the_reason(platform: FamilyPlatform) -> None:
    for clock in (
        minutes(7),
        rules_pb2.TimeControl(base_ms=5 * MINUTE, increment_ms=2_000),
        rules_pb2.TimeControl(base_ms=30_000, increment_ms=10_000, increment_within_ms=10_000, cap_ms=60_000),
    ):
        await refused_on_tables_and_queue(
            platform, options(), clock, "capped-bonus clocks", why="TIME_CONTROL_NOT_OFFERED"
        )


async def test_quick_match_pairs_only_the_same_options_clock_and_policy(platform: FamilyPlatform) -> None:
    match5 = options(match_to=5, gammons=True, auto_roll=True)
    await quick_match_pairs_only_equal_pools(
        platform,
        match5,
        STANDARD_002,
        STAND_IN,
        different=[
            (match5, STANDARD_002, FORFEIT),  # another policy
            (options(match_to=3, gammons=True, auto_roll=True), STANDARD_002, STAND_IN),  # another length
            (options(match_to=5, gammons=True), STANDARD_002, STAND_IN),  # no automatic roll
            (match5, QUICK_002, STAND_IN),  # another clock
        ],
    )


async def test_a_result_moves_backgammons_elo_and_no_other(platform: FamilyPlatform) -> None:
    await a_result_moves_only_this_familys_elo(
        platform, options(match_to=3, gammons=True), STANDARD_002, STAND_IN
    )
