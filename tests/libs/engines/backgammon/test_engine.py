"""The game part of the backgammon engine: turns, dice, forfeits, scoring, resign offers, views, errors."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libs.engines.backgammon.actions import PlayText, Resign, ResignLevel, Simple, Word, parse_action
from libs.engines.backgammon.board import BLACK, WHITE, Position, Variant
from libs.engines.backgammon.engine import (
    BACKGAMMON,
    FORFEIT_MESSAGE,
    BackgammonOptions,
    BackgammonState,
    EventKind,
    Phase,
    dice_request,
    replay,
)
from libs.engines.base import (
    GameOverError,
    IllegalActionError,
    InvalidOptionsError,
    MalformedActionError,
    NotYourTurnError,
    Termination,
)
from tests.libs.engines.backgammon.game_helpers import (
    CLOCKS,
    act,
    new,
    random_action,
    random_match,
    ready,
    roll,
    run,
)

# White's last checker on its 1-point (absolute 24); Black with nothing off.
GAMMON = Position.from_counts({24: 1}, {1: 5, 2: 5, 3: 5}, off=(14, 0))
BACKGAMMON_POSITION = Position.from_counts({24: 1}, {1: 5, 2: 5, 3: 4, 20: 1}, off=(14, 0))
SINGLE = Position.from_counts({24: 1}, {1: 5, 2: 5, 3: 4}, off=(14, 1))
# Black on the bar against White's closed home board (19-24).
CLOSED = Position.from_counts(
    {19: 2, 20: 2, 21: 2, 22: 2, 23: 2, 24: 2, 1: 3}, {6: 5, 8: 3, 13: 6}, bar=(0, 1)
)


# ---------------------------------------------------------------------------------------------------------
# Opening roll


def test_opening_roll_is_one_draw_white_die_first() -> None:
    state = new()
    assert BACKGAMMON.to_move(state) is None
    assert BACKGAMMON.chance_needed(state) == dice_request(0)
    assert BACKGAMMON.legal_actions(state, WHITE) == []
    state = roll(state, "52")
    assert state.phase is Phase.MOVE
    assert BACKGAMMON.to_move(state) == WHITE
    assert state.dice == (5, 2)
    assert "13/11 13/8" in BACKGAMMON.legal_actions(state, WHITE)
    assert BACKGAMMON.legal_actions(state, BLACK) == []


def test_opening_tie_is_drawn_again_with_the_next_index() -> None:
    state = roll(new(), "44")
    assert state.phase is Phase.OPENING
    assert BACKGAMMON.chance_needed(state) == dice_request(1)
    assert state.events[-1].kind is EventKind.OPENING_TIE
    state = roll(roll(state, "66"), "25")
    assert BACKGAMMON.to_move(state) == BLACK
    assert state.dice == (2, 5)
    assert state.cube.value == 1  # no automatic doubles unless the table plays them
    state = act(state, "13/11 13/8")
    assert BACKGAMMON.chance_needed(state) == dice_request(3)


def test_no_roll_step_without_a_cube() -> None:
    state = run(new(), "31", "8/5 6/5")
    assert state.phase is Phase.ROLLING
    assert BACKGAMMON.to_move(state) == BLACK
    assert BACKGAMMON.legal_actions(state, BLACK) == []
    with pytest.raises(NotYourTurnError):
        act(state, "roll", BLACK)


def test_roll_step_with_a_cube() -> None:
    state = run(new(cube=True), "31", "8/5 6/5")
    assert state.phase is Phase.ROLL_OR_DOUBLE
    assert BACKGAMMON.legal_actions(state, BLACK) == ["double", "resign single", "roll"]
    assert BACKGAMMON.chance_needed(state) is None
    state = act(state, "roll")
    assert BACKGAMMON.chance_needed(state) == dice_request(1)


# ---------------------------------------------------------------------------------------------------------
# A whole game with fixed dice


def test_full_money_game_with_fixed_dice() -> None:
    dice = [(3, 1), (6, 4), (5, 5), (2, 1), (6, 6), (4, 3), (6, 5), (1, 1), (5, 4), (3, 2), (6, 2), (4, 4)]
    state = new()
    index = 0
    plays = 0
    while BACKGAMMON.outcome(state) is None:
        request = BACKGAMMON.chance_needed(state)
        if request is not None:
            assert request.index == index
            state = BACKGAMMON.apply_chance(state, request, dice[index % len(dice)])
            index += 1
            continue
        seat = BACKGAMMON.to_move(state)
        assert seat is not None
        state = BACKGAMMON.apply(state, seat, "1", CLOCKS)  # the first listed play
        plays += 1
    outcome = BACKGAMMON.outcome(state)
    assert outcome is not None
    assert outcome.termination is Termination.BEAR_OFF
    assert outcome.winner is not None
    assert state.position.off[outcome.winner] == 15
    assert outcome.score == ((1.0, 0.0) if outcome.winner == WHITE else (0.0, 1.0))
    assert BACKGAMMON.to_move(state) is None
    assert BACKGAMMON.chance_needed(state) is None
    assert plays > 20
    with pytest.raises(GameOverError):
        BACKGAMMON.apply(state, 0, "roll", CLOCKS)
    # The same steps from a new game give the same state.
    view = BACKGAMMON.view(state, None)
    assert view.phase is Phase.OVER
    assert view.games[0].termination is Termination.BEAR_OFF


def test_index_and_reordered_play_text_are_accepted() -> None:
    state = roll(new(), "31")
    by_index = act(state, "3")
    assert by_index.events[-1].play == state.plays[2].notation
    reordered = act(state, "6/5 8/5")
    assert reordered.events[-1].play == "8/5 6/5"
    assert reordered.events[-1].steps in (("8/5", "6/5"), ("6/5", "8/5"))


# ---------------------------------------------------------------------------------------------------------
# Forfeits, auto roll, auto bear-off


def test_forfeited_turn_on_a_closed_board() -> None:
    state = ready(BLACK, CLOSED)
    assert state.phase is Phase.ROLLING
    state = roll(state, "65")
    assert BACKGAMMON.to_move(state) == WHITE
    assert state.phase is Phase.ROLLING
    view = BACKGAMMON.view(state, BLACK)
    assert view.last_forfeited
    assert view.last_play is None
    assert view.last_dice == (6, 5)
    assert view.last_mover == BLACK
    assert FORFEIT_MESSAGE in view.message
    assert state.events[-1].kind is EventKind.FORFEIT


def test_auto_roll_skips_the_cube_decision() -> None:
    state = run(new(cube=True, auto_roll=True), "31", "8/5 6/5")
    assert state.phase is Phase.ROLLING
    assert BACKGAMMON.legal_actions(state, BLACK) == []
    assert BACKGAMMON.chance_needed(state) is not None


def test_auto_bearoff_plays_once_contact_is_gone() -> None:
    race = Position.from_counts({19: 2, 20: 3, 22: 2, 24: 3}, {1: 4, 3: 3, 6: 4, 12: 1})
    state = ready(WHITE, race, auto_bearoff=True)
    state = roll(state, "63")
    assert state.events[-1].kind is EventKind.AUTO_PLAY
    assert state.position.off[WHITE] == 7  # 5 were off; two more
    assert BACKGAMMON.to_move(state) == BLACK
    # Black still has a checker outside: no bear-off play; the player chooses.
    state = roll(state, "21")
    assert state.phase is Phase.MOVE
    assert BACKGAMMON.to_move(state) == BLACK


def test_auto_bearoff_waits_while_there_is_contact() -> None:
    state = ready(
        WHITE, SINGLE.__class__.from_counts({24: 1, 19: 1}, {20: 1, 1: 13}, off=(13, 1)), auto_bearoff=True
    )
    state = roll(state, "61")
    assert state.phase is Phase.MOVE


# ---------------------------------------------------------------------------------------------------------
# Scoring


@pytest.mark.parametrize(
    ("position", "gammons", "points"),
    [
        (SINGLE, False, 1),
        (SINGLE, True, 1),
        (GAMMON, False, 1),
        (GAMMON, True, 2),
        (BACKGAMMON_POSITION, False, 1),
        (BACKGAMMON_POSITION, True, 3),
    ],
)
def test_game_values(position: Position, gammons: bool, points: int) -> None:
    state = run(ready(WHITE, position, gammons=gammons), "61", "1/off")
    outcome = BACKGAMMON.outcome(state)
    assert outcome is not None
    assert outcome.termination is Termination.BEAR_OFF
    assert outcome.winner == WHITE
    assert outcome.score == (float(points), 0.0)
    assert state.games[0].points == points


def test_gammon_at_a_cube_of_two() -> None:
    state = ready(WHITE, GAMMON, cube=True, gammons=True)
    state = run(state, "double", "take", "61", "1/off")
    outcome = BACKGAMMON.outcome(state)
    assert outcome is not None
    assert outcome.score == (4.0, 0.0)


# ---------------------------------------------------------------------------------------------------------
# Resign offers


@pytest.mark.parametrize(("level", "points"), [("single", 1), ("gammon", 2), ("backgammon", 3)])
def test_resign_offer_accepted(level: str, points: int) -> None:
    state = roll(ready(BLACK, gammons=True), "21")
    assert f"resign {level}" in BACKGAMMON.legal_actions(state, BLACK)
    state = act(state, f"resign {level}")
    assert state.phase is Phase.RESIGN_OFFERED
    assert BACKGAMMON.to_move(state) == WHITE
    assert BACKGAMMON.legal_actions(state, WHITE) == ["accept", "reject"]
    assert BACKGAMMON.legal_actions(state, BLACK) == []
    assert BACKGAMMON.view(state, None).resign_offer == (BLACK, level)
    state = act(state, "accept")
    outcome = BACKGAMMON.outcome(state)
    assert outcome is not None
    assert outcome.termination is Termination.RESIGNATION_ACCEPTED
    assert outcome.winner == WHITE
    assert outcome.score == (float(points), 0.0)


@pytest.mark.parametrize("level", ["single", "gammon", "backgammon"])
def test_resign_offer_rejected(level: str) -> None:
    state = roll(ready(BLACK, gammons=True), "21")
    state = act(act(state, f"resign {level}"), "reject")
    assert state.phase is Phase.MOVE
    assert BACKGAMMON.to_move(state) == BLACK
    assert not any(a.startswith("resign") for a in BACKGAMMON.legal_actions(state, BLACK))
    with pytest.raises(IllegalActionError, match="already"):
        act(state, "resign single")
    state = act(state, "1")
    assert BACKGAMMON.outcome(state) is None
    # The next turn allows an offer again.
    state = roll(state, "43")
    assert "resign single" in BACKGAMMON.legal_actions(state, WHITE)


def test_resign_levels_without_gammons() -> None:
    state = roll(ready(BLACK), "21")
    assert [a for a in BACKGAMMON.legal_actions(state, BLACK) if a.startswith("resign")] == ["resign single"]
    with pytest.raises(IllegalActionError, match="single"):
        act(state, "resign gammon")


def test_resign_offer_in_the_cube_decision_and_answer_errors() -> None:
    state = ready(BLACK, cube=True)
    state = act(state, "resign single")
    with pytest.raises(IllegalActionError, match="accept or reject"):
        act(state, "take")
    with pytest.raises(NotYourTurnError):
        act(state, "accept", BLACK)
    state = act(state, "reject")
    assert state.phase is Phase.ROLL_OR_DOUBLE


def test_plain_resignation_and_timeout_lose_the_game_at_its_worst() -> None:
    state = run(ready(BLACK, cube=True, gammons=True), "roll", "21")
    outcome = BACKGAMMON.resignation_outcome(state, BLACK)
    assert outcome.termination is Termination.RESIGNATION
    assert outcome.winner == WHITE
    assert outcome.score == (3.0, 0.0)
    timeout = BACKGAMMON.timeout_outcome(state, WHITE)
    assert timeout.termination is Termination.TIMEOUT
    assert timeout.winner == BLACK
    assert BACKGAMMON.resignation_outcome(roll(ready(BLACK), "21"), BLACK).score == (1.0, 0.0)


# ---------------------------------------------------------------------------------------------------------
# Errors, actions, views


def test_errors() -> None:
    state = roll(new(), "31")
    with pytest.raises(NotYourTurnError):
        act(state, "8/5 6/5", BLACK)
    with pytest.raises(MalformedActionError):
        act(state, "hello")
    with pytest.raises(IllegalActionError):
        act(state, "24/18")
    with pytest.raises(IllegalActionError):
        act(state, "double")
    with pytest.raises(IllegalActionError):
        act(state, "continue")
    with pytest.raises(ValueError, match="seats"):
        BACKGAMMON.legal_actions(state, 2)
    with pytest.raises(ValueError, match="waits for no draw"):
        BACKGAMMON.apply_chance(state, dice_request(1), (1, 2))
    waiting = new()
    with pytest.raises(ValueError, match="two values"):
        BACKGAMMON.apply_chance(waiting, dice_request(0), (0, 7))
    with pytest.raises(ValueError, match="waits for"):
        BACKGAMMON.apply_chance(waiting, dice_request(5), (1, 2))
    with pytest.raises(NotYourTurnError):
        act(waiting, "roll", WHITE)


def test_parse_action() -> None:
    assert parse_action(" ROLL ") == Simple(Word.ROLL)
    assert parse_action("pass") == Simple(Word.DROP)
    assert parse_action("resign  Gammon") == Resign(ResignLevel.GAMMON)
    assert parse_action("Bar/22*  6/OFF") == PlayText("bar/22* 6/off")
    assert parse_action("12") == PlayText("12")
    for action in (
        "roll",
        "double",
        "take",
        "drop",
        "beaver",
        "accept",
        "reject",
        "continue",
        "resign single",
    ):
        assert str(parse_action(action)) == action
    for bad in ("", "resign", "resign all", "hello 24/18", "roll now", "x" * 300):
        with pytest.raises(MalformedActionError):
            parse_action(bad)
    with pytest.raises(MalformedActionError):
        parse_action(3)  # type: ignore[arg-type]


def test_options_are_checked() -> None:
    assert BackgammonOptions(variant="nackgammon").variant is Variant.NACKGAMMON  # type: ignore[arg-type]
    for bad in (
        {"variant": "plakoto"},
        {"match_to": -1},
        {"match_to": 26},
        {"match_to": True},
        {"beavers": True},
        {"cube": True, "beavers": True, "match_to": 5},
        {"cube": True, "jacoby": True},
        {"automatic_doubles": 1},
        {"cube": True, "automatic_doubles": 7},
        {"gammons": "yes"},
    ):
        with pytest.raises(InvalidOptionsError):
            BackgammonOptions(**bad)
    with pytest.raises(InvalidOptionsError):
        BACKGAMMON.new_game("standard")  # type: ignore[arg-type]


def test_view() -> None:
    state = act(ready(WHITE, cube=True), "roll")
    state = roll(state, "64")
    view = BACKGAMMON.view(state, WHITE)
    assert view == BACKGAMMON.view(state, BLACK) == BACKGAMMON.view(state, None)
    assert not BACKGAMMON.hides_information
    assert view.phase is Phase.MOVE
    assert view.to_move == WHITE
    assert view.choices == ("move", "resign")
    assert view.dice == (6, 4)
    assert view.legal_plays == tuple(play.notation for play in state.plays)
    assert view.pip_counts == (167, 163)
    assert view.cube_value == 1
    assert view.cube_owner is None
    assert view.cube_enabled
    assert view.match_score == (0, 0)
    assert not view.is_crawford
    assert view.last_play == "8/5 6/5"
    assert view.last_mover == BLACK
    assert not view.last_forfeited
    assert view.position == state.position


# ---------------------------------------------------------------------------------------------------------
# Variants and replay


@pytest.mark.parametrize("variant", [Variant.NACKGAMMON, Variant.HYPERGAMMON])
def test_variants_played_to_the_end(variant: Variant) -> None:
    for seed in range(5):
        state, steps = random_match(random.Random(seed), BackgammonOptions(variant=variant, gammons=True))
        outcome = BACKGAMMON.outcome(state)
        assert outcome is not None
        game = state.games[-1]
        if game.termination is Termination.BEAR_OFF:
            assert state.position.off[game.winner] == (3 if variant is Variant.HYPERGAMMON else 15)
        assert replay(BackgammonOptions(variant=variant, gammons=True), steps) == state


def test_state_is_immutable() -> None:
    state = new()
    with pytest.raises(AttributeError):
        state.phase = Phase.MOVE  # type: ignore[misc]
    assert replace(state) == state


# ---------------------------------------------------------------------------------------------------------
# Property tests: random games


OPTION_SETS = [
    BackgammonOptions(),
    BackgammonOptions(gammons=True, auto_bearoff=True),
    BackgammonOptions(cube=True, gammons=True, beavers=True, automatic_doubles=2, jacoby=True),
    BackgammonOptions(cube=True, auto_roll=True),
    BackgammonOptions(cube=True, gammons=True, match_to=3),
    BackgammonOptions(variant=Variant.NACKGAMMON, cube=True, match_to=2),
    BackgammonOptions(variant=Variant.HYPERGAMMON, gammons=True, cube=True, beavers=True),
]
SWEEP_EVERY = 17


def check_every_listed_action(state: BackgammonState) -> None:
    for seat in (WHITE, BLACK):
        for action in BACKGAMMON.legal_actions(state, seat):
            BACKGAMMON.apply(state, seat, action, CLOCKS)


def check_state(state: BackgammonState) -> None:
    position = state.position
    total = position.checkers(WHITE)
    assert total == position.checkers(BLACK) == (3 if state.options.variant is Variant.HYPERGAMMON else 15)
    over = BACKGAMMON.outcome(state) is not None
    pending = BACKGAMMON.chance_needed(state) is not None
    listed = [BACKGAMMON.legal_actions(state, seat) for seat in (WHITE, BLACK)]
    if over or pending:
        assert listed == [[], []]
    else:
        assert any(listed)
        assert all(actions == sorted(actions) for actions in listed)
    if over:
        assert BACKGAMMON.to_move(state) is None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), which=st.integers(0, len(OPTION_SETS) - 1))
def test_random_games(seed: int, which: int) -> None:
    options = OPTION_SETS[which]
    rng = random.Random(seed)
    state = BACKGAMMON.new_game(options)
    steps: list[tuple[int, str] | tuple[int, int]] = []
    count = 0
    while BACKGAMMON.outcome(state) is None:
        count += 1
        assert count < 20_000, "the match does not end"
        check_state(state)
        if count % SWEEP_EVERY == 0:
            check_every_listed_action(state)
        request = BACKGAMMON.chance_needed(state)
        if request is not None:
            dice = (rng.randint(1, 6), rng.randint(1, 6))
            steps.append(dice)
            state = BACKGAMMON.apply_chance(state, request, dice)
            continue
        seat = rng.choice([s for s in (WHITE, BLACK) if BACKGAMMON.legal_actions(state, s)])
        action = random_action(rng, state, seat)
        steps.append((seat, action))
        state = BACKGAMMON.apply(state, seat, action, CLOCKS)
    check_state(state)
    outcome = BACKGAMMON.outcome(state)
    assert outcome is not None
    assert outcome.winner is not None
    for game in state.games:
        if game.termination is Termination.BEAR_OFF:
            final = game.events[-1]
            assert final.seat == game.winner
        else:
            assert game.termination in (Termination.DOUBLE_DROPPED, Termination.RESIGNATION_ACCEPTED)
    last = state.games[-1]
    if last.termination is Termination.BEAR_OFF:
        assert state.position.off[last.winner] == state.position.checkers(last.winner)
    if options.match_to:
        assert outcome.termination is Termination.MATCH_POINTS
        assert state.match.score[outcome.winner] >= options.match_to
    else:
        assert len(state.games) == 1
    assert replay(options, steps) == state
