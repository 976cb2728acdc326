"""Match play: the score, the Crawford rule, the continue step between games, the match result."""

from __future__ import annotations

import pytest

from libs.engines.backgammon.board import BLACK, WHITE
from libs.engines.backgammon.engine import BACKGAMMON, Phase, dice_request
from libs.engines.backgammon.match import MatchScore
from libs.engines.base import IllegalActionError, NotYourTurnError, Termination
from tests.libs.engines.backgammon.game_helpers import act, new, run


def test_match_score_and_crawford() -> None:
    score = MatchScore(match_to=5)
    assert not score.over
    assert score.away(WHITE) == 5
    score = score.add(WHITE, 2)
    assert score.score == (2, 0)
    assert not score.crawford_game
    score = score.add(WHITE, 2)  # White reaches 4 = 5 - 1
    assert score.crawford_game
    assert score.score == (4, 0)
    score = score.add(BLACK, 1)  # the Crawford game is over
    assert not score.crawford_game
    assert score.post_crawford
    score = score.add(BLACK, 3)  # Black reaches 4 too: no second Crawford game
    assert not score.crawford_game
    score = score.add(BLACK, 1)
    assert score.over
    assert score.winner == BLACK
    assert score.games == 5


def test_crawford_reached_by_a_jump_and_not_in_a_one_point_match() -> None:
    assert MatchScore(match_to=7).add(BLACK, 4).add(BLACK, 2).crawford_game
    assert not MatchScore(match_to=1).crawford_game
    assert MatchScore(match_to=1).add(WHITE, 1).over
    assert not MatchScore(match_to=3).add(WHITE, 4).crawford_game  # the match is over instead
    money = MatchScore()
    assert money.is_money
    assert not money.over
    assert money.add(BLACK, 4).winner == BLACK


def test_five_point_match_with_crawford_and_continue() -> None:
    state = new(cube=True, gammons=True, match_to=5)
    # Game 1: Black doubles, White takes; White resigns a gammon at 2: Black 4 points.
    state = run(state, "31", "8/5 6/5", "double", "take", "21", "1", "resign gammon", "accept")
    assert state.phase is Phase.BETWEEN_GAMES
    assert state.match.score == (0, 4)
    assert state.match.crawford_game
    assert BACKGAMMON.outcome(state) is None
    assert BACKGAMMON.chance_needed(state) is None
    assert BACKGAMMON.legal_actions(state, WHITE) == BACKGAMMON.legal_actions(state, BLACK) == ["continue"]
    view = BACKGAMMON.view(state, None)
    assert view.continue_pending == (WHITE, BLACK)
    assert view.choices == ("continue",)
    # Either seat may confirm first.
    with pytest.raises(IllegalActionError, match="continue"):
        act(state, "roll", BLACK)
    state = act(state, "continue", BLACK)
    assert BACKGAMMON.to_move(state) == WHITE
    assert BACKGAMMON.legal_actions(state, BLACK) == []
    with pytest.raises(NotYourTurnError):
        act(state, "continue", BLACK)
    state = act(state, "continue", WHITE)
    # Game 2, the Crawford game: no doubling.
    assert state.phase is Phase.OPENING
    assert state.game_number == 2
    assert state.cube.value == 1
    assert state.cube.owner is None
    assert BACKGAMMON.chance_needed(state) == dice_request(state.rolls)
    state = run(state, "13", "8/5 6/5")
    assert BACKGAMMON.view(state, None).is_crawford
    assert not BACKGAMMON.view(state, None).cube_enabled
    assert state.phase is Phase.ROLLING  # White may not double
    state = run(state, "21")
    with pytest.raises(IllegalActionError):
        act(state, "double")
    state = run(state, "1", "43")
    assert "double" not in BACKGAMMON.legal_actions(state, BLACK)
    state = run(state, "resign single", "accept")
    assert state.match.score == (1, 4)
    assert not state.match.crawford_game
    assert state.match.post_crawford
    # Game 3, post-Crawford: doubling is back. White doubles, Black drops.
    state = run(state, "1:continue", "0:continue", "31", "8/5 6/5")
    assert state.phase is Phase.ROLL_OR_DOUBLE
    state = run(state, "roll", "21", "1")
    assert state.phase is Phase.ROLL_OR_DOUBLE
    assert BACKGAMMON.to_move(state) == WHITE
    state = run(state, "double", "drop")
    assert state.match.score == (2, 4)
    assert state.games[-1].termination is Termination.DOUBLE_DROPPED
    # Game 4: Black resigns a gammon: 4-4, no second Crawford game.
    state = run(
        state, "0:continue", "1:continue", "13", "8/5 6/5", "roll", "65", "1", "resign gammon", "accept"
    )
    assert state.match.score == (4, 4)
    assert not state.match.crawford_game
    # Game 5: White resigns: Black wins the match.
    state = run(state, "0:continue", "1:continue", "24", "8/4 6/4", "resign single", "accept")
    outcome = BACKGAMMON.outcome(state)
    assert outcome is not None
    assert outcome.termination is Termination.MATCH_POINTS
    assert outcome.cause is Termination.RESIGNATION_ACCEPTED
    assert outcome.winner == BLACK
    assert outcome.score == (4.0, 5.0)
    assert [game.crawford for game in state.games] == [False, True, False, False, False]
    assert [game.score_after for game in state.games] == [(0, 4), (1, 4), (2, 4), (4, 4), (4, 5)]
    assert BACKGAMMON.to_move(state) is None
    assert BACKGAMMON.legal_actions(state, WHITE) == BACKGAMMON.legal_actions(state, BLACK) == []
    assert BACKGAMMON.view(state, None).phase is Phase.OVER


def test_dice_indexes_run_through_the_match() -> None:
    state = new(match_to=3)
    state = run(state, "31", "8/5 6/5", "21", "resign single", "accept", "0:continue", "1:continue")
    assert BACKGAMMON.chance_needed(state) == dice_request(2)


def test_resignation_and_timeout_in_a_match_lose_the_match() -> None:
    state = new(cube=True, match_to=5)
    state = run(state, "31", "8/5 6/5", "double", "drop")
    assert state.match.score == (0, 1)
    outcome = BACKGAMMON.resignation_outcome(state, WHITE)
    assert outcome.winner == BLACK
    assert outcome.score == (0.0, 5.0)
    assert outcome.termination is Termination.RESIGNATION
    timeout = BACKGAMMON.timeout_outcome(state, BLACK)
    assert timeout.winner == WHITE
    assert timeout.score == (5.0, 1.0)
    assert timeout.termination is Termination.TIMEOUT


def test_money_game_has_no_continue_step() -> None:
    state = run(new(), "31", "8/5 6/5", "21", "resign single", "accept")
    outcome = BACKGAMMON.outcome(state)
    assert outcome is not None
    assert outcome.termination is Termination.RESIGNATION_ACCEPTED
    assert outcome.winner == WHITE


def test_the_continue_step_has_its_own_two_minute_deadline_and_no_clock() -> None:
    state = new(cube=True, gammons=True, match_to=5)
    state = run(state, "31", "8/5 6/5", "double", "take", "21", "1", "resign gammon", "accept")
    assert state.phase is Phase.BETWEEN_GAMES
    both = BACKGAMMON.phase_deadline(state)
    assert both is not None
    assert (both.within_ms, both.seat) == (120_000, None)
    assert BACKGAMMON.phase_deadline(new(match_to=5)) is None  # during a game the clocks time it
    # Nobody continued: the match is aborted, both stakes refunded.
    aborted = BACKGAMMON.on_phase_deadline(state)
    outcome = BACKGAMMON.outcome(aborted)
    assert outcome is not None
    assert (outcome.termination, outcome.winner) == (Termination.ABORTED, None)
    assert BACKGAMMON.phase_deadline(aborted) is None
    # Black continued, White did not: White loses the match.
    waiting = act(state, "continue", BLACK)
    deadline = BACKGAMMON.phase_deadline(waiting)
    assert deadline is not None
    assert deadline.seat == WHITE
    ended = BACKGAMMON.outcome(BACKGAMMON.on_phase_deadline(waiting))
    assert ended is not None
    assert (ended.termination, ended.winner) == (Termination.CONTINUE_TIMEOUT, BLACK)
