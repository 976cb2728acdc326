"""A scaled-out stack on PostgreSQL, every process its own (``make run`` with ``SHARDS=2 GATEWAYS=2``):
two shards of rules-chess and of rules-gin, two gateways. Matchmaking places matches on both shards of
each family; two players on different gateways play each other while a spectator watches on a third
connection; one rules-chess shard is killed with SIGKILL and restarted as the same shard while the other
shard's match plays on without noticing; then a gateway is killed and the players who were on it go on
through the other gateway from their last sequence, with no gap and no repeat. Placement skips the dead
shard while it is down, and a third chess shard started meanwhile (appended to the shards file, nothing
restarted) takes the next matches. Matchmaking runs as two replicas, and the gateways spread lobby calls
over both; the pairing leader is killed with SIGKILL and the other one pairs the next quick-match players
within the lease, while tables are made and joined through the same gateways.

Each client's channel lists both gateways, its own first (gRPC's ``pick_first``: the first that answers),
as a client behind a DNS name with several addresses does: when its gateway goes away, its streams
break with ``UNAVAILABLE``, the clients reopen them from their last sequence and the channel connects to
the other gateway.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm
from skillclassics.rules.v1 import rules_pb2
from sqlalchemy import select
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from clients.bot import GameResult, play_match
from clients.families import family
from clients.player import MatchStream, PlayerSession
from libs.launcher import Stack, available_services, scale_out
from libs.match.ids import MatchId
from libs.persistence.schema import match_events, mm_leases
from libs.runtime.config import sqlite_url
from services.gateway.tokens import mint_token, token_key
from services.matchmaking.matchmaker import PAIRING_LEASE
from tests.conftest import create_postgres_database, drop_postgres_database
from tests.fullstack.helpers import OUTAGE_TOLERANT, played_match
from tests.fullstack.stack import stack_env, start_stack

pytestmark = [pytest.mark.postgres, pytest.mark.long, pytest.mark.timeout(480)]

SERVICES = ("fairness", "clock", "rules-chess", "rules-gin", "matchmaking", "gateway")
MOVE_DELAY_S = 0.1
"""The bots' pace: the matches are still being played when the faults come."""
LEASE_MS = 2_000
"""Matchmaking's pairing lease: a dead leader's is taken over once it has run out."""


@dataclass
class Scaled:
    stack: Stack
    database_url: str
    gateways: list[str]
    killed: set[str] = field(default_factory=lambda: {"gateway-1"})
    """The processes killed on purpose and left down."""

    def database(self, service: str) -> str:
        return self.database_url or sqlite_url(self.stack.data_dir / f"{service}.db")


@pytest_asyncio.fixture(loop_scope="session")
async def scaled(tmp_path: Path) -> AsyncIterator[Scaled]:
    name, database_url = await create_postgres_database("sc_scale_out")
    specs = scale_out(
        [spec for spec in available_services() if spec.name in SERVICES],
        shards={"chess": 2, "gin": 2},
        gateways=2,
        matchmakers=2,
    )
    env = stack_env(
        database_url,
        # Placement sees a shard die or appear within a fraction of a second (defaults: 1 s and 2 s).
        RULES_PLACEMENT_PROBE_MS="300",
        RULES_SHARDS_REFRESH_MS="300",
        MATCHMAKING_LEASE_MS=str(LEASE_MS),
    )
    try:
        stack = await start_stack(env, str(tmp_path), specs)
        scaled = Scaled(stack, database_url, [stack.address("gateway"), stack.address("gateway-1")])
        try:
            yield scaled
        finally:
            exits = await stack.stop()
        assert all(code == 0 for name, code in exits.items() if name not in scaled.killed), exits
    finally:
        await drop_postgres_database(name)


@dataclass
class Client:
    """A player's (or a spectator's) session on a channel that prefers one gateway."""

    player_id: str
    session: PlayerSession
    channel: grpc.aio.Channel
    streams: list[MatchStream] = field(default_factory=list)

    @property
    def reconnects(self) -> int:
        return sum(stream.reconnects for stream in self.streams)


class TrackedSession(PlayerSession):
    """A session that keeps the match streams it opens (to count their reconnections)."""

    opened: list[MatchStream]

    def watch_match(self, match_id: str, *, spectator: bool = False, from_sequence: int = 0) -> MatchStream:
        stream = super().watch_match(match_id, spectator=spectator, from_sequence=from_sequence)
        self.opened.append(stream)
        return stream


async def client(scaled: Scaled, name: str, prefer: int) -> Client:
    """A new player whose channel tries gateway ``prefer`` first, then the other."""
    player_id = f"{name}-{random.getrandbits(40):010x}"
    key = token_key({}, scaled.stack.data_dir, production=False, create=False)
    token = mint_token(key, player_id, 3600, int(time.time()))
    order = [scaled.gateways[prefer], scaled.gateways[1 - prefer]]
    channel = grpc.aio.insecure_channel("ipv4:" + ",".join(order))
    session = TrackedSession(order[0], token, retry=OUTAGE_TOLERANT, channel=channel)
    session.opened = []
    return Client(player_id, session, channel, session.opened)


async def new_match(scaled: Scaled, game: str, host: Client, guest: Client) -> str:
    fam = family(game)
    table = await host.session.create_table(
        game,
        options=fam.options({}),
        time_control=fam.time_control(5),
        visibility=mm.VISIBILITY_PRIVATE,
    )
    return (await guest.session.join_table(table.table_id)).match_id


def contiguous(sequences: list[int]) -> bool:
    return sequences == list(range(sequences[0], sequences[0] + len(sequences)))


async def test_matches_spread_over_shards_and_survive_a_shard_kill_and_a_gateway_kill(scaled: Scaled) -> None:
    stack = scaled.stack
    clients: list[Client] = []

    async def pair(game: str, prefer: tuple[int, int]) -> tuple[str, Client, Client]:
        host, guest = await client(scaled, "host", prefer[0]), await client(scaled, "guest", prefer[1])
        clients.extend((host, guest))
        return await new_match(scaled, game, host, guest), host, guest

    try:
        # Matchmaking places matches on both shards of each family (the match id names the shard).
        # The players of the two chess matches to play: one on each gateway (X), both on gateway 0 (Y).
        by_shard: dict[tuple[str, int], tuple[str, Client, Client]] = {}
        for game, prefer in (("chess", (0, 1)), ("gin", (0, 0))):
            for _ in range(16):
                made = await pair(game, prefer)
                by_shard.setdefault((game, MatchId.parse(made[0]).shard), made)
                if (game, 0) in by_shard and (game, 1) in by_shard:
                    break
            assert {shard for (g, shard) in by_shard if g == game} == {0, 1}, by_shard
        killed_shard = 1
        x_id, ann, ben = by_shard[("chess", killed_shard)]  # ann on gateway 0, ben on gateway 1
        y_host, y_guest = await client(scaled, "cid", 0), await client(scaled, "dan", 0)
        clients.extend((y_host, y_guest))
        y_id = await new_match(scaled, "chess", y_host, y_guest)
        while MatchId.parse(y_id).shard == killed_shard:  # Y: a chess match on the other shard
            y_host, y_guest = await client(scaled, "cid", 0), await client(scaled, "dan", 0)
            clients.extend((y_host, y_guest))
            y_id = await new_match(scaled, "chess", y_host, y_guest)
        spectator = await client(scaled, "eve", 1)  # a third connection, on gateway 1 first
        clients.append(spectator)

        fam = family("chess")
        seen: dict[str, list[int]] = {}
        stamps: dict[str, list[float]] = {}
        x_moves = asyncio.Event()
        moved = {"x": 0}

        def watcher(label: str) -> Callable[[rules_pb2.MatchUpdate], None]:
            seen[label], stamps[label] = [], []

            def on_update(update: rules_pb2.MatchUpdate) -> None:
                seen[label].append(update.sequence)
                stamps[label].append(time.monotonic())
                if label == "ann" and update.event.kind == "action":
                    moved["x"] += 1
                    x_moves.set()

            return on_update

        def bot(c: Client, match_id: str, label: str, index: int) -> asyncio.Task[GameResult]:
            return asyncio.create_task(
                play_match(
                    c.session,
                    match_id,
                    fam.strategy("random", random.Random(index)),
                    fam,
                    max_plies=160,
                    move_delay_s=MOVE_DELAY_S,
                    stall_s=60,
                    on_update=watcher(label),
                )
            )

        async def spectate() -> list[int]:
            sequences = seen["eve"] = []
            stream = spectator.session.watch_match(x_id, spectator=True)
            async for update in stream:
                sequences.append(update.sequence)
            return sequences

        games = [bot(ann, x_id, "ann", 1), bot(ben, x_id, "ben", 2)]
        others = [bot(y_host, y_id, "cid", 3), bot(y_guest, y_id, "dan", 4)]
        watching = asyncio.create_task(spectate())

        async def until_x_moved(count: int, within: float = 60) -> None:
            async with asyncio.timeout(within):
                while moved["x"] < count:
                    x_moves.clear()
                    await x_moves.wait()

        # 1. rules-chess shard 1 is killed with SIGKILL and restarted as shard 1; shard 0's match plays on.
        await until_x_moved(10)
        victim = f"rules-chess-{killed_shard}"
        assert await stack.kill(victim) == -signal.SIGKILL
        at_crash = seen["ann"][-1]
        down_at = time.monotonic()
        y_before = len(seen["cid"])
        await asyncio.sleep(2.0)  # shard 1 is down meanwhile
        assert len(seen["cid"]) > y_before, "the other shard's match stopped while shard 1 was down"
        # Placement skips the dead shard: every new chess match goes to the live one meanwhile.
        made_while_down = [(await pair("chess", (0, 0)))[0] for _ in range(3)]
        assert {MatchId.parse(m).shard for m in made_while_down} == {1 - killed_shard}, made_while_down
        await stack.restart(victim)
        assert stack.environment(victim)["RULES_SHARD"] == str(killed_shard)
        await until_x_moved(moved["x"] + 6)
        assert time.monotonic() - down_at < 60
        assert seen["ann"][-1] > at_crash
        # The other shard's match never noticed: its streams never broke, updates kept coming.
        assert y_host.reconnects == y_guest.reconnects == 0
        gaps = [b - a for a, b in zip(stamps["cid"], stamps["cid"][1:], strict=False) if a >= down_at - 1]
        assert gaps, "no update of the other shard's match during the outage"
        assert max(gaps) < 3.0, gaps  # a bot moves every 0.1 s: no stall of the other shard

        # 2. Gateway 1 is killed (and left down): ben and the spectator go on through gateway 0.
        ben_before, eve_before = ben.reconnects, spectator.reconnects
        assert await stack.kill("gateway-1") == -signal.SIGKILL
        at_gateway_loss = seen["ben"][-1]
        await until_x_moved(moved["x"] + 6)
        assert seen["ben"][-1] > at_gateway_loss
        assert ben.reconnects > ben_before  # ben was on gateway 1
        assert spectator.reconnects > eve_before

        async with asyncio.timeout(300):
            results = await asyncio.gather(*games)
            other_results = await asyncio.gather(*others)
            spectated = await watching

        # Every update once, in order, for both players and the spectator, across both faults.
        assert results[0].result == results[1].result
        assert other_results[0].result == other_results[1].result
        for label in ("ann", "ben", "cid", "dan"):
            assert contiguous(seen[label]), (label, seen[label])
        assert contiguous(spectated), spectated
        assert spectated[-1] == seen["ann"][-1] == seen["ben"][-1]
        # Gateway 0's players (and Y's) never lost their gateway: only the shard's restart touched X.
        assert y_host.reconnects == y_guest.reconnects == 0

        # The durable log of X holds every sequence once, the acknowledged ones before the crash included.
        rows = await scaled_rows(scaled, x_id)
        assert rows == list(range(1, len(rows) + 1))
        assert rows[-1] == seen["ann"][-1]
        assert at_crash in rows
        # Matchmaking recorded the one result for both players of each match.
        for c, match_id, result in ((ann, x_id, results[0]), (y_host, y_id, other_results[0])):
            played = await played_match(c.session, "chess", match_id)
            assert (played.result.termination, played.result.winner) == (
                result.result.termination,
                result.result.winner,
            )

        # 3. A third chess shard, started while everything runs and appended to the shards file, takes the
        # next matches (the least loaded), and the gateway routes to it: nothing else was restarted.
        pids = {spec.name: stack.pid(spec.name) for spec in stack.services if stack.pid(spec.name)}
        assert await stack.add_replica("rules-chess") == "rules-chess-2"
        on_new_shard = ""
        for _ in range(10):
            match_id, host, guest = await pair("chess", (0, 0))
            if MatchId.parse(match_id).shard == 2:
                on_new_shard = match_id
                break
            await asyncio.sleep(0.3)
        assert on_new_shard, "no match was placed on the added shard"
        await host.session.resign(on_new_shard)  # through gateway 0, to shard 2
        ended = (await guest.session.get_match(on_new_shard)).update
        assert ended.result.termination != rules_pb2.TERMINATION_UNSPECIFIED  # resigned (or aborted)
        assert {name: stack.pid(name) for name in pids} == pids

        # 4. Matchmaking's two replicas: the gateways sent lobby calls to both. The pairing leader is
        # killed with SIGKILL; two players queue through the gateways, the other replica takes the lease
        # and pairs them within it, and a table is made and joined as before.
        served = [await lobby_calls(stack, name) for name in ("matchmaking", "matchmaking-1")]
        assert all(calls > 0 for calls in served), served  # (about 30 tables made and joined so far)
        leader = await pairing_leader(scaled)
        q1, q2 = await client(scaled, "quick", 0), await client(scaled, "match", 1)
        clients.extend((q1, q2))
        async with q1.session.lobby() as lobby1, q2.session.lobby() as lobby2:
            assert await stack.kill(leader) == -signal.SIGKILL
            scaled.killed.add(leader)
            killed_at = time.monotonic()
            await asyncio.sleep(0.5)  # (a call already on its way to the dead replica fails UNAVAILABLE)
            for player in (q1, q2):
                await player.session.enter_queue(
                    "chess", options=fam.options({}), time_control=fam.time_control(5)
                )
            async with asyncio.timeout(LEASE_MS / 1000 + 10):
                ready = [await lobby1.match_ready(), await lobby2.match_ready()]
            paired_after_s = time.monotonic() - killed_at
        assert ready[0].match_id == ready[1].match_id
        assert {ready[0].opponent_id, ready[1].opponent_id} == {q1.player_id, q2.player_id}
        assert paired_after_s < LEASE_MS / 1000 + 5, paired_after_s
        assert await pairing_leader(scaled) != leader
        await q1.session.resign(ready[0].match_id)
        host, guest = await client(scaled, "late-host", 0), await client(scaled, "late-guest", 1)
        clients.extend((host, guest))
        late = await new_match(scaled, "chess", host, guest)  # tables: the surviving replica alone
        assert (await guest.session.get_match(late, wait_s=10)).update.match_id == late
        for player in (q1, q2):  # each paired once: one quick-match row each
            quick = [m for m in await player.session.match_history("chess") if not m.table_id]
            assert [m.match_id for m in quick] == [ready[0].match_id]
    finally:
        for c in clients:
            for stream in c.streams:
                stream.close()
            await c.session.close()
            await c.channel.close()


async def lobby_calls(stack: Stack, name: str) -> float:
    """How many CreateTable and JoinTable calls matchmaking replica ``name`` has answered (its metrics)."""

    def scrape() -> str:
        with urllib.request.urlopen(stack.metrics_url(name), timeout=5) as reply:
            return str(reply.read().decode())

    calls = 0.0
    for metric in text_string_to_metric_families(await asyncio.to_thread(scrape)):
        for sample in metric.samples:
            if sample.name == "grpc_server_handled_total" and sample.labels.get("grpc_method") in (
                "CreateTable",
                "JoinTable",
            ):
                calls += sample.value
    return calls


async def pairing_leader(scaled: Scaled) -> str:
    """The matchmaking replica holding the pairing lease now (its holder names the process id)."""
    engine = create_async_engine(scaled.database_url, poolclass=NullPool)
    try:
        async with asyncio.timeout(20):
            while True:
                async with engine.connect() as conn:
                    row = (
                        await conn.execute(select(mm_leases).where(mm_leases.c.name == PAIRING_LEASE))
                    ).first()
                if row is not None and row.expires_at_ms > time.time() * 1000:
                    pid = int(row.holder.split("/")[1])
                    for spec in scaled.stack.replicas("matchmaking"):
                        if scaled.stack.pid(spec.name) == pid:
                            return spec.name
                await asyncio.sleep(0.1)
    finally:
        await engine.dispose()


async def scaled_rows(scaled: Scaled, match_id: str) -> list[int]:
    engine = create_async_engine(scaled.database("rules-chess"), poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            result = await conn.execute(
                select(match_events.c.sequence).where(match_events.c.match_id == match_id)
            )
            return sorted(row.sequence for row in result)
    finally:
        await engine.dispose()
