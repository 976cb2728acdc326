"""Skirmish Chess's duels as the runtime times them: the countdown, the duel clocks with their increment,
a duel lost on time, and random setups drawn from the fairness stream."""

from __future__ import annotations

import random

import pytest

from libs.engines.base import ActionContext, ChanceRequest, NotYourTurnError, PhaseDeadline
from libs.engines.skirmish import RANDOM_SHUFFLE_SIZE, apply_odds, random_position, white_can_take_king
from tests.libs.engines.skirmish_chess.support import ENGINE, game, move


def _at(elapsed_ms: int) -> ActionContext:
    return ActionContext(remaining_ms=(60_000, 60_000), phase_elapsed_ms=elapsed_ms)


def test_main_clocks_run_on_the_main_board_and_stop_for_a_duel() -> None:
    state = move(game(duel_clock_ms=30_000, duel_increment_ms=2_000), "e4", "d5")
    assert ENGINE.phase_deadline(state) is None
    state = move(state, "exd5")
    assert ENGINE.phase_deadline(state) == PhaseDeadline(30_000, 0, per_move=True)


def test_each_duel_move_is_charged_to_its_side_with_the_increment() -> None:
    state = move(game(duel_clock_ms=30_000, duel_increment_ms=2_000), "e4", "d5", "exd5")
    state = ENGINE.apply(state, 0, "a2a3", _at(5_000))
    assert state.pending is not None
    assert state.pending.clocks_ms == (27_000, 30_000)
    assert ENGINE.phase_deadline(state) == PhaseDeadline(30_000, 1, per_move=True)
    state = ENGINE.apply(state, 1, "b5c3", _at(29_999))
    assert state.pending is not None
    assert state.pending.clocks_ms == (27_000, 2_001)
    assert ENGINE.phase_deadline(state) == PhaseDeadline(27_000, 0, per_move=True)


def test_a_duel_lost_on_time_decides_the_capture() -> None:
    state = move(game(duel_clock_ms=30_000), "e4", "d5", "exd5")
    state = ENGINE.apply(state, 0, "a2a3", _at(1_000))
    timed_out = ENGINE.on_phase_deadline(state)  # Black (the defender) lets its duel clock run out
    assert timed_out.pending is None
    assert timed_out.moves_san[-1] == "exd5+"
    assert timed_out.duels[-1].end.value == "timeout"
    assert ENGINE.phase_deadline(timed_out) is None
    # A move in the very millisecond the clock falls loses too.
    late = ENGINE.apply(state, 1, "b5c3", _at(30_000))
    assert late.moves_san[-1] == "exd5+"


def test_the_countdown_comes_before_the_duel_and_nobody_moves_in_it() -> None:
    state = move(game(countdown_ms=3_000), "e4", "d5", "exd5")
    assert ENGINE.phase_deadline(state) == PhaseDeadline(3_000, 0, per_move=True)
    assert ENGINE.legal_actions(state, 0) == []
    with pytest.raises(NotYourTurnError, match="countdown"):
        ENGINE.apply(state, 0, "a2a3", _at(100))
    started = ENGINE.on_phase_deadline(state)
    assert ENGINE.phase_deadline(started) == PhaseDeadline(60_000, 0, per_move=True)
    assert "a2a3" in ENGINE.legal_actions(started, 0)


def _permutation(protects_black: bool, rng: random.Random) -> list[int]:
    """A shuffle whose setup (odds for a pawn taking a pawn: none) lets White take Black's king on move
    one, or does not."""
    while True:
        values = list(range(RANDOM_SHUFFLE_SIZE))
        rng.shuffle(values)
        if white_can_take_king(random_position(values)) is not protects_black:
            return values


def test_a_random_setup_is_drawn_again_while_white_could_take_the_king_on_move_one() -> None:
    rng = random.Random(7)
    state = move(game(preset="random"), "e4", "d5", "exd5")
    assert ENGINE.to_move(state) == 0
    request = ENGINE.chance_needed(state)
    assert request == ChanceRequest("skirmish", 0, "shuffle", 1, RANDOM_SHUFFLE_SIZE)
    assert ENGINE.legal_actions(state, 0) == []
    bad = _permutation(False, rng)
    again = ENGINE.apply_chance(state, request, tuple(bad))
    assert again.pending is not None
    assert again.pending.duel is None
    second = ENGINE.chance_needed(again)
    assert second == ChanceRequest("skirmish", 1, "shuffle", 1, RANDOM_SHUFFLE_SIZE)
    good = _permutation(True, rng)
    drawn = ENGINE.apply_chance(again, second, tuple(good))
    assert ENGINE.chance_needed(drawn) is None
    assert drawn.pending is not None
    assert drawn.pending.duel is not None
    expected, _ = apply_odds(random_position(good), "P", "p")
    assert drawn.pending.duel.position == expected
    # The next duel of the match draws from index 2: every draw's index is the count so far.
    assert drawn.draws_used == 2


def test_the_same_draws_give_the_same_duel() -> None:
    rng = random.Random(11)
    values = tuple(_permutation(True, rng))
    one = move(game(preset="random"), "e4", "d5", "exd5")
    two = move(game(preset="random"), "e4", "d5", "exd5")
    request = ENGINE.chance_needed(one)
    assert request is not None
    assert ENGINE.apply_chance(one, request, values) == ENGINE.apply_chance(two, request, values)
