"""Chess figures: moves per second through the engine alone and through the rules service, the latency of
SubmitAction, and memory per live match with 1,000 live matches."""

from __future__ import annotations

import asyncio
import time
import uuid

from skillclassics.chess.v1 import chess_pb2
from skillclassics.rules.v1 import rules_pb2 as pb
from skillclassics.rules.v1 import rules_pb2_grpc

from benchmarks.support import bench_service, percentile, rss_mib
from libs.engines.base import ActionContext
from libs.engines.chess import CHESS, ChessOptions, Move
from tests.callers import RULES_CALLERS, Callers

ENGINE_MOVES = 5_000
SERVICE_GAMES = 32
SERVICE_MOVES_PER_GAME = 40
MEMORY_MATCHES = 1_000
CONTEXT = ActionContext(remaining_ms=(300_000, 300_000))


def pick(legal: list[str], ply: int) -> str:
    """A deterministic, spread-out choice among the legal moves (no randomness needed)."""
    return legal[(ply * 7919 + 13) % len(legal)]


def engine_alone() -> None:
    applied = 0
    started = time.perf_counter()
    while applied < ENGINE_MOVES:
        state = CHESS.new_game(ChessOptions())
        ply = 0
        while CHESS.outcome(state) is None and ply < 120:
            seat = CHESS.to_move(state)
            assert seat is not None
            moves = [a for a in CHESS.legal_actions(state, seat) if "_" not in a]
            state = CHESS.apply(state, seat, Move(pick(moves, ply)), CONTEXT)
            ply += 1
            applied += 1
    elapsed = time.perf_counter() - started
    print(f"engine alone: {applied / elapsed:,.0f} moves/s (legal-move listing + apply per move)")


async def create(stub: rules_pb2_grpc.RulesServiceStub) -> str:
    match_id = f"chess.0.{uuid.uuid4().hex[:16]}"
    await stub.CreateMatch(
        pb.CreateMatchRequest(
            match_id=match_id,
            seats=[pb.SeatAssignment(seat=0, player_id="w"), pb.SeatAssignment(seat=1, player_id="b")],
            options=pb.MatchOptions(chess=chess_pb2.ChessOptions()),
            time_control=pb.TimeControl(base_ms=30 * 60_000),
            idempotency_key="create",
            disconnect_forfeit_ms=3_600_000,
        )
    )
    return match_id


async def play(
    stub: rules_pb2_grpc.RulesServiceStub, match_id: str, moves: int, latencies: list[float] | None
) -> int:
    reply = await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=0))
    update = reply.update
    made = 0
    for ply in range(moves):
        if update.HasField("result") and update.result.termination:
            break
        seat = update.to_move
        legal = [m.uci for m in update.view.chess.legal_moves]
        request = pb.SubmitActionRequest(
            match_id=match_id,
            seat=seat,
            idempotency_key=f"m{ply}",
            action=pb.Action(chess=chess_pb2.ChessAction(move=pick(legal, ply))),
        )
        started = time.perf_counter()
        answer = await stub.SubmitAction(request)
        if latencies is not None:
            latencies.append(time.perf_counter() - started)
        update = answer.update
        made += 1
    return made


async def through_service() -> None:
    async with (
        bench_service("services.rules_chess") as (service, backend),
        Callers(service.address) as callers,
    ):
        # Matchmaking creates the matches, the gateway plays them: each over mutual TLS as itself.
        stub = callers.stub(rules_pb2_grpc.RulesServiceStub, RULES_CALLERS)
        matches = [await create(stub) for _ in range(SERVICE_GAMES)]
        latencies: list[float] = []
        started = time.perf_counter()
        counts = await asyncio.gather(*(play(stub, m, SERVICE_MOVES_PER_GAME, latencies) for m in matches))
        elapsed = time.perf_counter() - started
        latencies.sort()
        print(
            f"through the service ({backend}, {SERVICE_GAMES} games at once): "
            f"{sum(counts) / elapsed:,.0f} moves/s; "
            f"SubmitAction p50 {percentile(latencies, 0.5) * 1000:.2f} ms, "
            f"p99 {percentile(latencies, 0.99) * 1000:.2f} ms (each move durable before the answer)"
        )
        before = rss_mib(service.pid)
        extra = [await create(stub) for _ in range(MEMORY_MATCHES - SERVICE_GAMES)]
        for batch in range(0, len(extra), 50):
            await asyncio.gather(*(play(stub, m, 10, None) for m in extra[batch : batch + 50]))
        after = rss_mib(service.pid)
        per_match = (after - before) * 1024 / len(extra)
        print(
            f"memory: {after:.1f} MiB with {MEMORY_MATCHES:,} live matches "
            f"(about {per_match:.0f} KiB per live match of 10 moves; "
            f"{int(1024 * 1024 / max(per_match, 0.001)):,} such matches per GiB)"
        )


async def run() -> None:
    engine_alone()
    await through_service()
