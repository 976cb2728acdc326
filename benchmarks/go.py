"""Go figures: ``apply`` per move on 19x19 random games (captures and ko checks included), the cost of
``legal_actions`` and of a view, and the memory of one game state at a typical game's length; then moves
per second through rules-go (its own process, every move durable before the answer) and the service's
memory per live 19x19 match at a typical game's length.

Random players pick a random legal point that does not fill one of their own eyes (pass when none is
left); games stop at 400 moves. Only the engine is timed: the choice of the move is made outside.
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
import tracemalloc
import uuid
from typing import Any

from skillclassics.go.v1 import go_pb2
from skillclassics.rules.v1 import rules_pb2 as pb
from skillclassics.rules.v1 import rules_pb2_grpc

from benchmarks.support import bench_service, concurrent_games, percentile, rss_mib
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


# ---------------------------------------------------------------------------------------------------------
# Through the service (rules-go as its own process)

SERVICE_GAMES = 16
"""19x19 games played at once through the service."""
SERVICE_MOVES = 150
"""Moves of each of those games (replayed from random games made by the engine beforehand)."""
MEMORY_MATCHES = 150
"""Live 19x19 matches held for the memory figure, each played to ``MEMORY_MOVES`` moves."""


async def _create(stub: Any) -> str:
    match_id = f"go.0.{uuid.uuid4().hex[:16]}"
    await stub.CreateMatch(
        pb.CreateMatchRequest(
            match_id=match_id,
            seats=[pb.SeatAssignment(seat=0, player_id="b"), pb.SeatAssignment(seat=1, player_id="w")],
            options=pb.MatchOptions(go=go_pb2.GoOptions(size=19)),
            time_control=pb.TimeControl(base_ms=60 * 60_000, periods=5, period_ms=30_000),
            idempotency_key="create",
            disconnect_forfeit_ms=3_600_000,
        )
    )
    return match_id


async def _play(stub: Any, match_id: str, log: list[tuple[int, str]], latencies: list[float]) -> int:
    for index, (seat, action) in enumerate(log):
        request = pb.SubmitActionRequest(
            match_id=match_id,
            seat=seat,
            idempotency_key=f"m{index}",
            action=pb.Action(go=go_pb2.GoAction(action=action)),
        )
        started = time.perf_counter()
        await stub.SubmitAction(request)
        latencies.append(time.perf_counter() - started)
    return len(log)


async def through_service() -> list[tuple[str, str]]:
    from tests.callers import RULES_CALLERS, Callers

    # Random 19x19 games made by the engine, long enough to replay MEMORY_MOVES moves of each.
    logs = [
        log for log in random_games(SERVICE_GAMES + MEMORY_MATCHES + 40, 31)[4] if len(log) > MEMORY_MOVES
    ]
    assert len(logs) >= SERVICE_GAMES + MEMORY_MATCHES, "random 19x19 games were shorter than expected"
    async with (
        bench_service("services.rules_go") as (service, backend),
        Callers(service.address) as callers,
    ):
        stub = callers.stub(rules_pb2_grpc.RulesServiceStub, RULES_CALLERS)
        matches = [await _create(stub) for _ in range(SERVICE_GAMES)]
        plays = [
            (lambda latencies, m=m, log=log: _play(stub, m, log[:SERVICE_MOVES], latencies))
            for m, log in zip(matches, logs, strict=False)
        ]
        counts, elapsed, p50, p99 = await concurrent_games(plays)
        speed = (
            f"through rules-go ({backend}, {SERVICE_GAMES} 19x19 games at once, {SERVICE_MOVES} moves each)",
            f"{sum(counts) / elapsed:,.0f} moves/s; SubmitAction p50 {p50:.1f} ms, p99 {p99:.1f} ms "
            "(each move durable before the answer)",
        )
        before = rss_mib(service.pid)
        extra = logs[SERVICE_GAMES : SERVICE_GAMES + MEMORY_MATCHES]
        for batch in range(0, len(extra), 25):
            made = [await _create(stub) for _ in extra[batch : batch + 25]]
            await asyncio.gather(
                *(
                    _play(stub, m, log[:MEMORY_MOVES], [])
                    for m, log in zip(made, extra[batch : batch + 25], strict=True)
                )
            )
        after = rss_mib(service.pid)
        per_match = (after - before) * 1024 / len(extra)
        per_gib = int(1024 * 1024 / max(per_match, 0.001))
        memory = (
            "rules-go memory",
            f"{after:.1f} MiB with {SERVICE_GAMES + len(extra)} live 19x19 matches: about {per_match:.0f} "
            f"KiB per more live match {MEMORY_MOVES} moves in ({per_gib:,} such matches per GiB)",
        )
        return [speed, memory]


async def run() -> None:
    for name, value in figures():
        print(f"{name}: {value}")
    for name, value in await through_service():
        print(f"{name}: {value}")
