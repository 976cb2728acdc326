"""Presence is a lease (docs/match-runtime.md): gateways as real processes in front of a chess shard.

A seated player whose only stream is on a gateway that is SIGKILLed is logged disconnected as of that
gateway's last renewal, within a lease and a bounded delay, and forfeits at that instant + the forfeit
time; a seat streamed through two gateways stays connected while either holds it. Short renewals and
leases (300 ms, 1 s) and a 3 s forfeit keep the tests quick.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from skillclassics.chess.v1 import chess_pb2
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.match.model import EventKind, MatchEvent
from libs.match.store import MatchStore
from libs.persistence import Database
from libs.runtime import RunningServer
from libs.runtime.config import sqlite_url
from services.rules_chess.service import chess_rules_service
from tests.fullstack.helpers import MatchStream, connected, has_moves, is_final
from tests.services.gateway.test_gateway_service import KEY, bearer, publish_jwks
from tests.support import ServiceProcess, backend_channel, start_in_process

RENEW_MS = 300
LEASE_MS = 1_000
FORFEIT_MS = 3_000
SLACK_MS = 1_500
"""What a loaded 2-core machine may add to the detection of an expired lease (the shard checks at the
expiry instant; the bound in production is a lease + a few ms)."""


@dataclass
class Stack:
    rules: RunningServer
    database_url: str
    matchmaking: rules_pb2_grpc.RulesServiceStub
    gateways: list[ServiceProcess]


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    url = sqlite_url(tmp_path / "rules-chess.db")
    rules = await start_in_process("rules-chess", chess_rules_service, url)
    env = {
        "DATA_DIR": str(tmp_path),
        "GATEWAY_JWKS_FILE": str(publish_jwks(tmp_path / "jwks.json", KEY)),
        "RULES_CHESS_ADDRESSES": rules.address,
        "GATEWAY_PRESENCE_RENEW_MS": str(RENEW_MS),
        "GATEWAY_PRESENCE_LEASE_MS": str(LEASE_MS),
        "LOG_FORMAT": "json",
    }
    gateways = [ServiceProcess("services.gateway", env), ServiceProcess("services.gateway", env)]
    try:
        for gateway in gateways:
            await gateway.start()
        async with backend_channel(rules.address, "matchmaking") as channel:
            yield Stack(rules, url, rules_pb2_grpc.RulesServiceStub(channel), gateways)
    finally:
        for gateway in gateways:
            if gateway.process is not None and gateway.process.poll() is None:
                gateway.kill()
        await rules.stop(grace=0.5)


async def _create(stack: Stack) -> str:
    match_id = f"chess.0.{uuid.uuid4().hex[:12]}"
    await stack.matchmaking.CreateMatch(
        rules_pb2.CreateMatchRequest(
            match_id=match_id,
            seats=[
                rules_pb2.SeatAssignment(seat=0, player_id="alice"),
                rules_pb2.SeatAssignment(seat=1, player_id="bob"),
            ],
            options=rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions(ruleset=chess_pb2.RULESET_CONTEST)),
            time_control=rules_pb2.TimeControl(base_ms=10 * 60_000),
            idempotency_key=f"create-{match_id}",
            disconnect_forfeit_ms=FORFEIT_MS,
        )
    )
    return match_id


def _watch(channel: grpc.aio.Channel, player: str, match_id: str) -> MatchStream:
    stub = gateway_pb2_grpc.GatewayServiceStub(channel)
    return MatchStream(stub.WatchMatch(pb.WatchMatchRequest(match_id=match_id), metadata=bearer(player)))


async def _move(channel: grpc.aio.Channel, player: str, match_id: str, san: str) -> None:
    await gateway_pb2_grpc.GatewayServiceStub(channel).SubmitAction(
        pb.SubmitActionRequest(
            match_id=match_id,
            idempotency_key=uuid.uuid4().hex,
            action=rules_pb2.Action(chess=chess_pb2.ChessAction(move=san)),
        ),
        metadata=bearer(player),
    )


async def _log(stack: Stack, match_id: str) -> list[MatchEvent]:
    db = Database(stack.database_url)
    store = MatchStore(db, "chess", "0")
    try:
        return await store.load_log(match_id)
    finally:
        await store.close()
        await db.dispose()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def test_a_seat_whose_only_gateway_is_killed_is_disconnected_and_forfeits(stack: Stack) -> None:
    match_id = await _create(stack)
    a, b = stack.gateways
    async with grpc.aio.insecure_channel(a.address) as on_a, grpc.aio.insecure_channel(b.address) as on_b:
        alice = _watch(on_a, "alice", match_id)  # Alice's only stream: on gateway A
        bob = _watch(on_b, "bob", match_id)
        await bob.until(connected(0, 1))
        await _move(on_b, "alice", match_id, "e4")
        await _move(on_b, "bob", match_id, "e5")
        await bob.until(has_moves("e4", "e5"))  # live: the forfeit rule applies

        killed_at = _now_ms()
        a.kill()  # SIGKILL: gateway A reports nothing more
        gone = (await bob.until(connected(1), within=(LEASE_MS + SLACK_MS) / 1000 + 5))[-1]
        final = (await bob.to_the_end(within=FORFEIT_MS / 1000 + 10))[-1]
        await alice.cancel()
        await bob.cancel()

    log = await _log(stack, match_id)
    [disconnection] = [e for e in log if e.kind is EventKind.PRESENCE and not e.payload["connected"]]
    assert (disconnection.seat, disconnection.sequence) == (0, gone.sequence)
    since = disconnection.payload["since_ms"]
    # Disconnected as of A's last renewal (within a renewal interval before the kill)...
    assert killed_at - RENEW_MS - SLACK_MS <= since <= killed_at + 50
    # ...noticed within a lease and a bounded delay after it...
    assert since + LEASE_MS <= disconnection.at_ms <= since + LEASE_MS + SLACK_MS
    # ...and the forfeit at that instant + the forfeit time (not at the flag, minutes later).
    assert (final.result.termination, final.result.winner) == (rules_pb2.TERMINATION_DISCONNECT_FORFEIT, 1)
    # (counted from the first move if the last renewal came before it: play had not begun)
    first_move = next(e for e in log if e.kind is EventKind.ACTION)
    assert final.result.ended_at_ms == max(since, first_move.at_ms) + FORFEIT_MS
    assert log[-1].kind is EventKind.END


async def test_a_seat_connected_through_two_gateways_stays_connected_when_one_closes(stack: Stack) -> None:
    match_id = await _create(stack)
    a, b = stack.gateways
    async with grpc.aio.insecure_channel(a.address) as on_a, grpc.aio.insecure_channel(b.address) as on_b:
        alice_a = _watch(on_a, "alice", match_id)
        alice_b = _watch(on_b, "alice", match_id)
        bob = _watch(on_b, "bob", match_id)
        await bob.until(connected(0, 1))
        await alice_a.until(connected(0, 1))
        await alice_b.until(connected(0, 1))
        await _move(on_b, "alice", match_id, "e4")
        await _move(on_b, "bob", match_id, "e5")
        await bob.until(has_moves("e4", "e5"))

        await alice_a.cancel()  # her stream on A closes; the one on B stays open
        await _sleep_ms(2 * LEASE_MS + RENEW_MS)  # past any lease A held
        quiet = [message.update for message in bob.received()]
        assert all(list(u.connected_seats) == [0, 1] for u in quiet), [u.connected_seats for u in quiet]
        log = await _log(stack, match_id)
        assert [e for e in log if e.kind is EventKind.PRESENCE and not e.payload["connected"]] == []

        closed_at = _now_ms()
        await alice_b.cancel()  # her last stream: released at once, not after a lease
        gone = (await bob.until(connected(1), within=LEASE_MS / 1000))[-1]
        assert not is_final(gone)
        await bob.cancel()

    log = await _log(stack, match_id)
    gone_events = [e for e in log if e.kind is EventKind.PRESENCE and not e.payload["connected"]]
    [disconnection] = [e for e in gone_events if e.seat == 0]  # (Bob's own close may follow)
    assert closed_at - 50 <= disconnection.payload["since_ms"] <= disconnection.at_ms < closed_at + LEASE_MS


async def _sleep_ms(ms: int) -> None:
    await asyncio.sleep(ms / 1000)
