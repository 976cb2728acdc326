"""Game of the Generals lobby tables over real gRPC, on SQLite and PostgreSQL (matchmaking, rules-generals
and fairness): the one tournament ruleset at each per-move clock (seed 004: 30 s, 1 minute or 2 minutes a
move, the third strike loses) makes a match carrying exactly that and the forfeit rule; Game of the Generals
has no stand-in, so the stand-in policy is refused with the reason, as are other clocks and another family's
options; quick match pairs only the same per-move clock; a result moves generals' Elo only."""

from __future__ import annotations

import pytest
from skillclassics.chess.v1 import chess_pb2
from skillclassics.generals.v1 import generals_pb2
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

platform = module_platform("generals")
FORFEIT = pb.DISCONNECT_POLICY_FORFEIT
GENERALS = rules_pb2.MatchOptions(generals=generals_pb2.GeneralsOptions())


def per_move(seconds: int) -> rules_pb2.TimeControl:
    return rules_pb2.TimeControl(base_ms=0, periods=3, period_ms=seconds * 1000)


@pytest.mark.parametrize("seconds", [30, 60, 120])
@pytest.mark.parametrize(
    "table_options", [GENERALS, rules_pb2.MatchOptions()], ids=["generals-options", "defaults"]
)
async def test_a_table_at_each_per_move_clock_makes_a_match_with_exactly_that(
    platform: FamilyPlatform, seconds: int, table_options: rules_pb2.MatchOptions
) -> None:
    policy = pb.DISCONNECT_POLICY_UNSPECIFIED if seconds == 60 else FORFEIT
    match = await table_makes_its_match(platform, table_options, per_move(seconds), policy)
    assert match.options.WhichOneof("family") == "generals"
    assert (match.time_control.periods, match.time_control.period_ms) == (3, seconds * 1000)


async def test_generals_has_no_stand_in(platform: FamilyPlatform) -> None:
    await the_stand_in_policy_is_refused(platform, GENERALS, per_move(60))


async def test_clocks_and_options_the_lobby_does_not_offer_are_refused_with_the_reason(
    platform: FamilyPlatform,
) -> None:
    for clock in (
        per_move(45),
        rules_pb2.TimeControl(base_ms=5 * MINUTE),
        rules_pb2.TimeControl(base_ms=0, periods=2, period_ms=60_000),
    ):
        await refused_on_tables_and_queue(
            platform,
            GENERALS,
            clock,
            "generals lobby clocks are a fresh 30, 60, 120 s per move",
            why="TIME_CONTROL_NOT_OFFERED",
        )
    chess = rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions())
    await refused_on_tables_and_queue(
        platform, chess, per_move(60), "cannot configure a generals table", why="WRONG_FAMILY"
    )


async def test_quick_match_pairs_only_the_same_per_move_clock(platform: FamilyPlatform) -> None:
    await quick_match_pairs_only_equal_pools(
        platform,
        GENERALS,
        per_move(30),
        FORFEIT,
        different=[(GENERALS, per_move(60), FORFEIT), (GENERALS, per_move(120), FORFEIT)],
    )


async def test_a_result_moves_generals_elo_and_no_other(platform: FamilyPlatform) -> None:
    await a_result_moves_only_this_familys_elo(platform, GENERALS, per_move(60))
