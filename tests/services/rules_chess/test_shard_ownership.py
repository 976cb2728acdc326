"""No split brain (issue #17): a rules shard's ownership survives a database restart without two writers.

A PostgreSQL restart ends every session, and with them the session-level advisory lock each shard holds.
Before fencing, the first process went on serving on fresh connections while a second process of the same
shard took the free lock and served too: two writers of the same matches. Now each acquisition takes a
new epoch and every commit is conditional on it; the first process notices the loss within a heartbeat,
reports NOT_SERVING, takes the shard again when it can (rebuilding its matches from the log) and reports
SERVING; whichever process holds the shard is the only one whose writes are acknowledged. Shutting down
after a restart exits 0 (it exited 1: ``pg_advisory_unlock`` on a closed connection).

These run real processes against a private PostgreSQL server (tools/pgcluster.py) that they stop and
start, never the shared one; one test runs in this process on SQLite, where another owner is simulated
by moving the shard's epoch on in the database.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy import select, update

from libs.persistence import Database
from libs.persistence.schema import match_events, matches, shard_owners
from tests.callers import RULES_CALLERS, Callers
from tests.services.rules_chess.conftest import start_rules_chess
from tests.services.rules_chess.test_rules_chess_service import Stub, create, get, move, play
from tests.support import ROOT, ServiceProcess, backend_channel, health_of, wait_for_health
from tools.pgcluster import PrivatePostgres

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
OPERA_GAME = (
    *("e4", "e5", "Nf3", "d6", "d4", "Bg4", "dxe5", "Bxf3", "Qxf3", "dxe5"),
    *("Bc4", "Nf6", "Qb3", "Qe7", "Nc3", "c6", "Bg5", "b5", "Nxb5", "cxb5"),
)
"""Twenty plies of Morphy's Opera game: enough moves for the whole test, none of them a check."""
FAST_SHARD = {"SHARD_HEARTBEAT_MS": "100", "SHARD_RETRY_MS": "200"}


def launch(service: ServiceProcess, log: Path) -> None:
    """Start ``service``'s process without waiting for it to serve (it may refuse to start); its log goes
    to ``log``."""
    with log.open("ab") as sink:
        service.process = subprocess.Popen(
            [sys.executable, "-m", service.module], cwd=ROOT, env=service.env, stderr=sink
        )


async def serving_or_exited(service: ServiceProcess, within: float = 30.0) -> bool:
    """Wait until ``service`` reports SERVING (True) or its process exits (False)."""
    assert service.process is not None
    async with asyncio.timeout(within):
        while True:
            if service.process.poll() is not None:
                return False
            if await health_of(service.health_address) == SERVING:
                return True
            await asyncio.sleep(0.05)


@pytest.fixture
def rules_db(private_postgres: PrivatePostgres) -> str:
    return private_postgres.create_database("rules")


@dataclass
class Player:
    """Drives one process: creates matches and plays the shared game's next move, recording what it
    acknowledged (and, in ``order``, which process acknowledged each write, in the order of the calls)."""

    name: str
    service: ServiceProcess
    order: list[str]
    callers: Callers | None = None
    created: list[str] = field(default_factory=list)
    moves: list[tuple[int, str, str]] = field(default_factory=list)
    """(sequence, idempotency key, move) of every acknowledged move."""

    def stub(self) -> Stub:
        if self.callers is None:
            self.callers = Callers(self.service.address)
        return self.callers.stub(Stub, RULES_CALLERS)

    async def drive(self, match_id: str, game: list[str]) -> None:
        """One round: a new match, and the game's next move (the game is shared by both players)."""
        stub = self.stub()
        try:
            created = await asyncio.wait_for(create(stub, f"chess.0.{uuid.uuid4().hex[:12]}"), 2)
        except (grpc.aio.AioRpcError, TimeoutError):
            pass
        else:
            self.created.append(created)
            self.order.append(self.name)
        if not game:
            return
        key = uuid.uuid4().hex
        ply = len(OPERA_GAME) - len(game)
        try:
            reply = await asyncio.wait_for(stub.SubmitAction(move(match_id, ply % 2, game[0], key)), 2)
        except (grpc.aio.AioRpcError, TimeoutError):
            return
        self.moves.append((reply.sequence, key, game.pop(0)))
        self.order.append(self.name)


CASES = {
    # The first process notices the loss while the database is down and takes the shard back as soon as
    # it is up; the second one, started then, is refused.
    "first-takes-it-back": ({}, "first"),
    # The first process retries slowly: the second one takes the shard; the first stays fenced out.
    "second-takes-it": ({"SHARD_RETRY_MS": "20000"}, "second"),
    # The first process never notices by itself (no heartbeat within the test) and goes on serving on
    # fresh connections, as before the fix: only the epoch in each commit stops its writes.
    "first-never-notices": ({"SHARD_HEARTBEAT_MS": "600000"}, "second"),
}


@pytest.mark.postgres
@pytest.mark.parametrize("case", list(CASES))
async def test_after_a_database_restart_two_processes_of_one_shard_never_both_accept_writes(
    private_postgres: PrivatePostgres, rules_db: str, tmp_path: Path, case: str
) -> None:
    first_env, expected_owner = CASES[case]
    env = {"DATABASE_URL": rules_db}
    order: list[str] = []
    first = Player("first", ServiceProcess("services.rules_chess", {**env, **first_env}), order)
    second = Player("second", ServiceProcess("services.rules_chess", env), order)
    game = list(OPERA_GAME)
    try:
        await first.service.start()
        match_id = await create(first.stub())
        for _ in range(2):
            await first.drive(match_id, game)
        assert order == ["first"] * 4
        order.clear()

        await asyncio.to_thread(private_postgres.restart, 2.0)  # every session ends: every advisory lock
        if expected_owner == "first":  # (else a second process starting fast enough could win the race)
            await wait_for_health(first.service.health_address, SERVING, within=20)
        launch(second.service, tmp_path / "second.log")  # a second shard 0, on the same database
        loop = asyncio.get_running_loop()
        until = loop.time() + 5
        while loop.time() < until:
            for player in (first, second):
                await player.drive(match_id, game)
            await asyncio.sleep(0.1)
        second_serving = await serving_or_exited(second.service, within=5)

        # The shard changed hands at most once: once one process has acknowledged a write since the
        # restart, the other never acknowledges one again (before the fix both went on taking writes).
        switches = sum(1 for a, b in itertools.pairwise(order) if a != b)
        assert switches <= 1, order
        # Exactly one of them holds the shard at the end; the other is fenced out or was refused.
        first_health = await health_of(first.service.health_address)
        if expected_owner == "second":
            assert second_serving
            # Fenced out, waiting for the shard (where it never heartbeats, a commit found the newer epoch).
            assert first_health == NOT_SERVING
            winner = second
        else:
            assert first_health == SERVING  # took the shard again; the second one was refused
            assert not second_serving
            assert second.service.process is not None
            assert second.service.process.returncode == 1
            assert "another process owns rules-chess/0" in (tmp_path / "second.log").read_text()
            winner = first
        assert order, "nobody took writes after the restart"
        assert order[-1] == winner.name

        # Every acknowledged write is in the log, exactly once, where it was acknowledged.
        db = Database(rules_db)
        try:
            async with db.connect() as conn:
                stored = set((await conn.execute(select(matches.c.match_id))).scalars())
                events = (
                    await conn.execute(
                        select(match_events.c.sequence, match_events.c.idempotency_key)
                        .where(match_events.c.match_id == match_id, match_events.c.kind == "action")
                        .order_by(match_events.c.sequence)
                    )
                ).all()
                epoch = (await conn.execute(select(shard_owners.c.epoch))).scalar_one()
        finally:
            await db.dispose()
        created = first.created + second.created
        assert len(created) == len(set(created))
        assert set(created) <= stored
        acknowledged = sorted(first.moves + second.moves)
        assert [(sequence, key) for sequence, key, _ in acknowledged] == [tuple(row) for row in events]
        assert epoch >= 2  # taken again after the restart, by one of them
        update = await get(winner.stub(), match_id)
        assert list(update.view.chess.moves_san) == [m for _, _, m in acknowledged]
    finally:
        for player in (first, second):
            if player.callers is not None:
                await player.callers.close()
            if player.service.process is not None and player.service.process.poll() is None:
                player.service.kill(signal.SIGTERM)


@pytest.mark.postgres
async def test_a_process_that_lost_its_lock_reports_not_serving_then_serves_again_from_the_log(
    private_postgres: PrivatePostgres, rules_db: str
) -> None:
    service = ServiceProcess("services.rules_chess", {"DATABASE_URL": rules_db})
    async with service:
        async with Callers(service.address) as callers:
            stub = callers.stub(Stub, RULES_CALLERS)
            match_id = await create(stub)
            await play(stub, match_id, "e4", "e5")
            await asyncio.to_thread(private_postgres.stop, "fast")
            try:
                # Within a few heartbeats the lock's session is found gone: NOT_SERVING, writes refused.
                await wait_for_health(service.health_address, NOT_SERVING, within=5)
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.SubmitAction(move(match_id, 0, "Nf3"))
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
                await asyncio.sleep(1.0)
                assert await health_of(service.health_address) == NOT_SERVING  # still: no database
            finally:
                await asyncio.to_thread(private_postgres.start)
            await wait_for_health(service.health_address, SERVING, within=20)
            # The matches were read again from the log: play goes on where it was acknowledged.
            reply = await stub.SubmitAction(move(match_id, 0, "Nf3"))
            assert reply.sequence >= 4  # (a "resumed" event may come first: downtime charged to nobody)
            assert list(reply.update.view.chess.moves_san) == ["e4", "e5", "Nf3"]
            await create(stub)
        assert service.kill(signal.SIGTERM) == 0


@pytest.mark.postgres
async def test_sigterm_after_a_database_restart_exits_0(
    private_postgres: PrivatePostgres, rules_db: str
) -> None:
    # Right after the database came back (the process may be taking its shard again just then).
    service = ServiceProcess("services.rules_chess", {"DATABASE_URL": rules_db, **FAST_SHARD})
    await service.start()
    await asyncio.to_thread(private_postgres.restart, 2.0)
    assert service.kill(signal.SIGTERM) == 0
    # Once it serves again after the restart.
    await service.start()
    await asyncio.to_thread(private_postgres.restart, 2.0)
    await wait_for_health(service.health_address, SERVING, within=20)
    assert service.kill(signal.SIGTERM) == 0
    # And while the database is still down.
    await service.start()
    await asyncio.to_thread(private_postgres.stop, "fast")
    try:
        await wait_for_health(service.health_address, NOT_SERVING, within=5)
        assert service.kill(signal.SIGTERM) == 0
    finally:
        await asyncio.to_thread(private_postgres.start)


async def test_a_shard_whose_epoch_moved_on_refuses_writes_and_serves_again_once_it_holds_it(
    tmp_path: Path,
) -> None:
    """SQLite: the flock cannot be lost, but the epoch is checked all the same. Another owner is simulated
    by moving the epoch on; the next write is refused, the service reports NOT_SERVING, takes the shard
    again (a new epoch) and serves the match as the log has it."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'rules.db'}"
    # The heartbeat is long so that the write, not a renewal, is what finds the epoch moved on (a fenced
    # write marks the shard lost itself; with a 50 ms heartbeat the renewal sometimes found it first and
    # the write was refused by the closed runtime instead, with another reason).
    running = await start_rules_chess(url, {"SHARD_HEARTBEAT_MS": "60000", "SHARD_RETRY_MS": "1000"})
    db = Database(url)
    try:
        async with Callers(running.address) as callers, backend_channel(running.address) as channel:
            stub = callers.stub(Stub, RULES_CALLERS)
            health = health_pb2_grpc.HealthStub(channel)
            match_id = await create(stub)
            await play(stub, match_id, "e4")
            async with db.begin() as conn:
                await conn.execute(update(shard_owners).values(epoch=shard_owners.c.epoch + 1))
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.SubmitAction(move(match_id, 1, "e5"))
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "shard rules-chess/0 lost its ownership; retry" in (refused.value.details() or "")
            reply = await health.Check(health_pb2.HealthCheckRequest())
            assert reply.status == NOT_SERVING
            async with asyncio.timeout(10):
                while True:
                    if (await health.Check(health_pb2.HealthCheckRequest())).status == SERVING:
                        break
                    await asyncio.sleep(0.05)
            update_ = await get(stub, match_id)
            assert list(update_.view.chess.moves_san) == ["e4"]
            reply_ = await stub.SubmitAction(move(match_id, 1, "e5"))
            assert list(reply_.update.view.chess.moves_san) == ["e4", "e5"]
            async with db.connect() as conn:
                epoch = (await conn.execute(select(shard_owners.c.epoch))).scalar_one()
            assert epoch == 3  # 1 at start, 2 "another owner", 3 taken again
    finally:
        await db.dispose()
        await running.stop(grace=0.5)
