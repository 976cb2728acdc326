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
    assert rules.check_options(lobby()) == "standard"
    assert rules.check_options(lobby(variant=bg.VARIANT_NACKGAMMON)) == "nackgammon"
    assert rules.check_options(lobby(variant=bg.VARIANT_HYPERGAMMON)) == "hypergammon"


@pytest.mark.parametrize(
    "options",
    [
        {"cube": True},
        {"gammons": True},
        {"match_to": 3},
        {"auto_roll": True},
        {"auto_bearoff": True},
        {"cube": True, "beavers": True},
    ],
)
def test_lobby_tables_are_single_games_without_the_cube(options: dict[str, object]) -> None:
    with pytest.raises(InvalidArgument, match="one game without the doubling cube"):
        family_rules("backgammon").check_options(lobby(**options))


def test_lobby_clocks_are_the_chess_style_clocks_of_000() -> None:
    rules = family_rules("backgammon")
    for minutes in (3, 5, 10, 20, 30):
        rules.check_lobby_clock(pb.TimeControl(base_ms=minutes * 60_000))
    for refused in (
        pb.TimeControl(base_ms=7 * 60_000),
        pb.TimeControl(base_ms=5 * 60_000, increment_ms=2000),
    ):
        with pytest.raises(InvalidArgument, match="backgammon lobby clocks are 3, 5, 10, 20, 30 minutes"):
            rules.check_lobby_clock(refused)


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
