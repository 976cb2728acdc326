"""Property tests over thousands of random games (random setups, some completed at the deadline, random
legal moves and offers): every listed action is accepted, every game ends (the draw rules end them),
replaying the log gives the same state, and the record round-trips."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest

from libs.engines.base import Termination
from libs.engines.generals import (
    GENERALS,
    QUIET_DRAW,
    export_record,
    game_from_record,
    parse_record,
    record_of,
    replay,
)
from tests.libs.engines.generals.helpers import random_game

GAMES_PER_SEED = 500
SEEDS = range(4)
ENDS: Counter[Termination] = Counter()


@pytest.mark.parametrize("seed", SEEDS)
def test_random_games_end_and_replay(seed: int) -> None:
    rng = random.Random(seed)
    for n in range(GAMES_PER_SEED):
        state, steps = random_game(rng, check_listed=n < 25)
        assert state.result is not None
        ENDS[state.result.termination] += 1
        # Every game ends: each challenge removes a piece, and 60 moves without one draw.
        assert state.plies <= 42 * QUIET_DRAW
        if n % 5 == 0:
            assert replay(None, steps) == state
        if n % 10 == 0:
            text = export_record(state)
            record = parse_record(text)
            assert record == record_of(state)
            assert record.to_text() == text
            again = game_from_record(record)
            assert again == replace(state, completed=(), setup_draws=0)
            assert export_record(again) == record.to_text().replace(_completed_line(text), "")


def _completed_line(text: str) -> str:
    return next((line + "\n" for line in text.splitlines() if line.startswith("completed")), "\0")


def test_random_games_reached_every_ending() -> None:
    rng = random.Random(99)
    ends: Counter[Termination] = Counter()
    for _ in range(400):
        state, _ = random_game(rng)
        assert state.result is not None
        ends[state.result.termination] += 1
    assert {Termination.FLAG_CAPTURED, Termination.NO_CHALLENGES, Termination.DRAW_AGREED} <= set(ends)


def test_the_record_of_a_game_that_is_not_over_and_a_resignation() -> None:
    rng = random.Random(7)
    _state, steps = random_game(rng)
    middle = replay(None, steps[: len(steps) // 2 + 8])
    text = export_record(middle)
    assert text.rstrip().endswith("result *")
    assert parse_record(text).to_text() == text
    resigned = GENERALS.resignation_outcome(middle, 0)
    text = export_record(middle, resigned)
    assert "result 0-1 resignation" in text
    assert "detail White resigned; Black wins" in text
    assert parse_record(text).termination is Termination.RESIGNATION
