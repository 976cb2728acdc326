"""Skirmish Chess figures. The 5x5 duel engine (``libs.engines.skirmish``): ``play`` per ply over whole
random duels, ``legal_moves`` per call on the positions those duels reach, perft, and the memory of one
duel played to the 16-ply cap. Then whole Skirmish Chess games through rules-chess (random games made by
the engine beforehand, replayed over gRPC several at once): actions per second, SubmitAction latency, and
resident memory per live match.

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


SERVICE_GAMES = 8
"""Skirmish Chess games played through rules-chess at once."""
GAME_ACTIONS = 160
"""Actions (main-board moves and duel moves) of each, at most."""
MEMORY_MATCHES = 100
"""More live matches held, each ``GAME_ACTIONS`` actions in, for the memory figure."""


DUEL_MOVES: list[int] = []
"""Of each game :func:`random_games` made last, how many of its actions were duel moves."""


def random_games(games: int, seed: int) -> list[list[tuple[int, str]]]:
    """Whole random Skirmish Chess games through the engine (random moves on both boards, never a draw
    action), as (seat, action) logs cut at ``GAME_ACTIONS``."""
    from libs.engines.base import ActionContext
    from libs.engines.chess.skirmish import SKIRMISH_CHESS, SkirmishChessOptions

    rng = random.Random(seed)
    context = ActionContext(remaining_ms=(600_000, 600_000), phase_elapsed_ms=10)
    logs = []
    DUEL_MOVES.clear()
    for _ in range(games):
        state = SKIRMISH_CHESS.new_game(SkirmishChessOptions())
        log: list[tuple[int, str]] = []
        in_duel = 0
        while len(log) < GAME_ACTIONS and (seat := SKIRMISH_CHESS.to_move(state)) is not None:
            actions = [a for a in SKIRMISH_CHESS.legal_actions(state, seat) if "_" not in a]
            action = rng.choice(actions)
            in_duel += state.pending is not None
            state = SKIRMISH_CHESS.apply(state, seat, action, context)
            log.append((seat, action))
        logs.append(log)
        DUEL_MOVES.append(in_duel)
    return logs


async def through_service() -> list[tuple[str, str]]:
    from skillclassics.chess.v1 import chess_pb2
    from skillclassics.rules.v1 import rules_pb2 as pb
    from skillclassics.rules.v1 import rules_pb2_grpc

    from benchmarks.support import bench_service, concurrent_games, rss_mib
    from tests.callers import RULES_CALLERS, Callers

    async def create(stub: rules_pb2_grpc.RulesServiceStub, n: int) -> str:
        match_id = f"chess.0.sk{n}x{random.getrandbits(40):x}"
        options = chess_pb2.ChessOptions(
            ruleset=chess_pb2.RULESET_FIDE,
            variant=chess_pb2.VARIANT_SKIRMISH,
            skirmish=chess_pb2.SkirmishOptions(clock_base_ms=600_000),
        )
        await stub.CreateMatch(
            pb.CreateMatchRequest(
                match_id=match_id,
                seats=[pb.SeatAssignment(seat=0, player_id="w"), pb.SeatAssignment(seat=1, player_id="b")],
                options=pb.MatchOptions(chess=options),
                time_control=pb.TimeControl(base_ms=3_600_000),
                idempotency_key="create",
                disconnect_forfeit_ms=3_600_000,
            )
        )
        return match_id

    async def replay(
        stub: rules_pb2_grpc.RulesServiceStub,
        match_id: str,
        log: list[tuple[int, str]],
        latencies: list[float],
    ) -> int:
        for index, (seat, action) in enumerate(log):
            request = pb.SubmitActionRequest(
                match_id=match_id,
                seat=seat,
                idempotency_key=f"a{index}",
                action=pb.Action(chess=chess_pb2.ChessAction(move=action)),
            )
            started = time.perf_counter()
            await stub.SubmitAction(request)
            latencies.append(time.perf_counter() - started)
        return len(log)

    logs = random_games(SERVICE_GAMES + MEMORY_MATCHES, 5)
    duel_moves = sum(DUEL_MOVES[:SERVICE_GAMES])
    async with (
        bench_service("services.rules_chess") as (service, backend),
        Callers(service.address) as callers,
    ):
        stub = callers.stub(rules_pb2_grpc.RulesServiceStub, RULES_CALLERS)
        matches = [await create(stub, n) for n in range(SERVICE_GAMES)]
        plays = [
            (lambda latencies, m=m, log=log: replay(stub, m, log, latencies))
            for m, log in zip(matches, logs, strict=False)
        ]
        counts, elapsed, p50, p99 = await concurrent_games(plays)
        speed = (
            f"Skirmish Chess through rules-chess ({backend}, {SERVICE_GAMES} games at once, up to "
            f"{GAME_ACTIONS} actions each, main-board and duel moves)",
            f"{sum(counts) / elapsed:,.0f} actions/s; SubmitAction p50 {p50:.1f} ms, p99 {p99:.1f} ms; "
            f"one game of {sum(counts) / SERVICE_GAMES:.0f} actions in {elapsed:.1f} s (about "
            f"{duel_moves / SERVICE_GAMES:.0f} of them duel moves, each durable before the answer)",
        )
        before = rss_mib(service.pid)
        extra = logs[SERVICE_GAMES:]
        for batch in range(0, len(extra), 25):
            made = [await create(stub, 1000 + batch + n) for n in range(len(extra[batch : batch + 25]))]
            await asyncio.gather(
                *(replay(stub, m, log, []) for m, log in zip(made, extra[batch : batch + 25], strict=True))
            )
        after = rss_mib(service.pid)
        per_match = (after - before) * 1024 / len(extra)
        memory = (
            "rules-chess memory with Skirmish Chess",
            f"{after:.1f} MiB with {SERVICE_GAMES + len(extra)} matches: about {per_match:.0f} KiB per more "
            f"match {GAME_ACTIONS} actions in ({int(1024 * 1024 / max(per_match, 0.001)):,} per GiB; "
            "games that ended before are counted too)",
        )
        return [speed, memory]


async def run() -> None:
    for name, value in figures():
        print(f"{name}: {value}")
    for name, value in await through_service():
        print(f"{name}: {value}")


if __name__ == "__main__":
    asyncio.run(run())
