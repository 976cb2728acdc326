"""End-to-end figures through the gateway: 100 chess games at once between signed-in players, every
service its own process (the stack ``make run`` starts), and the time from a player's ``SubmitAction``
call to the opponent's ``WatchMatch`` stream receiving that move; also actions per second.

Every game is made as players make one (a table opened and joined through the gateway); each player
watches the match as their seat and moves when their own stream says it is their turn, picking
uniformly among the legal moves with a per-game seeded generator (the games are the same on every
run). Five games are first played one after another (the latency without queueing), then 100 at once;
the CPU time each process spent per action during the 100 games says where the time goes.
``BENCH_DATABASE_URL`` runs the stack on that database instead of SQLite files (the database server's
own CPU is then not counted).
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from skillclassics.chess.v1 import chess_pb2
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm_pb
from skillclassics.rules.v1 import rules_pb2

from benchmarks.support import percentile, stack_env
from clients.load.procstat import read_sample
from libs.launcher import Stack, find_free_port_offset
from libs.runtime import eventloop
from services.gateway.tokens import SigningKey, mint_token, write_development_key

GAMES = 100
ONE_AT_A_TIME = 5
"""Games played one after another first, for the latency without queueing."""
MOVES_PER_GAME = 40
TABLES_AT_ONCE = 25
SEED = 6
KEY = SigningKey.generate()
"""The stack's development token key (written into its data folder before it starts)."""
MINUTE = 60_000
Metadata = tuple[tuple[str, str], ...]


class Watcher:
    """One seat's ``WatchMatch`` stream: when each update arrived, and the latest one."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.latest: rules_pb2.MatchUpdate | None = None
        self._arrived: dict[int, float] = {}
        self._waiting: dict[int, asyncio.Future[float]] = {}
        self._changed = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._pump())

    async def _pump(self) -> None:
        async for message in self.call:
            arrived = time.perf_counter()
            update: rules_pb2.MatchUpdate = message.update
            self._arrived[update.sequence] = arrived
            self.latest = update
            waiter = self._waiting.pop(update.sequence, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(arrived)
            self._changed.set()

    async def arrival(self, sequence: int) -> float:
        """When the update ``sequence`` arrived (waiting for it if it has not yet)."""
        if sequence in self._arrived:
            return self._arrived[sequence]
        waiter = self._waiting.setdefault(sequence, asyncio.get_running_loop().create_future())
        return await asyncio.wait_for(waiter, 30)

    async def until(self, done: Any) -> rules_pb2.MatchUpdate:
        """Wait until the latest update satisfies ``done``."""
        async with asyncio.timeout(30):
            while self.latest is None or not done(self.latest):
                self._changed.clear()
                await self._changed.wait()
        return self.latest

    async def close(self) -> None:
        self.call.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


@dataclass
class Game:
    index: int
    match_id: str
    players: tuple[Metadata, Metadata]
    watchers: list[Watcher] = field(default_factory=list)


def bearer(player: str) -> Metadata:
    return (("authorization", f"Bearer {mint_token(KEY, player, 3600, int(time.time()))}"),)


async def make_game(gw: gateway_pb2_grpc.GatewayServiceStub, index: int, run: str) -> Game:
    white, black = bearer(f"w{index}-{run}"), bearer(f"b{index}-{run}")
    table = await gw.CreateTable(
        pb.CreateTableRequest(
            family="chess",
            options=rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions(ruleset=chess_pb2.RULESET_CONTEST)),
            time_control=rules_pb2.TimeControl(base_ms=30 * MINUTE),
            entry_fee_minor=100,
            currency="USD",
            visibility=mm_pb.VISIBILITY_PUBLIC,
            idempotency_key="t",
        ),
        metadata=white,
    )
    joined = await gw.JoinTable(pb.JoinTableRequest(table_id=table.table.table_id), metadata=black)
    return Game(index, joined.table.match_id, (white, black))


async def play(
    gw: gateway_pb2_grpc.GatewayServiceStub, game: Game, seen: list[float], answered: list[float]
) -> int:
    """Play the game's moves; ``seen``: SubmitAction start to the opponent's stream, ``answered``: to the
    answer (seconds). Returns how many actions were played."""
    rng = random.Random(SEED * 1_000_003 + game.index)
    update = await game.watchers[0].until(lambda u: list(u.connected_seats) == [0, 1])
    for ply in range(MOVES_PER_GAME):
        if update.result.termination:
            return ply
        seat = ply % 2
        legal = sorted(m.uci for m in update.view.chess.legal_moves)
        request = pb.SubmitActionRequest(
            match_id=game.match_id,
            idempotency_key=f"m{ply}",
            action=rules_pb2.Action(chess=chess_pb2.ChessAction(move=rng.choice(legal))),
        )
        started = time.perf_counter()
        reply = await gw.SubmitAction(request, metadata=game.players[seat])
        answered.append(time.perf_counter() - started)
        opponent = game.watchers[1 - seat]
        seen.append(await opponent.arrival(reply.sequence) - started)
        # The opponent moves next, from what their own stream showed them.
        update = await opponent.until(lambda u, s=reply.sequence: u.sequence >= s)
    return MOVES_PER_GAME


def ms(values: list[float], fraction: float) -> str:
    return f"{percentile(sorted(values), fraction) * 1000:.1f} ms"


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (Linux; 0 once it is gone)."""
    sample = read_sample(pid)
    return sample.cpu_s if sample is not None else 0.0


def cpu_use(stack: Stack) -> dict[str, float]:
    """CPU seconds used so far by each running service and by this process (the client)."""
    used = {name: cpu_seconds(pid) for name in (s.name for s in stack.services) if (pid := stack.pid(name))}
    used["client"] = time.process_time()
    return used


async def run() -> None:
    env, backend = stack_env()  # the gateway trusts KEY, written below
    run_id = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory() as data_dir:
        write_development_key(Path(data_dir), KEY)
        stack = Stack(port_offset=find_free_port_offset(), data_dir=data_dir, echo=False, env=env)
        async with stack, grpc.aio.insecure_channel(stack.address("gateway")) as channel:
            gw = gateway_pb2_grpc.GatewayServiceStub(channel)
            started = time.perf_counter()
            games: list[Game] = []
            total = ONE_AT_A_TIME + GAMES
            for batch in range(0, total, TABLES_AT_ONCE):
                games += await asyncio.gather(
                    *(make_game(gw, i, run_id) for i in range(batch, min(batch + TABLES_AT_ONCE, total)))
                )
            made = time.perf_counter() - started
            for game in games:
                for player in game.players:
                    request = pb.WatchMatchRequest(match_id=game.match_id)
                    game.watchers.append(Watcher(gw.WatchMatch(request, metadata=player)))

            alone_seen: list[float] = []
            alone_answered: list[float] = []
            for game in games[:ONE_AT_A_TIME]:
                await play(gw, game, alone_seen, alone_answered)

            seen: list[float] = []
            answered: list[float] = []
            before = cpu_use(stack)
            started = time.perf_counter()
            played = await asyncio.gather(*(play(gw, game, seen, answered) for game in games[ONE_AT_A_TIME:]))
            elapsed = time.perf_counter() - started
            after = cpu_use(stack)
            for game in games:
                for watcher in game.watchers:
                    await watcher.close()
    actions = sum(played)
    print(
        f"{total} tables opened and joined through the gateway ({TABLES_AT_ONCE} at a time): "
        f"{made:.1f} s ({total / made:.0f} matches made/s)"
    )
    print(
        f"one game at a time ({backend}, {ONE_AT_A_TIME} games of {MOVES_PER_GAME} moves, every service "
        f"its own process): SubmitAction to the opponent's stream p50 {ms(alone_seen, 0.5)}, "
        f"p99 {ms(alone_seen, 0.99)}; SubmitAction answered p50 {ms(alone_answered, 0.5)}, "
        f"p99 {ms(alone_answered, 0.99)}"
    )
    print(
        f"{GAMES} games at once ({backend}, {MOVES_PER_GAME} moves each): "
        f"{actions / elapsed:,.0f} actions/s; "
        f"SubmitAction to the opponent's stream p50 {ms(seen, 0.5)}, p99 {ms(seen, 0.99)}; "
        f"SubmitAction answered p50 {ms(answered, 0.5)}, p99 {ms(answered, 0.99)}"
    )
    spent = {name: (after[name] - before.get(name, 0.0)) * 1000 / actions for name in after}
    busiest = sorted(spent.items(), key=lambda item: -item[1])
    print(
        "CPU per action at 100 games: "
        + ", ".join(f"{name} {value:.2f} ms" for name, value in busiest if value >= 0.01)
        + f" (2 cores: at most {2000 / max(sum(spent.values()), 0.001):,.0f} actions/s on this machine)"
    )


if __name__ == "__main__":
    eventloop.run(run())
