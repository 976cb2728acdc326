"""Go engine figures: ``apply`` per move on 19x19 random games (captures and ko checks included), the cost
of ``legal_actions`` and of a view, and the memory of one game state at a typical game's length.

Random players pick a random legal point that does not fill one of their own eyes (pass when none is
left); games stop at 400 moves. Only the engine is timed: the choice of the move is made outside.
"""

from __future__ import annotations

import gc
import random
import time
import tracemalloc

from benchmarks.support import percentile
from libs.engines.base import ActionContext
from libs.engines.go import GO, PASS, GoOptions, GoState, Phase, replay

GAMES = 60
MAX_MOVES = 400
MEMORY_MOVES = 250
"""A typical 19x19 game's length (moves, passes included) for the memory figure."""
CONTEXT = ActionContext(remaining_ms=(600_000, 600_000))


def _choose(state: GoState, rng: random.Random) -> str:
    board = state.board
    colour = state.turn + 1
    cells = board.cells
    neighbors = board.geometry.neighbors
    candidates = [p for p in board.legal_points(colour) if not all(cells[q] == colour for q in neighbors[p])]
    if not candidates:
        return PASS
    return board.geometry.names[rng.choice(candidates)]


def random_games(
    games: int, seed: int, size: int = 19, max_moves: int = MAX_MOVES
) -> tuple[list[float], list[float], list[GoState], int, list[list[tuple[int, str]]]]:
    """Random games: the time of every ``apply``, the positions met, captures, and the action logs."""
    rng = random.Random(seed)
    options = GoOptions(size=size)
    timings: list[float] = []
    capture_timings: list[float] = []
    positions: list[GoState] = []
    captures = 0
    logs: list[list[tuple[int, str]]] = []
    for _ in range(games):
        state = GO.new_game(options)
        log: list[tuple[int, str]] = []
        while state.phase is Phase.PLAY:
            seat = state.turn
            action = PASS if len(state.moves) >= max_moves else _choose(state, rng)
            started = time.perf_counter()
            state = GO.apply(state, seat, action, CONTEXT)
            elapsed = time.perf_counter() - started
            timings.append(elapsed)
            if state.board.captured:
                captures += len(state.board.captured)
                capture_timings.append(elapsed)
            log.append((seat, action))
            if len(positions) < 20_000 and len(state.moves) % 3 == 0 and state.phase is Phase.PLAY:
                positions.append(state)
        logs.append(log)
    return timings, capture_timings, positions, captures, logs


def apply_figures() -> list[tuple[str, str]]:
    timings, capture_timings, positions, captures, logs = random_games(GAMES, 19)
    total = sum(timings)
    ordered = sorted(timings)
    mean = total / len(timings)
    figures = [
        (
            f"go apply, 19x19, {GAMES} random games ({len(timings):,} moves, {captures:,} stones captured)",
            f"{len(timings) / total:,.0f} moves/s; mean {mean * 1e6:.1f} µs, "
            f"p50 {percentile(ordered, 0.5) * 1e6:.1f} µs, p99 {percentile(ordered, 0.99) * 1e6:.1f} µs, "
            f"max {ordered[-1] * 1e6:.0f} µs per move",
        ),
        (
            "go apply, 19x19, moves that capture",
            f"{len(capture_timings):,} moves, "
            f"mean {sum(capture_timings) / len(capture_timings) * 1e6:.1f} µs",
        ),
    ]
    legal: list[float] = []
    views: list[float] = []
    for state in positions:
        started = time.perf_counter()
        GO.legal_actions(state, state.turn)
        legal.append(time.perf_counter() - started)
    for state in positions[:3000]:
        started = time.perf_counter()
        GO.view(state, None)
        views.append(time.perf_counter() - started)
    legal.sort()
    views.sort()
    figures.append(
        (
            f"go legal_actions, 19x19, {len(legal):,} positions from those games",
            f"mean {sum(legal) / len(legal) * 1e6:.0f} µs, p50 {percentile(legal, 0.5) * 1e6:.0f} µs, "
            f"p99 {percentile(legal, 0.99) * 1e6:.0f} µs per call",
        )
    )
    figures.append(
        (
            "go view (with the legal points), 19x19",
            f"mean {sum(views) / len(views) * 1e6:.0f} µs, "
            f"p99 {percentile(views, 0.99) * 1e6:.0f} µs per call",
        )
    )
    replayed = sum(len(log) for log in logs)
    started = time.perf_counter()
    for log in logs:
        replay(GoOptions(size=19), log)
    elapsed = time.perf_counter() - started
    figures.append(("go replay of the same games", f"{replayed / elapsed:,.0f} moves/s"))
    return figures


def memory_figures() -> list[tuple[str, str]]:
    """tracemalloc: the memory a state holds after a 250-move 19x19 game (the per-size tables shared by
    every game are built before measuring and not counted)."""
    rng = random.Random(250)
    log: list[tuple[int, str]] = []
    state = GO.new_game(GoOptions(size=19))
    while len(log) < MEMORY_MOVES and state.phase is Phase.PLAY:
        action = _choose(state, rng)
        log.append((state.turn, action))
        state = GO.apply(state, state.turn, action, CONTEXT)
    stones = state.board.count(1) + state.board.count(2)
    groups = len(state.board.groups())
    del state
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = replay(GoOptions(size=19), log)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(kept.moves) == len(log)
    return [
        (
            f"go memory of one state after a {len(log)}-move 19x19 random game "
            f"({stones} stones, {groups} groups on the board)",
            f"{(after - before) / 1024:.1f} KiB (tracemalloc)",
        )
    ]


def figures() -> list[tuple[str, str]]:
    """Every figure as (what, value)."""
    return apply_figures() + memory_figures()


async def run() -> None:
    for name, value in figures():
        print(f"{name}: {value}")
