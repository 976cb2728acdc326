"""The doubling cube: doubles, takes, drops, redoubles, beavers, automatic doubles, Jacoby, Crawford."""

from __future__ import annotations

import pytest

from libs.engines.backgammon.board import BLACK, WHITE, Position
from libs.engines.backgammon.cube import (
    Cube,
    automatic_double,
    beaver,
    drop_stake,
    may_double,
    offer_double,
    take,
)
from libs.engines.backgammon.engine import BACKGAMMON, EventKind, Phase
from libs.engines.base import IllegalActionError, NotYourTurnError, Termination
from tests.libs.engines.backgammon.game_helpers import act, new, ready, roll, run

GAMMON = Position.from_counts({24: 1}, {1: 5, 2: 5, 3: 5}, off=(14, 0))


# ---------------------------------------------------------------------------------------------------------
# The cube on its own


def test_cube_verbs() -> None:
    cube = Cube()
    assert may_double(cube, WHITE)
    assert may_double(cube, BLACK)
    assert not may_double(cube, WHITE, enabled=False)
    assert not may_double(cube, WHITE, crawford=True)
    offered = offer_double(cube, WHITE)
    assert offered.pending
    assert offered.offered_value == 2
    assert offered.doubled
    assert not may_double(offered, BLACK)
    assert drop_stake(offered, BLACK) == 1
    taken = take(offered, BLACK)
    assert (taken.value, taken.owner, taken.pending) == (2, BLACK, False)
    assert not may_double(taken, WHITE)
    assert may_double(taken, BLACK)
    with pytest.raises(IllegalActionError, match="owner"):
        offer_double(taken, WHITE)
    with pytest.raises(IllegalActionError, match="own double"):
        take(offered, WHITE)
    with pytest.raises(IllegalActionError, match="no double"):
        take(cube, BLACK)
    with pytest.raises(IllegalActionError, match="Crawford"):
        offer_double(cube, WHITE, crawford=True)
    with pytest.raises(IllegalActionError, match="does not use"):
        offer_double(cube, WHITE, enabled=False)


def test_beaver_on_its_own() -> None:
    offered = offer_double(Cube(value=2, owner=WHITE), WHITE)
    beavered = beaver(offered, BLACK)
    assert beavered.offered_value == 8
    assert beavered.offered_by == BLACK
    assert drop_stake(beavered, WHITE) == 4
    taken = take(beavered, WHITE)
    assert (taken.value, taken.owner) == (8, BLACK)  # the beaverer keeps the cube
    with pytest.raises(IllegalActionError, match="beavered"):
        beaver(beavered, WHITE)


def test_automatic_double_on_its_own() -> None:
    cube = automatic_double(automatic_double(Cube()))
    assert (cube.value, cube.owner, cube.automatic, cube.doubled) == (4, None, 2, False)


# ---------------------------------------------------------------------------------------------------------
# In a game


def test_double_take_then_redouble_only_by_the_owner() -> None:
    state = ready(BLACK, cube=True)
    state = act(state, "double")
    assert state.phase is Phase.DOUBLED
    assert BACKGAMMON.to_move(state) == WHITE
    assert BACKGAMMON.legal_actions(state, WHITE) == ["drop", "take"]
    assert BACKGAMMON.view(state, None).cube_offered == 2
    with pytest.raises(NotYourTurnError):
        act(state, "take", BLACK)
    state = act(state, "take")
    assert (state.cube.value, state.cube.owner) == (2, WHITE)
    assert state.phase is Phase.ROLLING
    assert BACKGAMMON.to_move(state) == BLACK  # the doubler rolls
    state = run(state, "21", "1")
    # White owns the cube: it may redouble.
    assert state.phase is Phase.ROLL_OR_DOUBLE
    assert "double" in BACKGAMMON.legal_actions(state, WHITE)
    state = run(state, "double", "take")
    assert (state.cube.value, state.cube.owner) == (4, BLACK)
    state = run(state, "43", "1")
    # Black owns the cube: Black may redouble, White may not.
    assert state.phase is Phase.ROLL_OR_DOUBLE
    assert BACKGAMMON.to_move(state) == BLACK
    state = run(state, "roll", "55", "1")
    assert BACKGAMMON.to_move(state) == WHITE
    assert state.phase is Phase.ROLLING
    assert BACKGAMMON.legal_actions(state, WHITE) == []


def test_owner_not_to_move_cannot_double() -> None:
    state = run(ready(BLACK, cube=True), "double", "take", "21", "1")
    assert state.cube.owner == WHITE
    state = run(state, "roll", "43", "1")
    assert BACKGAMMON.to_move(state) == BLACK
    assert state.phase is Phase.ROLLING
    with pytest.raises(NotYourTurnError):
        act(state, "double", BLACK)


def test_drop_ends_the_game_at_the_stake_before_the_double() -> None:
    state = run(ready(BLACK, cube=True), "double", "take", "21", "1", "double")
    assert state.cube.offered_value == 4
    state = act(state, "drop")
    outcome = BACKGAMMON.outcome(state)
    assert outcome is not None
    assert outcome.termination is Termination.DOUBLE_DROPPED
    assert outcome.winner == WHITE
    assert outcome.score == (2.0, 0.0)
    assert state.games[0].events[-1].kind is EventKind.DROP


def test_drop_is_never_a_gammon() -> None:
    state = act(ready(WHITE, GAMMON, cube=True, gammons=True), "double")
    state = act(state, "drop")
    outcome = BACKGAMMON.outcome(state)
    assert outcome is not None
    assert outcome.score == (1.0, 0.0)


def test_beaver_then_take() -> None:
    state = run(ready(BLACK, cube=True, beavers=True), "double")
    assert BACKGAMMON.legal_actions(state, WHITE) == ["beaver", "drop", "take"]
    state = act(state, "beaver")
    assert state.phase is Phase.DOUBLED
    assert BACKGAMMON.to_move(state) == BLACK  # the doubler answers
    assert BACKGAMMON.legal_actions(state, BLACK) == ["drop", "take"]
    with pytest.raises(IllegalActionError, match="take or drop"):
        act(state, "beaver")
    state = act(state, "take")
    assert (state.cube.value, state.cube.owner) == (4, WHITE)
    assert BACKGAMMON.to_move(state) == BLACK
    assert state.phase is Phase.ROLLING


def test_beaver_then_drop_loses_the_doubled_stake() -> None:
    state = run(ready(BLACK, cube=True, beavers=True), "double", "beaver", "drop")
    outcome = BACKGAMMON.outcome(state)
    assert outcome is not None
    assert outcome.termination is Termination.DOUBLE_DROPPED
    assert outcome.winner == WHITE
    assert outcome.score == (2.0, 0.0)


def test_no_beaver_without_the_option() -> None:
    state = run(ready(BLACK, cube=True), "double")
    with pytest.raises(IllegalActionError, match="beavers"):
        act(state, "beaver")


@pytest.mark.parametrize(("limit", "ties", "value"), [(0, 2, 1), (1, 1, 2), (1, 3, 2), (2, 2, 4), (3, 2, 4)])
def test_automatic_doubles_up_to_the_limit(limit: int, ties: int, value: int) -> None:
    state = new(cube=True, automatic_doubles=limit) if limit else new(cube=True)
    for _ in range(ties):
        state = roll(state, "33")
    state = roll(state, "31")
    assert state.cube.value == value
    assert state.cube.owner is None
    state = act(state, "8/5 6/5")
    # The cube stays centred: Black may double it to twice its value.
    state = act(state, "double")
    assert state.cube.offered_value == 2 * value


def test_jacoby_counts_gammons_only_once_the_cube_was_turned() -> None:
    options: dict[str, object] = {"cube": True, "gammons": True, "jacoby": True}
    plain = run(ready(WHITE, GAMMON, **options), "roll", "61", "1/off")
    outcome = BACKGAMMON.outcome(plain)
    assert outcome is not None
    assert outcome.score == (1.0, 0.0)
    # Under Jacoby without a double, only a single resign offer is listed.
    state = run(ready(BLACK, None, **options), "roll", "21")
    assert [a for a in BACKGAMMON.legal_actions(state, BLACK) if a.startswith("resign")] == ["resign single"]
    turned = run(ready(WHITE, GAMMON, **options), "double", "take", "61", "1/off")
    outcome = BACKGAMMON.outcome(turned)
    assert outcome is not None
    assert outcome.score == (4.0, 0.0)


def test_jacoby_ignores_automatic_doubles() -> None:
    state = roll(new(cube=True, gammons=True, jacoby=True, automatic_doubles=1), "22")
    state = run(state, "13", "8/5 6/5")
    assert state.cube.value == 2
    assert not state.cube.doubled


def test_no_doubling_without_a_cube() -> None:
    state = roll(ready(BLACK), "21")
    with pytest.raises(IllegalActionError):
        act(state, "double")
