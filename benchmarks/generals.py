"""Game of the Generals engine figures: ``apply`` per move in random games (random setups, random legal
moves, challenges included), the cost of ``legal_actions`` and of a view, and the memory of one state
at a typical game's length (200 moves).

Random players pick a random legal move; games end by the rules (a Flag, or the no-challenge draw,
which caps every game). Only the engine is timed: the choice of the move is made outside.
"""

from __future__ import annotations

import gc
import random
import time
import tracemalloc

from libs.engines.base import ActionContext
from libs.engines.generals import (
    ARMY,
    GENERALS,
    HOME,
    GeneralsState,
    placements_text,
    replay,
)

GAMES = 300
MEMORY_MOVES = 200
"""A typical game's length (moves of both sides) for the memory figure."""
CONTEXT = ActionContext(remaining_ms=(60_000, 60_000))


def _started(rng: random.Random) -> tuple[GeneralsState, list[object]]:
    steps: list[object] = []
    for seat in (0, 1):
        text = placements_text(zip(rng.sample(HOME[seat], 21), ARMY, strict=True))
        steps += [(seat, f"setup {text}"), (seat, "ready")]
    steps.append((rng.randrange(2),))
    return replay(None, steps), steps


def random_games(games: int, seed: int) -> tuple[list[float], list[float], list[float], list[int]]:
    """Timings of every ``apply``, of ``legal_actions`` (the mover's), of a view, and each game's length."""
    rng = random.Random(seed)
    applies: list[float] = []
    listings: list[float] = []
    views: list[float] = []
    lengths: list[int] = []
    clock = time.perf_counter
    for _ in range(games):
        state, _ = _started(rng)
        while state.result is None:
            seat = state.turn
            assert seat is not None
            started = clock()
            actions = GENERALS.legal_actions(state, seat)
            listings.append(clock() - started)
            action = rng.choice([a for a in actions if "-" in a])
            started = clock()
            state = GENERALS.apply(state, seat, action, CONTEXT)
            applies.append(clock() - started)
            if len(views) < 20_000 and state.plies % 4 == 0:
                started = clock()
                GENERALS.view(state, seat)
                views.append(clock() - started)
        lengths.append(state.plies)
    return applies, listings, views, lengths


def _rate(timings: list[float]) -> str:
    ordered = sorted(timings)
    mean = sum(ordered) / len(ordered)
    p99 = ordered[int(len(ordered) * 0.99)]
    worst = ordered[-1]
    return f"{1 / mean:,.0f}/s (mean {mean * 1e6:.1f} us, p99 {p99 * 1e6:.1f} us, worst {worst * 1e6:.0f} us)"


def engine_figures() -> list[tuple[str, str]]:
    applies, listings, views, lengths = random_games(GAMES, 7)
    lengths.sort()
    return [
        (f"generals apply per move ({len(applies):,} moves in {GAMES} random games)", _rate(applies)),
        ("generals legal_actions of the seat to move", _rate(listings)),
        ("generals view for a seat", _rate(views)),
        (
            "generals random game length (moves)",
            f"median {lengths[len(lengths) // 2]}, longest {lengths[-1]}",
        ),
    ]


def memory_figures() -> list[tuple[str, str]]:
    """tracemalloc: the memory a state holds after a 200-move game (the tables shared by every game are
    built before measuring and not counted)."""
    rng = random.Random(200)
    while True:
        state, steps = _started(rng)
        log = list(steps)
        while state.result is None and state.plies < MEMORY_MOVES:
            seat = state.turn
            assert seat is not None
            action = rng.choice([a for a in GENERALS.legal_actions(state, seat) if "-" in a])
            log.append((seat, action))
            state = GENERALS.apply(state, seat, action, CONTEXT)
        if state.plies == MEMORY_MOVES:
            break
    pieces = sum(1 for v in state.board if v)
    del state
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = replay(None, log)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert kept.plies == MEMORY_MOVES
    return [
        (
            f"generals memory of one state after a {MEMORY_MOVES}-move random game ({pieces} pieces left)",
            f"{(after - before) / 1024:.1f} KiB (tracemalloc)",
        )
    ]


def figures() -> list[tuple[str, str]]:
    """Every figure as (what, value)."""
    return engine_figures() + memory_figures()


async def run() -> None:
    for name, value in figures():
        print(f"{name}: {value}")


if __name__ == "__main__":
    import asyncio

    asyncio.run(run())
