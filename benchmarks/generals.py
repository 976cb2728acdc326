"""Game of the Generals engine figures: ``apply`` per move in random games (random setups, random legal
moves, challenges included), the cost of ``legal_actions`` and of a view, and the memory of one state
at a typical game's length (200 moves).

Random players pick a random legal move; games end by the rules (a Flag, or the no-challenge draw,
which caps every game). Only the engine is timed: the choice of the move is made outside.
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
import tracemalloc
import uuid
from typing import Any

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


# ---------------------------------------------------------------------------------------------------------
# Through the service (rules-generals as its own process, the first mover drawn from fairness)

SERVICE_MATCHES = 16
"""Games played at once through the service."""
SERVICE_MOVES = 120
"""Moves of each (random legal moves; a game that ends sooner ends there)."""
MEMORY_MATCHES = 150
"""Live matches held for the memory figure, each played to ``MEMORY_MOVES`` moves."""
MEMORY_MOVES = 100


async def _new_match(stub: Any, commit: Any, rng: random.Random) -> str:
    from skillclassics.fairness.v1 import fairness_pb2
    from skillclassics.generals.v1 import generals_pb2
    from skillclassics.rules.v1 import rules_pb2 as pb

    from tests.libs.engines.generals.helpers import random_setup

    match_id = f"generals.0.{uuid.uuid4().hex[:16]}"
    committed = await commit(fairness_pb2.CommitRequest(match_id=match_id, idempotency_key=match_id))
    await stub.CreateMatch(
        pb.CreateMatchRequest(
            match_id=match_id,
            seats=[pb.SeatAssignment(seat=0, player_id="w"), pb.SeatAssignment(seat=1, player_id="b")],
            options=pb.MatchOptions(generals=generals_pb2.GeneralsOptions()),
            time_control=pb.TimeControl(periods=3, period_ms=120_000),
            fairness_commitment=committed.commitment,
            idempotency_key="create",
            disconnect_forfeit_ms=3_600_000,
        )
    )
    for seat in (0, 1):
        for n, text in enumerate((f"setup {random_setup(rng, seat)}", "ready")):
            await stub.SubmitAction(_act(match_id, seat, text, f"s{seat}{n}"))
    return match_id


def _act(match_id: str, seat: int, text: str, key: str) -> Any:
    from skillclassics.generals.v1 import generals_pb2
    from skillclassics.rules.v1 import rules_pb2 as pb

    return pb.SubmitActionRequest(
        match_id=match_id,
        seat=seat,
        idempotency_key=key,
        action=pb.Action(generals=generals_pb2.GeneralsAction(action=text)),
    )


async def _play(stub: Any, match_id: str, moves: int, rng: random.Random, latencies: list[float]) -> int:
    """Random legal moves for whichever seat is to move, up to ``moves``; the moves made."""
    from skillclassics.rules.v1 import rules_pb2 as pb

    made = 0
    while made < moves:
        update = (await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=0))).update
        if update.status in (pb.MATCH_STATUS_FINISHED, pb.MATCH_STATUS_ABORTED):
            return made
        if not update.HasField("to_move") or update.view.generals.awaiting_chance:
            await asyncio.sleep(0.002)  # the first mover is being drawn
            continue
        mover = update.to_move
        if mover != 0:
            update = (await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=mover))).update
        legal = [a for a in update.legal_actions if "-" in a]
        if not legal:
            return made
        started = time.perf_counter()
        await stub.SubmitAction(_act(match_id, mover, rng.choice(legal), f"m{made}"))
        latencies.append(time.perf_counter() - started)
        made += 1
    return made


async def through_service() -> list[tuple[str, str]]:
    from benchmarks.support import chance_rules, concurrent_games, rss_mib

    async with chance_rules("services.rules_generals") as service:
        stub, commit, backend = service.stub, service.commit, service.backend
        rng = random.Random(5)
        matches = [await _new_match(stub, commit, rng) for _ in range(SERVICE_MATCHES)]
        games = [
            (lambda latencies, m=m, n=n: _play(stub, m, SERVICE_MOVES, random.Random(n), latencies))
            for n, m in enumerate(matches)
        ]
        counts, elapsed, p50, p99 = await concurrent_games(games)
        speed = (
            f"through rules-generals ({backend}, {SERVICE_MATCHES} games at once, random legal moves)",
            f"{sum(counts) / elapsed:,.0f} moves/s (plus one or two GetMatch per move); "
            f"SubmitAction p50 {p50:.1f} ms, p99 {p99:.1f} ms (each move durable before the answer)",
        )
        before = rss_mib(service.rules.pid)
        live = 0
        for batch in range(0, MEMORY_MATCHES, 25):
            made = [await _new_match(stub, commit, rng) for _ in range(25)]
            played = await asyncio.gather(
                *(_play(stub, m, MEMORY_MOVES, random.Random(batch + n), []) for n, m in enumerate(made))
            )
            live += sum(1 for moves in played if moves == MEMORY_MOVES)
        after = rss_mib(service.rules.pid)
        per_match = (after - before) * 1024 / MEMORY_MATCHES
        memory = (
            "rules-generals memory",
            f"{after:.1f} MiB after {MEMORY_MATCHES} more matches ({live} still live at {MEMORY_MOVES} "
            "moves; the rest ended by the draw rules or a captured Flag sooner): about "
            f"{per_match:.0f} KiB per match made (finished ones counted against the live ones)",
        )
        return [speed, memory]


async def run() -> None:
    for name, value in figures():
        print(f"{name}: {value}")
    for name, value in await through_service():
        print(f"{name}: {value}")


if __name__ == "__main__":
    asyncio.run(run())
