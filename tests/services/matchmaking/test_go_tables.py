"""Go lobby tables over real gRPC, on SQLite and PostgreSQL (matchmaking and rules-go): every board size,
handicap, komi and scoring (seed 000: "The table creator chooses the board size, the scoring rules and an
optional handicap"), with absolute, Fischer and byo-yomi clocks, make a match carrying exactly those and the
forfeit rule; go has no stand-in, so the stand-in policy is refused with the reason, as are boards and clocks
the lobby does not offer; quick match pairs only equal pools (byo-yomi periods included); a result moves
go's Elo only."""

from __future__ import annotations

import pytest
from skillclassics.go.v1 import go_pb2
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
    the_stand_in_policy_is_refused,
)

platform = module_platform("go")
FORFEIT = pb.DISCONNECT_POLICY_FORFEIT


def options(**given: object) -> rules_pb2.MatchOptions:
    return rules_pb2.MatchOptions(go=go_pb2.GoOptions(**given))  # type: ignore[arg-type]


def clock(minutes: int, increment_s: int = 0, periods: int = 0, period_s: int = 0) -> rules_pb2.TimeControl:
    return rules_pb2.TimeControl(
        base_ms=minutes * MINUTE, increment_ms=increment_s * 1000, periods=periods, period_ms=period_s * 1000
    )


@pytest.mark.parametrize(
    ("table_options", "time_control"),
    [
        (options(size=9, scoring=go_pb2.SCORING_AREA), clock(5)),
        (options(size=13, scoring=go_pb2.SCORING_TERRITORY, komi=6.5), clock(10, increment_s=10)),
        (options(size=19, handicap=4, scoring=go_pb2.SCORING_AREA), clock(60, periods=5, period_s=30)),
        (
            options(size=19, handicap=9, komi=0.5, scoring=go_pb2.SCORING_TERRITORY),
            clock(30, periods=3, period_s=60),
        ),
        (options(), clock(20, increment_s=20)),  # the defaults: 19x19, area scoring, komi 7.5
    ],
    ids=["9x9", "13x13-fischer", "19x19-h4-byoyomi", "19x19-h9", "defaults"],
)
async def test_a_table_with_each_offered_option_makes_a_match_with_exactly_those(
    platform: FamilyPlatform, table_options: rules_pb2.MatchOptions, time_control: rules_pb2.TimeControl
) -> None:
    match = await table_makes_its_match(platform, table_options, time_control, FORFEIT)
    given, reported = table_options.go, match.options.go
    assert reported.size == (given.size or 19)
    assert reported.handicap == given.handicap
    if given.HasField("komi"):
        assert reported.komi == given.komi


async def test_go_has_no_stand_in(platform: FamilyPlatform) -> None:
    await the_stand_in_policy_is_refused(platform, options(size=9), clock(5))


async def test_boards_and_clocks_the_lobby_does_not_offer_are_refused_with_the_reason(
    platform: FamilyPlatform,
) -> None:
    await refused_on_tables_and_queue(
        platform, options(size=11), clock(5), "the board is 9, 13 or 19 lines", why="OPTIONS_NOT_OFFERED"
    )
    await refused_on_tables_and_queue(
        platform, options(size=9, handicap=1), clock(5), "2 to 9 stones", why="OPTIONS_NOT_OFFERED"
    )
    for refused_clock in (clock(15), clock(10, increment_s=5), clock(10, periods=4, period_s=30)):
        await refused_on_tables_and_queue(
            platform,
            options(size=9),
            refused_clock,
            "go lobby clocks are 5, 10, 20, 30, 60 minutes",
            why="TIME_CONTROL_NOT_OFFERED",
        )


async def test_quick_match_pairs_only_the_same_board_and_clock(platform: FamilyPlatform) -> None:
    nine = options(size=9, scoring=go_pb2.SCORING_AREA)
    await quick_match_pairs_only_equal_pools(
        platform,
        nine,
        clock(10, periods=5, period_s=30),
        FORFEIT,
        different=[
            (nine, clock(10, periods=3, period_s=60), FORFEIT),  # other byo-yomi periods
            (options(size=9, scoring=go_pb2.SCORING_TERRITORY), clock(10, periods=5, period_s=30), FORFEIT),
            (options(size=13, scoring=go_pb2.SCORING_AREA), clock(10, periods=5, period_s=30), FORFEIT),
        ],
    )


async def test_a_result_moves_gos_elo_and_no_other(platform: FamilyPlatform) -> None:
    await a_result_moves_only_this_familys_elo(platform, options(size=9), clock(5))
