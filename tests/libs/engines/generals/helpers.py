"""Shared helpers for the Generals tests: boards by hand, random setups and random games."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace

from libs.engines.base import ActionContext
from libs.engines.generals import (
    ACCEPT,
    ARMY,
    CODES,
    DEADLINE,
    DECLINE,
    DRAW,
    GENERALS,
    HOME,
    NAMES,
    GeneralsState,
    Phase,
    parse_square,
    placements_text,
    rank_id,
)

CONTEXT = ActionContext(remaining_ms=(0, 0))


def random_setup(rng: random.Random, seat: int, pieces: int = 21) -> str:
    """Placements text of ``pieces`` of ``seat``'s army (in rank order) on random home squares."""
    squares = rng.sample(HOME[seat], pieces)
    return placements_text(zip(squares, ARMY[:pieces], strict=False))


def started(white: str, black: str, first: int = 0) -> GeneralsState:
    """A game in play from two full setups (placements text) with ``first`` to move."""
    state = GENERALS.new_game()
    for seat, text in ((0, white), (1, black)):
        state = GENERALS.apply(state, seat, f"setup {text}", CONTEXT)
        state = GENERALS.apply(state, seat, "ready", CONTEXT)
    request = GENERALS.chance_needed(state)
    assert request is not None
    return GENERALS.apply_chance(state, request, (first,))


def position(pieces: Mapping[str, str], turn: int = 0, base: GeneralsState | None = None) -> GeneralsState:
    """A state in play with exactly ``pieces`` on the board: ``{"e4": "W:PVT", "e5": "B:FLG"}``. The
    history is empty (as if play had just begun with this position)."""
    cells = [0] * 72
    for square, text in pieces.items():
        colour, _, rank = text.partition(":")
        cells[parse_square(square)] = ("WB".index(colour) << 4) | rank_id(rank)
    board = tuple(cells)
    if base is None:
        base = started(_full(0), _full(1))
    return replace(base, board=board, initial=board, turn=turn, first=turn)


def _full(seat: int) -> str:
    return placements_text(zip(HOME[seat], ARMY, strict=False))


FULL_WHITE = _full(0)
FULL_BLACK = _full(1)


def play(state: GeneralsState, *actions: str) -> GeneralsState:
    """``actions`` applied in turn order (offers by the seat to move)."""
    for action in actions:
        seat = state.turn
        assert seat is not None
        state = GENERALS.apply(state, seat, action, CONTEXT)
    return state


def random_game(
    rng: random.Random, check_listed: bool = False, offers: bool = True
) -> tuple[GeneralsState, list[object]]:
    """A random game from random setups to its end, and its replay steps.

    Setups: each seat sets up in one or two ``setup`` actions and readies, or, in one game in four, one
    seat (or both) leave pieces unplaced and the deadline completes them. Play: a random legal move;
    now and then a draw offer, answered at random. With ``check_listed`` every listed action of both
    seats is applied to a copy (it must be accepted)."""
    state = GENERALS.new_game()
    steps: list[object] = []
    late = rng.random() < 0.25
    seat: int
    for seat in (0, 1):
        count = rng.randint(0, 21) if late and rng.random() < 0.7 else 21
        if rng.random() < 0.3:
            text = random_setup(rng, seat, rng.randint(0, 21))
            state = GENERALS.apply(state, seat, f"setup {text}", CONTEXT)
            steps.append((seat, f"setup {text}"))
        text = random_setup(rng, seat, count)
        state = GENERALS.apply(state, seat, f"setup {text}", CONTEXT)
        steps.append((seat, f"setup {text}"))
        if count == 21 and not (late and rng.random() < 0.3):
            state = GENERALS.apply(state, seat, "ready", CONTEXT)
            steps.append((seat, "ready"))
    if GENERALS.phase_deadline(state) is not None:
        state = GENERALS.on_phase_deadline(state)
        steps.append(DEADLINE)
    while (request := GENERALS.chance_needed(state)) is not None:
        if request.kind == "shuffle":
            values = list(range(request.bound))
            rng.shuffle(values)
        else:
            values = [rng.randrange(2)]
        state = GENERALS.apply_chance(state, request, tuple(values))
        steps.append(tuple(values))
    assert state.phase is Phase.PLAY
    while state.result is None:
        turn = state.turn
        assert turn is not None
        seat = turn
        if check_listed:
            for s in (0, 1):
                listed = GENERALS.legal_actions(state, s)
                assert listed == sorted(listed)
                for action in listed:
                    GENERALS.apply(state, s, action, CONTEXT)
        actor = seat
        actions = GENERALS.legal_actions(state, seat)
        if state.offer == 1 - seat:
            action = rng.choice([ACCEPT, DECLINE]) if rng.random() < 0.5 else _a_move(rng, actions)
            if action == ACCEPT and rng.random() < 0.8:
                action = DECLINE
        elif (
            offers
            and rng.random() < 0.02
            and DRAW in GENERALS.legal_actions(state, actor := rng.choice((0, 1)))
        ):
            action = DRAW
        else:
            actor = seat
            action = _a_move(rng, actions)
        state = GENERALS.apply(state, actor, action, CONTEXT)
        steps.append((actor, action))
    return state, steps


def _a_move(rng: random.Random, actions: list[str]) -> str:
    return rng.choice([a for a in actions if "-" in a])


def ranks_text(pieces: Mapping[str, str]) -> str:
    return " ".join(f"{s}={r}" for s, r in pieces.items())


__all__ = ["CODES", "NAMES"]
