"""Hidden information: two states that differ only in ranks a seat may not see give that seat equal views
(compared as values and as their ``repr``), equal legal actions and equal error messages: during the
setup, at its deadline, in play, and after challenges whose visible outcome (the squares emptied) is the
same."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from libs.engines.base import RulesError
from libs.engines.generals import GENERALS, GeneralsState, Phase, last_move_seen, replay
from tests.libs.engines.generals.helpers import (
    CONTEXT,
    FULL_BLACK,
    FULL_WHITE,
    play,
    position,
    random_game,
    random_setup,
)

PROBES = ("a1-a2", "e4-e5", "e5-e4", "i8-i7", "a6-a5", "c3-c4", "draw", "accept", "decline", "ready", "setup")


def assert_same_for(seat: int | None, a: GeneralsState, b: GeneralsState) -> None:
    va, vb = GENERALS.view(a, seat), GENERALS.view(b, seat)
    assert va == vb
    assert repr(va) == repr(vb)
    if seat is None:
        return
    assert GENERALS.legal_actions(a, seat) == GENERALS.legal_actions(b, seat)
    assert GENERALS.to_move(a) == GENERALS.to_move(b)
    for action in PROBES:
        assert _answer(a, seat, action) == _answer(b, seat, action), action


def _answer(state: GeneralsState, seat: int, action: str) -> str:
    try:
        after = GENERALS.apply(state, seat, action, CONTEXT)
    except RulesError as error:
        return f"{type(error).__name__}: {error}"
    # Accepted: what follows may differ (a challenge's outcome), which is no leak of the refusal.
    return "accepted" if after is not state else "unchanged"


def twin(state: GeneralsState, hidden: int, rng: random.Random) -> GeneralsState:
    """``state`` with ``hidden``'s ranks on the board shuffled among its pieces."""
    squares = [i for i, v in enumerate(state.board) if v and v >> 4 == hidden]
    ranks = [state.board[i] for i in squares]
    rng.shuffle(ranks)
    cells = list(state.board)
    for i, v in zip(squares, ranks, strict=True):
        cells[i] = v
    return replace(state, board=tuple(cells))


def test_the_opponents_partial_setup_is_invisible() -> None:
    rng = random.Random(2)
    for _ in range(50):
        mine = random_setup(rng, 0, rng.randint(0, 21))
        a = replay(None, [(0, f"setup {mine}"), (1, f"setup {random_setup(rng, 1, rng.randint(0, 21))}")])
        b = replay(None, [(0, f"setup {mine}"), (1, f"setup {random_setup(rng, 1, rng.randint(0, 21))}")])
        assert_same_for(0, a, b)
        assert_same_for(None, a, b)
        # ... and at the setup deadline, before and after White's own completion.
        a, b = GENERALS.on_phase_deadline(a), GENERALS.on_phase_deadline(b)
        if GENERALS.chance_needed(a) == GENERALS.chance_needed(b):
            assert_same_for(0, a, b)
            assert_same_for(None, a, b)


def test_the_completion_draw_does_not_depend_on_how_many_pieces_are_missing() -> None:
    a = GENERALS.on_phase_deadline(
        replay(None, [(0, f"setup {FULL_WHITE}"), (0, "ready"), (1, "setup a6=FLG")])
    )
    b = GENERALS.on_phase_deadline(replay(None, [(0, f"setup {FULL_WHITE}"), (0, "ready")]))
    assert GENERALS.chance_needed(a) == GENERALS.chance_needed(b)
    assert_same_for(0, a, b)


def test_a_ready_opponent_shows_only_that_it_is_ready() -> None:
    a = replay(None, [(1, f"setup {FULL_BLACK}"), (1, "ready")])
    b = replay(None, [(1, f"setup {random_setup(random.Random(1), 1)}"), (1, "ready")])
    assert_same_for(0, a, b)
    view = GENERALS.view(a, 0)
    assert view.ready == (False, True)
    assert view.pieces == ()


def test_pairs_in_play_and_after_challenges_with_the_same_squares_emptied() -> None:
    common = {"a1": "W:FLG", "e4": "W:COL", "c4": "W:PVT"}
    a = position({**common, "e5": "B:MAJ", "i8": "B:FLG", "c5": "B:SPY"})
    b = position({**common, "e5": "B:CPT", "i8": "B:SGT", "c5": "B:FLG"})
    assert_same_for(0, a, b)
    assert_same_for(None, a, b)
    a2, b2 = play(a, "e4-e5"), play(b, "e4-e5")  # the COL wins either way
    assert a2.result is None
    assert b2.result is None
    assert_same_for(0, a2, b2)
    assert_same_for(None, a2, b2)
    # Black's reply is a challenge both lose in either state: equal for White still.
    c = position({**common, "e5": "B:COL", "i8": "B:FLG", "c5": "B:PVT"}, turn=1)
    d = position({**common, "e5": "B:COL", "i8": "B:FLG", "c5": "B:PVT"}, turn=1)
    c2, d2 = play(c, "e5-e4"), play(d, "e5-e4")
    assert_same_for(0, c2, d2)
    # White's own loss is shown to White with its rank, to Black only as a count.
    e = play(position({**common, "e5": "B:1*", "i8": "B:FLG"}), "e4-e5")
    f = play(position({**common, "e5": "B:2*", "i8": "B:FLG"}), "e4-e5")
    assert GENERALS.view(e, 0).lost == (("COL",), ())
    assert_same_for(0, e, f)
    assert GENERALS.view(e, 1).lost == ((), ())


def test_a_pending_flag_is_invisible_to_the_opponent() -> None:
    a = play(position({"e7": "W:FLG", "d8": "B:PVT", "i8": "B:FLG"}), "e7-e8")
    b = play(position({"e7": "W:PVT", "d8": "B:PVT", "i8": "B:FLG", "a1": "W:FLG"}), "e7-e8")
    b = replace(b, board=tuple(0 if i == 0 else v for i, v in enumerate(b.board)))
    assert a.flag_pending is not None
    assert b.flag_pending is None
    assert_same_for(1, a, b)
    assert_same_for(None, a, b)


@pytest.mark.parametrize("seed", range(6))
def test_random_pairs(seed: int) -> None:
    """Along random games: the state and a twin with the hidden side's ranks shuffled give equal views;
    after the next action, where its visible outcome is the same in both, still equal."""
    rng = random.Random(seed)
    compared = 0
    for _ in range(15):
        _final, steps = random_game(rng)
        state = GENERALS.new_game()
        for step in steps:
            state = replay_step(state, step)
            if state.phase is not Phase.PLAY or state.result is not None or rng.random() > 0.3:
                continue
            viewer = rng.randrange(2)
            other = twin(state, 1 - viewer, rng)
            assert_same_for(viewer, state, other)
            spectator = twin(twin(state, 0, rng), 1, rng)
            assert_same_for(None, state, spectator)
            mover = state.turn
            assert mover is not None
            action = rng.choice([a for a in GENERALS.legal_actions(state, mover) if "-" in a])
            a = GENERALS.apply(state, mover, action, CONTEXT)
            b = GENERALS.apply(other, mover, action, CONTEXT)
            if a.result is None and b.result is None and last_move_seen(a.last) == last_move_seen(b.last):
                assert_same_for(viewer, a, b)
                compared += 1
    assert compared > 50


def replay_step(state: GeneralsState, step: object) -> GeneralsState:
    if step == "deadline":
        return GENERALS.on_phase_deadline(state)
    assert isinstance(step, tuple)
    if len(step) == 2 and isinstance(step[1], str):
        return GENERALS.apply(state, int(step[0]), step[1], CONTEXT)
    request = GENERALS.chance_needed(state)
    assert request is not None
    return GENERALS.apply_chance(state, request, tuple(int(v) for v in step))
