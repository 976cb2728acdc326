"""The backgammon family's declaration as matchmaking reads it (lobby options and clocks) and its codecs."""

from __future__ import annotations

import pytest
from skillclassics.backgammon.v1 import backgammon_pb2 as bg
from skillclassics.rules.v1 import rules_pb2 as pb

from libs.engines.backgammon import BackgammonOptions, Variant
from libs.engines.base import InvalidOptionsError, MalformedActionError
from libs.runtime.errors import InvalidArgument
from services.matchmaking.families import FAMILIES, family_rules
from services.rules_backgammon.family import BackgammonFamily

FAMILY = BackgammonFamily()


def lobby(**options: object) -> pb.MatchOptions:
    return pb.MatchOptions(backgammon=bg.BackgammonOptions(**options))  # type: ignore[arg-type]


def test_matchmaking_offers_backgammon_from_the_familys_own_declaration() -> None:
    rules = family_rules("backgammon")
    assert FAMILIES["backgammon"].family.name == "backgammon"
    assert rules.uses_chance
    assert rules.has_stand_in
    assert rules.check_options(lobby()) == "standard"
    assert rules.check_options(lobby(variant=bg.VARIANT_NACKGAMMON)) == "nackgammon"
    assert rules.check_options(lobby(variant=bg.VARIANT_HYPERGAMMON)) == "hypergammon"


@pytest.mark.parametrize(
    ("options", "pool"),
    [
        ({"match_to": 1, "gammons": True}, "standard/match1"),
        ({"match_to": 3, "gammons": True}, "standard/match3"),
        ({"match_to": 5, "gammons": True, "auto_roll": True}, "standard/match5/auto-roll"),
        (
            {"variant": bg.VARIANT_NACKGAMMON, "match_to": 9, "gammons": True, "auto_bearoff": True},
            "nackgammon/match9/auto-bearoff",
        ),
        ({"auto_roll": True, "auto_bearoff": True}, "standard/auto-roll/auto-bearoff"),
    ],
)
def test_lobby_tables_offer_002s_matches_and_conveniences(options: dict[str, object], pool: str) -> None:
    assert family_rules("backgammon").check_options(lobby(**options)) == pool


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"cube": True}, "never use the doubling cube"),
        ({"cube": True, "beavers": True}, "never use the doubling cube"),
        ({"cube": True, "match_to": 3, "gammons": True}, "never use the doubling cube"),
        ({"match_to": 7, "gammons": True}, "matches are to 1, 3, 5, 9 points"),
        ({"match_to": 3}, "matches score gammons and backgammons"),
        ({"gammons": True}, "does not score gammons"),
    ],
)
def test_lobby_tables_refuse_the_cube_other_lengths_and_other_scoring(
    options: dict[str, object], reason: str
) -> None:
    with pytest.raises(InvalidArgument, match=reason):
        family_rules("backgammon").check_options(lobby(**options))


def test_lobby_clocks_are_the_chess_style_clocks_of_000_and_the_capped_bonus_clocks_of_002() -> None:
    rules = family_rules("backgammon")
    for minutes in (3, 5, 10, 20, 30):
        rules.check_lobby_clock(pb.TimeControl(base_ms=minutes * 60_000))
    rules.check_lobby_clock(
        pb.TimeControl(base_ms=30_000, increment_ms=10_000, increment_within_ms=10_000, cap_ms=30_000)
    )
    rules.check_lobby_clock(
        pb.TimeControl(base_ms=120_000, increment_ms=20_000, increment_within_ms=20_000, cap_ms=120_000)
    )
    for refused in (
        pb.TimeControl(base_ms=7 * 60_000),
        pb.TimeControl(base_ms=5 * 60_000, increment_ms=2000),
        pb.TimeControl(base_ms=30_000, increment_ms=10_000, increment_within_ms=10_000, cap_ms=60_000),
        pb.TimeControl(base_ms=120_000, increment_ms=20_000, increment_within_ms=10_000, cap_ms=120_000),
        pb.TimeControl(
            base_ms=30_000,
            increment_ms=10_000,
            increment_within_ms=10_000,
            cap_ms=30_000,
            periods=1,
            period_ms=1,
        ),
    ):
        with pytest.raises(
            InvalidArgument, match="backgammon lobby clocks are 3, 5, 10, 20, 30 minutes"
        ) as caught:
            rules.check_lobby_clock(refused)
        assert "capped-bonus clocks 30 s + 10 s when moved within 10 s, capped at 30 s" in str(caught.value)


def test_options_round_trip_through_proto_and_json() -> None:
    options = BackgammonOptions(
        variant=Variant.NACKGAMMON, cube=True, beavers=True, automatic_doubles=2, jacoby=True, gammons=True
    )
    assert FAMILY.options_from_proto(FAMILY.options_to_proto(options)) == options
    assert FAMILY.options_from_json(FAMILY.options_to_json(options)) == options
    match = BackgammonOptions(variant=Variant.HYPERGAMMON, cube=True, match_to=5, auto_bearoff=True)
    assert FAMILY.options_from_proto(FAMILY.options_to_proto(match)) == match
    assert FAMILY.options_from_json(FAMILY.options_to_json(match)) == match
    with pytest.raises(InvalidOptionsError):
        FAMILY.options_from_proto(pb.MatchOptions(backgammon=bg.BackgammonOptions(jacoby=True)))


def test_actions_need_the_backgammon_field_and_readable_text() -> None:
    with pytest.raises(MalformedActionError):
        FAMILY.action_from_proto(pb.Action())
    with pytest.raises(MalformedActionError):
        FAMILY.action_from_proto(pb.Action(backgammon=bg.BackgammonAction(action="24-18")))
    action = FAMILY.action_from_proto(pb.Action(backgammon=bg.BackgammonAction(action=" 24/18  13/8 ")))
    assert FAMILY.action_from_json(FAMILY.action_to_json(action)) == action
    assert FAMILY.action_to_json(action) == {"notation": "24/18 13/8"}
