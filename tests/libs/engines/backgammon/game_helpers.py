"""Helpers of the game-part tests (engine, cube, match, MAT): drive a match with chosen dice.

``run(state, "52", "24/18 13/8", ...)`` applies each step: a string of two digits is a dice draw handed
to the pending chance request, anything else an action of the seat to move (``"0:continue"`` names the
seat explicitly). Positions are built with the geometry's :meth:`Position.from_counts` where a test needs
one.
"""

from __future__ import annotations

import random
from dataclasses import replace

from libs.engines.backgammon.board import Position
from libs.engines.backgammon.engine import (
    BACKGAMMON,
    BackgammonOptions,
    BackgammonState,
    Phase,
)
from libs.engines.base import ActionContext

CLOCKS = ActionContext(remaining_ms=(60_000, 60_000))


def roll(state: BackgammonState, dice: str) -> BackgammonState:
    request = BACKGAMMON.chance_needed(state)
    assert request is not None, f"no draw pending for {dice}"
    return BACKGAMMON.apply_chance(state, request, (int(dice[0]), int(dice[1])))


def act(state: BackgammonState, action: str, seat: int | None = None) -> BackgammonState:
    if seat is None:
        seat = BACKGAMMON.to_move(state)
        assert seat is not None, f"nobody may act before {action!r}"
    return BACKGAMMON.apply(state, seat, action, CLOCKS)


def run(state: BackgammonState, *steps: str) -> BackgammonState:
    for step in steps:
        if len(step) == 2 and step.isdigit():
            state = roll(state, step)
        elif ":" in step and step[0].isdigit() and step[1] == ":":
            state = act(state, step[2:], int(step[0]))
        else:
            state = act(state, step)
    return state


def new(**options: object) -> BackgammonState:
    return BACKGAMMON.new_game(BackgammonOptions(**options))  # type: ignore[arg-type]


def with_position(state: BackgammonState, position: Position) -> BackgammonState:
    """``state`` with its board replaced (a test shortcut: the engine never does this)."""
    return replace(state, position=position)


def random_action(
    rng: random.Random,
    state: BackgammonState,
    seat: int,
    *,
    resign_rate: float = 0.02,
    cube_rate: float = 1.0,
) -> str:
    """A legal action for ``seat``: random, with resign offers and drops made rare so that games are
    played out to the end mostly; ``cube_rate`` makes doubles rarer (each is made with that chance)."""
    actions = BACKGAMMON.legal_actions(state, seat)
    assert actions, f"seat {seat} to act with nothing legal in {state.phase}"
    if "double" in actions and rng.random() >= cube_rate:
        return "roll"
    calm = [a for a in actions if not a.startswith("resign") and a != "drop" and a != "accept"]
    if calm and rng.random() > resign_rate:
        return rng.choice(calm)
    return rng.choice(actions)


def random_match(
    rng: random.Random, options: BackgammonOptions, *, max_steps: int = 20_000, cube_rate: float = 1.0
) -> tuple[BackgammonState, list[tuple[int, str] | tuple[int, int]]]:
    """A whole match of random legal actions and dice from ``rng``; also the steps taken (for replay)."""
    state = BACKGAMMON.new_game(options)
    steps: list[tuple[int, str] | tuple[int, int]] = []
    for _ in range(max_steps):
        if BACKGAMMON.outcome(state) is not None:
            return state, steps
        request = BACKGAMMON.chance_needed(state)
        if request is not None:
            dice = (rng.randint(1, 6), rng.randint(1, 6))
            steps.append(dice)
            state = BACKGAMMON.apply_chance(state, request, dice)
            continue
        if state.phase is Phase.BETWEEN_GAMES:
            seat = rng.choice([s for s in (0, 1) if not state.confirmed[s]])
        else:
            to_move = BACKGAMMON.to_move(state)
            assert to_move is not None
            seat = to_move
        action = random_action(rng, state, seat, cube_rate=cube_rate)
        steps.append((seat, action))
        state = BACKGAMMON.apply(state, seat, action, CLOCKS)
    raise AssertionError("the match did not end")


def ready(seat: int, position: Position | None = None, **options: object) -> BackgammonState:
    """A game where the opening roll (3-1) and its play (8/5 6/5) are made and ``seat`` starts its turn
    (deciding or waiting for its dice), the board replaced by ``position`` if given."""
    state = new(**options)
    state = run(state, "31" if seat == 1 else "13", "8/5 6/5")
    assert BACKGAMMON.to_move(state) == seat
    return state if position is None else with_position(state, position)
