"""The go engine: options, turns, the count phase, outcomes, views."""

from __future__ import annotations

import pytest

from libs.engines.base import (
    GameOverError,
    IllegalActionError,
    InvalidOptionsError,
    MalformedActionError,
    NotYourTurnError,
    PhaseDeadline,
    Termination,
    TimesPhases,
)
from libs.engines.go import ACCEPT, GO, PASS, RESUME, GoOptions, GoState, Phase, Scoring, parse_action, replay
from tests.libs.engines.go.helpers import CONTEXT, play, walls


def counted(options: GoOptions | None = None) -> GoState:
    """The walls game (Black D, White F: 36 points each by area) after two passes."""
    state = play([*walls(), PASS, PASS], options)
    assert state.phase is Phase.COUNT
    return state


# ---------------------------------------------------------------------------------------------------------
# Options


@pytest.mark.parametrize(("size", "komi"), [(9, 5.5), (13, 7.5), (19, 7.5)])
def test_default_komi_by_size(size: int, komi: float) -> None:
    options = GoOptions(size=size)
    assert options.komi == komi
    assert options.scoring is Scoring.AREA
    assert GO.view(GO.new_game(options), None).komi == komi


def test_options_accept_strings_and_whole_komi() -> None:
    options = GoOptions(size=9, komi=6, scoring="territory")  # type: ignore[arg-type]
    assert options.komi == 6.0
    assert options.scoring is Scoring.TERRITORY


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"size": 11}, "9, 13 or 19"),
        ({"size": True}, "9, 13 or 19"),
        ({"komi": 6.3}, "multiple of 0.5"),
        ({"komi": "6.5"}, "multiple of 0.5"),
        ({"komi": float("nan")}, "multiple of 0.5"),
        ({"komi": 1000}, "multiple of 0.5"),
        ({"scoring": "ing"}, "unknown scoring"),
    ],
)
def test_bad_options_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidOptionsError, match=match):
        GoOptions(**kwargs)  # type: ignore[arg-type]


def test_new_game_refuses_other_options() -> None:
    with pytest.raises(InvalidOptionsError):
        GO.new_game(object())  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------
# Turns and actions


def test_black_moves_first_and_turns_alternate() -> None:
    state = GO.new_game(GoOptions(size=9))
    assert GO.to_move(state) == 0
    assert GO.legal_actions(state, 1) == []
    with pytest.raises(NotYourTurnError, match="Black's turn"):
        GO.apply(state, 1, "D4", CONTEXT)
    state = GO.apply(state, 0, "d4", CONTEXT)
    assert GO.to_move(state) == 1
    view = GO.view(state, None)
    assert view.last_move == "D4"
    assert view.rows[5] == "...X....."
    assert view.message == "Black played D4; White to play"


def test_legal_actions_are_sorted_points_and_pass() -> None:
    state = play(["E5"])
    actions = GO.legal_actions(state, 1)
    assert actions == sorted(actions)
    assert actions[-1] == PASS
    assert "E5" not in actions
    assert len(actions) == 81 - 1 + 1
    assert tuple(actions[:-1]) == GO.view(state, 1).legal_points


@pytest.mark.parametrize("action", ["", "xyz", "D", "4D", "resign", "Z9"])
def test_unreadable_actions_are_malformed(action: str) -> None:
    with pytest.raises(MalformedActionError):
        GO.apply(GO.new_game(GoOptions(size=9)), 0, action, CONTEXT)


def test_non_text_actions_are_malformed() -> None:
    with pytest.raises(MalformedActionError):
        GO.apply(GO.new_game(GoOptions(size=9)), 0, 40, CONTEXT)  # type: ignore[arg-type]


def test_bad_seats_are_refused() -> None:
    with pytest.raises(ValueError, match="seats"):
        GO.legal_actions(GO.new_game(GoOptions(size=9)), 2)


@pytest.mark.parametrize("word", [ACCEPT, RESUME])
def test_accept_and_resume_are_refused_outside_the_count(word: str) -> None:
    with pytest.raises(IllegalActionError, match="two passes in a row"):
        GO.apply(GO.new_game(GoOptions(size=9)), 0, word, CONTEXT)


def test_one_pass_does_not_start_the_count() -> None:
    state = play(["D4", PASS])
    assert state.phase is Phase.PLAY
    view = GO.view(state, None)
    assert (view.passes, view.last_move) == (1, PASS)
    assert "second pass starts the count" in view.message
    state = play(["E5"], state=state)
    assert state.passes == 0
    assert play([PASS], state=state).phase is Phase.PLAY


# ---------------------------------------------------------------------------------------------------------
# The count


def test_two_passes_open_the_count_with_the_score() -> None:
    state = counted()
    assert GO.phase_deadline(state) == PhaseDeadline(120_000, None)
    assert isinstance(GO, TimesPhases)
    view = GO.view(state, 0)
    assert view.phase is Phase.COUNT
    assert view.score is not None
    assert (view.score.black.total, view.score.white.total) == (36, 41.5)
    assert view.legal_points == ()
    assert GO.to_move(state) == 0
    assert GO.legal_actions(state, 0) == [ACCEPT, RESUME]
    assert GO.legal_actions(state, 1) == [ACCEPT, RESUME]
    assert "White wins by 5.5" in view.message


def test_both_accepting_ends_the_game_by_the_count() -> None:
    state = counted()
    state = GO.apply(state, 1, ACCEPT, CONTEXT)  # either seat may answer first
    assert GO.to_move(state) == 0
    assert GO.phase_deadline(state) == PhaseDeadline(120_000, 0)
    assert GO.legal_actions(state, 1) == [RESUME]
    with pytest.raises(NotYourTurnError, match="accepted"):
        GO.apply(state, 1, ACCEPT, CONTEXT)
    state = GO.apply(state, 0, ACCEPT, CONTEXT)
    outcome = GO.outcome(state)
    assert outcome is not None
    assert outcome.termination is Termination.SCORED
    assert outcome.winner == 1
    assert outcome.score == (0.0, 1.0)
    assert outcome.detail.startswith("White wins by 5.5 (area: Black 36, White 36 + 5.5 komi)")
    assert GO.to_move(state) is None
    assert GO.is_over(state)
    assert GO.phase_deadline(state) is None
    assert GO.legal_actions(state, 0) == []
    view = GO.view(state, None)
    assert view.phase is Phase.OVER
    assert view.score is not None
    assert view.message == outcome.detail
    with pytest.raises(GameOverError):
        GO.apply(state, 0, "A1", CONTEXT)


def test_black_wins_with_a_small_komi_and_territory_scoring() -> None:
    state = counted(GoOptions(size=9, komi=-1, scoring=Scoring.TERRITORY))
    state = play([ACCEPT, ACCEPT], state=state)
    outcome = GO.outcome(state)
    assert outcome is not None
    assert (outcome.winner, outcome.score) == (0, (1.0, 0.0))
    assert outcome.detail.startswith(
        "Black wins by 1 (territory: Black 27 + 0 prisoners, White 27 + 0 prisoners - 1 komi)"
    )


def test_a_tie_with_a_whole_komi_is_a_draw() -> None:
    state = play([ACCEPT, ACCEPT], state=counted(GoOptions(size=9, komi=0)))
    outcome = GO.outcome(state)
    assert outcome is not None
    assert outcome.winner is None
    assert outcome.is_draw
    assert outcome.score == (0.5, 0.5)
    assert outcome.termination is Termination.SCORED


@pytest.mark.parametrize("seat", [0, 1])
def test_either_seat_resumes_play_with_the_player_to_move(seat: int) -> None:
    state = counted()
    if seat == 0:
        state = GO.apply(state, 1, ACCEPT, CONTEXT)  # an acceptance is dropped by the resumption
    state = GO.apply(state, seat, RESUME, CONTEXT)
    # Black passed first, White second: Black is to play.
    assert state.phase is Phase.PLAY
    assert state.turn == 0
    assert state.passes == 0
    assert state.accepted == (False, False)
    assert state.score is None
    assert GO.phase_deadline(state) is None
    view = GO.view(state, None)
    assert view.score is None
    assert view.phase is Phase.PLAY
    state = play(["A1", PASS, PASS], state=state)
    assert state.phase is Phase.COUNT
    assert state.turn == 1
    state = GO.apply(state, 0, RESUME, CONTEXT)
    assert state.turn == 1


def test_the_deadline_ends_the_game_by_the_count() -> None:
    state = GO.apply(counted(), 0, ACCEPT, CONTEXT)
    assert GO.phase_deadline(state) == PhaseDeadline(120_000, 1)
    over = GO.on_phase_deadline(state)
    outcome = GO.outcome(over)
    assert outcome is not None
    assert outcome.termination is Termination.SCORED
    assert outcome.winner == 1
    assert "2 minutes" in outcome.detail
    untouched = GO.new_game(GoOptions(size=9))
    assert GO.on_phase_deadline(untouched) is untouched


def test_moves_are_refused_during_the_count() -> None:
    state = counted()
    with pytest.raises(IllegalActionError, match="being counted"):
        GO.apply(state, 0, "E5", CONTEXT)
    with pytest.raises(IllegalActionError, match="being counted"):
        GO.apply(state, 1, PASS, CONTEXT)
    with pytest.raises(MalformedActionError):
        GO.apply(state, 0, "nonsense", CONTEXT)


def test_territory_counts_prisoners_from_the_game() -> None:
    state = play(["A2", "A1", "B1", PASS, PASS], GoOptions(size=9, scoring=Scoring.TERRITORY))
    assert state.score is not None
    assert (state.score.black.territory, state.score.black.prisoners, state.score.black.total) == (79, 1, 80)
    assert state.score.white.total == 5.5


# ---------------------------------------------------------------------------------------------------------
# Outcomes outside the board, views, replay


def test_resignation_and_timeout_lose() -> None:
    state = play(["D4"])
    resigned = GO.resignation_outcome(state, 0)
    assert (resigned.termination, resigned.winner, resigned.score) == (Termination.RESIGNATION, 1, (0.0, 1.0))
    assert resigned.detail == "Black resigned; White wins"
    flagged = GO.timeout_outcome(state, 1)
    assert (flagged.termination, flagged.winner, flagged.score) == (Termination.TIMEOUT, 0, (1.0, 0.0))


def test_no_chance_in_go() -> None:
    state = GO.new_game(GoOptions(size=9))
    assert GO.chance_needed(state) is None


def test_views_are_the_same_for_everybody() -> None:
    state = play(["D4", "E5", PASS])
    assert GO.view(state, 0) == GO.view(state, 1) == GO.view(state, None)


def test_replay_gives_the_same_state() -> None:
    options = GoOptions(size=13, handicap=4)
    steps = [(1, "C3"), (0, "pass"), (1, "pass"), (0, "resume"), (0, "G7"), (1, "H7")]
    state = replay(options, steps)
    assert state.moves[-1] == state.board.geometry.by_name["H7"]
    assert state == replay(options, steps)
    assert state.phase is Phase.PLAY


@pytest.mark.parametrize(
    ("text", "canonical"),
    [("d4", "D4"), (" Q16 ", "Q16"), ("PASS", "pass"), ("Accept", "accept"), ("resume", "resume")],
)
def test_parse_action_gives_the_canonical_form(text: str, canonical: str) -> None:
    assert parse_action(text) == canonical


@pytest.mark.parametrize("text", ["", "4d", "resign", "D-4", "é4"])
def test_parse_action_refuses_unreadable_text(text: str) -> None:
    with pytest.raises(MalformedActionError):
        parse_action(text)


def test_the_view_names_the_last_mover() -> None:
    assert GO.view(GO.new_game(GoOptions(size=9)), None).last_seat is None
    assert GO.view(play(["D4"]), None).last_seat == 0
    assert GO.view(play(["D4", PASS]), None).last_seat == 1
    handicap = play(["D4"], GoOptions(size=9, handicap=2))
    assert GO.view(handicap, None).last_seat == 1
