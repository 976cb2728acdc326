"""The go family's declaration as matchmaking reads it (lobby options and clocks), its codecs, and the count
phase in the match runtime: two passes stop both clocks, the count has its own two-minute deadline, and
the SGF record carries both clocks after every move."""

from __future__ import annotations

import pytest
from sgfmill import sgf  # type: ignore[import-untyped]
from skillclassics.go.v1 import go_pb2 as gopb
from skillclassics.rules.v1 import rules_pb2 as pb

from libs.clocks import TimeControl
from libs.engines.base import InvalidOptionsError, MalformedActionError, Termination
from libs.engines.go import GoOptions, Phase, Scoring
from libs.match.model import Due, EventKind, MatchEvent, MatchRecord, created, resumed, step
from libs.runtime.errors import InvalidArgument
from services.matchmaking.families import FAMILIES, family_rules
from services.rules_go.family import GoFamily

FAMILY = GoFamily()
T0 = 1_700_000_000_000
MINUTE = 60_000
COUNT_MS = 120_000


def lobby(**options: object) -> pb.MatchOptions:
    return pb.MatchOptions(go=gopb.GoOptions(**options))  # type: ignore[arg-type]


# -- matchmaking's view of the family ----------------------------------------------------------------------


def test_matchmaking_offers_go_with_every_option_pooled_by_its_options() -> None:
    rules = family_rules("go")
    assert FAMILIES["go"].family.name == "go"
    assert not rules.uses_chance
    assert rules.check_options(lobby()) == "19x19/area/h0/komi7.5"
    assert rules.check_options(lobby(size=9)) == "9x9/area/h0/komi5.5"
    assert rules.check_options(lobby(size=13, handicap=4)) == "13x13/area/h4/komi0.5"
    assert (
        rules.check_options(lobby(size=9, komi=6.0, scoring=gopb.SCORING_TERRITORY))
        == "9x9/territory/h0/komi6"
    )


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"size": 15}, "9, 13 or 19"),
        ({"handicap": 1}, "handicap"),
        ({"komi": 6.3}, "multiple of 0.5"),
        ({"komi": 1000.0}, "multiple of 0.5"),
    ],
)
def test_options_the_engine_refuses_are_refused_at_the_lobby(options: dict[str, object], reason: str) -> None:
    with pytest.raises(InvalidArgument, match=reason):
        family_rules("go").check_options(lobby(**options))


def test_lobby_clocks_are_absolute_fischer_or_byo_yomi() -> None:
    rules = family_rules("go")
    for minutes in (5, 10, 20, 30, 60):
        rules.check_lobby_clock(pb.TimeControl(base_ms=minutes * MINUTE))
        rules.check_lobby_clock(pb.TimeControl(base_ms=minutes * MINUTE, increment_ms=10_000))
        rules.check_lobby_clock(pb.TimeControl(base_ms=minutes * MINUTE, periods=5, period_ms=30_000))
        rules.check_lobby_clock(pb.TimeControl(base_ms=minutes * MINUTE, periods=3, period_ms=60_000))
    for refused in (
        pb.TimeControl(base_ms=7 * MINUTE),
        pb.TimeControl(base_ms=10 * MINUTE, increment_ms=5_000),
        pb.TimeControl(base_ms=10 * MINUTE, periods=5, period_ms=20_000),
        pb.TimeControl(base_ms=10 * MINUTE, periods=5, period_ms=30_000, increment_ms=10_000),
        pb.TimeControl(base_ms=10 * MINUTE, increment_ms=10_000, increment_within_ms=10_000, cap_ms=MINUTE),
    ):
        with pytest.raises(InvalidArgument, match=r"go lobby clocks .* or byo-yomi of 5 x 30 s, 3 x 60 s"):
            rules.check_lobby_clock(refused)


def test_other_families_offer_no_byo_yomi() -> None:
    with pytest.raises(InvalidArgument, match="chess lobby clocks"):
        family_rules("chess").check_lobby_clock(
            pb.TimeControl(base_ms=5 * MINUTE, periods=5, period_ms=30_000)
        )


# -- codecs ----------------------------------------------------------------------------------------------


def test_options_round_trip_through_proto_and_json() -> None:
    for options in (
        GoOptions(),
        GoOptions(size=9, komi=6.0, scoring=Scoring.TERRITORY),
        GoOptions(size=13, handicap=9),
        GoOptions(size=19, handicap=2, komi=-3.5),
    ):
        assert FAMILY.options_from_proto(FAMILY.options_to_proto(options)) == options
        assert FAMILY.options_from_json(FAMILY.options_to_json(options)) == options
    # An unset komi is the default, an explicit 0 is no komi at all.
    assert FAMILY.options_from_proto(lobby(size=9)).komi == 5.5
    assert FAMILY.options_from_proto(lobby(size=9, komi=0.0)).komi == 0.0
    with pytest.raises(InvalidOptionsError):
        FAMILY.options_from_proto(pb.MatchOptions(gin=pb.MatchOptions().gin))


def test_actions_need_the_go_field_and_readable_text() -> None:
    with pytest.raises(MalformedActionError):
        FAMILY.action_from_proto(pb.Action())
    for unreadable in ("D", "4D", "pas", "D4 E5", "é5", "D-4"):
        with pytest.raises(MalformedActionError):
            FAMILY.action_from_proto(pb.Action(go=gopb.GoAction(action=unreadable)))
    for text, read in ((" d4 ", "D4"), ("PASS", "pass"), ("Accept", "accept"), ("t19", "T19")):
        action = FAMILY.action_from_proto(pb.Action(go=gopb.GoAction(action=text)))
        assert action == read
        assert FAMILY.action_from_json(FAMILY.action_to_json(action)) == action
    assert FAMILY.is_move("D4")
    assert FAMILY.is_move("pass")
    assert not FAMILY.is_move("accept")
    assert not FAMILY.is_move("resume")


# -- the count phase in the runtime ------------------------------------------------------------------------


def new_match(control: TimeControl | None = None, **options: object) -> MatchRecord:
    setup = {
        "match_id": "go.0.count",
        "family": "go",
        "players": ["ann", "ben"],
        "options": FAMILY.options_to_json(GoOptions(**options)),  # type: ignore[arg-type]
        "time_control": (control or TimeControl.sudden_death(10 * MINUTE)).to_dict(),
        "fairness_commitment": "",
        "first_move_timeout_ms": MINUTE,
        "disconnect_forfeit_ms": MINUTE,
        "created_at_ms": T0,
    }
    record = created(FAMILY, MatchEvent(1, EventKind.CREATED, T0, setup, None, "create"))
    for seat in (0, 1):
        event = MatchEvent(record.sequence + 1, EventKind.PRESENCE, T0, {"connected": True}, seat)
        record = step(FAMILY, record, event)
    return record


def act(record: MatchRecord, seat: int, text: str, at_ms: int) -> MatchRecord:
    event = MatchEvent(
        record.sequence + 1,
        EventKind.ACTION,
        at_ms,
        {"action": {"notation": text}},
        seat,
        f"k{record.sequence}",
    )
    return step(FAMILY, record, event)


def deadline(record: MatchRecord, at_ms: int) -> MatchRecord:
    return step(
        FAMILY, record, MatchEvent(record.sequence + 1, EventKind.DEADLINE, at_ms, {"due": "phase"}, None)
    )


def to_the_count() -> tuple[MatchRecord, int]:
    """9x9: Black D5, White E5, then both pass, a second apart; the count opens at T0 + 4 s."""
    record = new_match(size=9)
    for n, text in enumerate(("D5", "E5", "pass", "pass")):
        record = act(record, n % 2, text, T0 + (n + 1) * 1_000)
    return record, T0 + 4_000


def test_two_passes_open_the_count_stop_both_clocks_and_arm_its_deadline() -> None:
    record, began = to_the_count()
    assert record.game.phase is Phase.COUNT
    assert record.moves_made == (2, 2)  # both passes were moves
    assert len(record.clock_marks) == 4
    assert record.phase_since_ms == began
    assert not record.clock.is_running
    assert record.due(FAMILY) == [Due(began + COUNT_MS, "phase", 0)]


def test_accepting_in_either_order_ends_the_game_by_the_count() -> None:
    record, began = to_the_count()
    record = act(record, 1, "accept", began + 5_000)  # White first: either may answer first
    assert record.outcome is None
    assert record.moves_made == (2, 2)  # an answer to the count is not a move
    record = act(record, 0, "accept", began + 9_000)
    assert record.outcome is not None
    assert record.outcome.termination is Termination.SCORED
    # One stone each, no territory for either (the regions touch both): White wins by the komi.
    assert record.outcome.winner == 1
    assert "5.5" in record.outcome.detail


def test_no_answer_within_two_minutes_lets_the_count_stand() -> None:
    record, began = to_the_count()
    record = act(record, 0, "accept", began + 1_000)
    assert record.due(FAMILY) == [Due(began + COUNT_MS, "phase", 1)]  # White's answer is awaited
    record = deadline(record, began + COUNT_MS)
    assert record.outcome is not None
    assert (record.outcome.termination, record.outcome.winner) == (Termination.SCORED, 1)
    assert record.last_event.kind is EventKind.DEADLINE


def test_resume_goes_back_to_play_and_the_clock_of_the_player_to_move_runs_again() -> None:
    record, began = to_the_count()
    left = record.clock.remaining_ms(0, began)
    resumed_at = began + 30_000
    record = act(record, 1, "resume", resumed_at)
    assert record.game.phase is Phase.PLAY
    assert record.phase_since_ms is None
    assert record.clock.is_running
    # Black passed first, White second: Black plays on. The 30 s of the count were nobody's time.
    assert FAMILY.engine.to_move(record.game) == 0
    assert record.clock.remaining_ms(0, resumed_at) == left
    assert record.clock.remaining_ms(0, resumed_at + 2_000) == left - 2_000
    record = act(record, 0, "C3", resumed_at + 2_000)
    assert record.moves_made == (3, 2)
    assert len(record.game.moves) == 5


def test_a_shard_outage_during_the_count_moves_its_deadline() -> None:
    record, began = to_the_count()
    credited = resumed(record, began + 10_000, began + 40_000)
    assert credited.due(FAMILY) == [Due(began + 30_000 + COUNT_MS, "phase", 0)]


# -- the record ------------------------------------------------------------------------------------------


def test_the_sgf_record_has_the_players_result_and_both_clocks_after_every_move() -> None:
    record, began = to_the_count()
    record = act(record, 0, "accept", began + 1_000)
    record = act(record, 1, "accept", began + 2_000)
    text = FAMILY.export_record(record)
    game = sgf.Sgf_game.from_string(text)
    root = game.get_root()
    assert root.get("PB") == "ann"
    assert root.get("PW") == "ben"
    assert root.get("RE") == "W+5.5"
    assert root.get("KM") == 5.5
    nodes = game.get_main_sequence()[1:]
    assert [node.get_move() for node in nodes] == [("b", (4, 3)), ("w", (4, 4)), ("b", None), ("w", None)]
    # The clocks start with the first move (D5 is free); then each move took a second: Black 1 s, White 2 s.
    assert nodes[0].get("BL") == pytest.approx(600.0)
    last = nodes[-1]
    assert last.get("WL") == pytest.approx(598.0)
    assert "Black 599000 ms, White 598000 ms" in last.get("C")
