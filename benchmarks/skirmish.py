"""Skirmish duel figures (the 5x5 engine of Skirmish Chess, ``libs.engines.skirmish``): ``play`` per ply
over whole random duels, ``legal_moves`` per call on the positions those duels reach, perft, and the
memory of one duel played to the 16-ply cap.

Random duels start from random setups (a seeded shuffle, as the fairness stream would give) with the odds
of a random capture pair; both sides play a random legal move until the duel ends by its rules (a king
captured, repetition, 16 plies, no move). Only the engine is timed: the choice of the move is made
outside, from moves listed beforehand.
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
import tracemalloc

from benchmarks.support import percentile
from libs.engines.skirmish import (
    MAX_PLIES,
    Duel,
    Move,
    Position,
    apply_odds,
    legal_moves,
    new_duel,
    perft,
    play,
    preset_position,
    random_position,
)

DUELS = 5_000
PIECES = "PNBRQK"


def _start(rng: random.Random) -> Position:
    permutation = list(range(20))
    rng.shuffle(permutation)
    position, _ = apply_odds(random_position(permutation), rng.choice(PIECES), rng.choice(PIECES))
    return position


def random_duels(duels: int, seed: int) -> tuple[list[tuple[Position, list[Move]]], list[Position]]:
    """Random duels as (start, moves), and every position met with the side to move to play."""
    rng = random.Random(seed)
    records: list[tuple[Position, list[Move]]] = []
    positions: list[Position] = []
    for _ in range(duels):
        start = _start(rng)
        duel = new_duel(start)
        moves: list[Move] = []
        while duel.result is None:
            positions.append(duel.position)
            move = rng.choice(duel.legal)
            moves.append(move)
            duel = play(duel, move)
        records.append((start, moves))
    return records, positions


def play_figures() -> list[tuple[str, str]]:
    records, positions = random_duels(DUELS, 3)
    clock = time.perf_counter
    plies = sum(len(moves) for _, moves in records)
    # play() alone over whole duels (new_duel included), each move a Move and then as UCI text.
    started = clock()
    for start, moves in records:
        duel = new_duel(start)
        for move in moves:
            duel = play(duel, move)
    elapsed = clock() - started
    texts = [(start, [m.uci for m in moves]) for start, moves in records]
    started = clock()
    for start, ucis in texts:
        duel = new_duel(start)
        for text in ucis:
            duel = play(duel, text)
    elapsed_text = clock() - started
    # legal_moves on every position met, one call timed at a time for the percentiles.
    started = clock()
    for position in positions:
        legal_moves(position)
    elapsed_legal = clock() - started
    timings: list[float] = []
    for position in positions[:20_000]:
        began = clock()
        legal_moves(position)
        timings.append(clock() - began)
    timings.sort()
    figures = [
        (
            f"skirmish play, {DUELS:,} random duels ({plies:,} plies, {plies / DUELS:.1f} per duel)",
            f"{plies / elapsed:,.0f} plies/s with Move objects; {plies / elapsed_text:,.0f} plies/s "
            "with UCI text",
        ),
        (
            f"skirmish legal_moves on {len(positions):,} positions of those duels",
            f"{len(positions) / elapsed_legal:,.0f} calls/s; p50 {percentile(timings, 0.5) * 1e6:.1f} µs, "
            f"p99 {percentile(timings, 0.99) * 1e6:.1f} µs per call",
        ),
    ]
    classic = preset_position("classic")
    started = clock()
    leaves = perft(classic, 5)
    elapsed_perft = clock() - started
    figures.append(
        ("skirmish perft 5 from classic", f"{leaves:,} leaves, {leaves / elapsed_perft:,.0f} leaves/s")
    )
    return figures


def memory_figures() -> list[tuple[str, str]]:
    """tracemalloc: what one duel played to the 16-ply cap holds (the import-time tables shared by every
    duel are not counted)."""
    rng = random.Random(16)
    while True:
        start = _start(rng)
        duel = new_duel(start)
        moves: list[Move] = []
        while duel.result is None:
            move = rng.choice(duel.legal)
            moves.append(move)
            duel = play(duel, move)
        if duel.ply == MAX_PLIES:
            break
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept: Duel = new_duel(start)
    for move in moves:
        kept = play(kept, move)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert kept.ply == MAX_PLIES
    return [
        (
            f"skirmish memory of one duel after {MAX_PLIES} plies (start, position, SAN and UCI record, "
            "repetition counts)",
            f"{(after - before) / 1024:.1f} KiB (tracemalloc)",
        )
    ]


def figures() -> list[tuple[str, str]]:
    """Every figure as (what, value)."""
    return play_figures() + memory_figures()


async def run() -> None:
    for name, value in figures():
        print(f"{name}: {value}")


if __name__ == "__main__":
    asyncio.run(run())
