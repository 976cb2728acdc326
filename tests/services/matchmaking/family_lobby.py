"""What the per-family lobby table tests share (``test_<family>_tables.py``): one platform per module and
backend — matchmaking, the family's own rules shard and, for a family that uses chance, the fairness
service, wired as in production — and the steps every family's test takes on it.

A module's tests share its platform, so each test uses players of its own (:func:`players`) and a fee of
its own for quick match (the fee is part of the pool: nobody from another test is ever paired in)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.matchmaking.v1 import matchmaking_pb2_grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.runtime import RunningServer, ServiceConfig
from libs.runtime.config import sqlite_url
from services.matchmaking.families import STAND_IN_AFTER_MS, family_rules
from services.matchmaking.service import MatchmakingService
from services.rules_backgammon.service import backgammon_rules_service
from services.rules_chess.service import chess_rules_service
from services.rules_generals.service import generals_rules_service
from services.rules_gin.service import gin_rules_service
from services.rules_go.service import go_rules_service
from tests.conftest import BACKENDS, RecycledDatabases
from tests.services.matchmaking.test_matchmaking_service import next_event
from tests.support import backend_channel, free_port, refused, start_fairness, start_in_process

INVALID = grpc.StatusCode.INVALID_ARGUMENT
MINUTE = 60_000
RULES_SERVICES: Mapping[str, Callable[[ServiceConfig, Mapping[str, str]], Any]] = {
    "backgammon": backgammon_rules_service,
    "chess": chess_rules_service,
    "generals": generals_rules_service,
    "gin": gin_rules_service,
    "go": go_rules_service,
}
_fees = itertools.count(1_001)


@dataclass
class FamilyPlatform:
    family: str
    mm: matchmaking_pb2_grpc.MatchmakingServiceStub
    """Matchmaking, called as the gateway (the lobby's methods)."""
    rules: rules_pb2_grpc.RulesServiceStub
    """The family's rules shard 0, called as the gateway (players' actions, GetMatch)."""


@contextlib.asynccontextmanager
async def family_platform(family: str, database_url: str, data_dir: Path) -> AsyncIterator[FamilyPlatform]:
    """Matchmaking routing ``family`` to its rules shard (and fairness, when the family uses chance)."""
    servers: list[RunningServer] = []
    mm_port = free_port()
    reporting = {"MATCHMAKING_ADDRESS": f"127.0.0.1:{mm_port}"}
    mm_env: dict[str, str] = {}
    try:
        if family_rules(family).uses_chance:
            fairness = await start_fairness(database_url, data_dir)
            servers.append(fairness)
            reporting["FAIRNESS_ADDRESS"] = mm_env["FAIRNESS_ADDRESS"] = fairness.address
        rules = await start_in_process(f"rules-{family}", RULES_SERVICES[family], database_url, reporting)
        servers.append(rules)
        mm_env[f"RULES_{family.upper()}_ADDRESSES"] = rules.address
        matchmaking = await start_in_process(
            "matchmaking", MatchmakingService, database_url, mm_env, GRPC_PORT=str(mm_port)
        )
        servers.append(matchmaking)
        async with (
            backend_channel(matchmaking.address, "gateway") as mm_channel,
            backend_channel(rules.address, "gateway") as rules_channel,
        ):
            yield FamilyPlatform(
                family,
                matchmaking_pb2_grpc.MatchmakingServiceStub(mm_channel),
                rules_pb2_grpc.RulesServiceStub(rules_channel),
            )
    finally:
        for server in reversed(servers):
            await server.stop(grace=0.5)


def module_platform(family: str) -> Any:
    """A module-scoped fixture: one :class:`FamilyPlatform` of ``family`` per backend (SQLite, and
    PostgreSQL where a server is reachable), shared by the module's tests."""

    @pytest_asyncio.fixture(scope="module", loop_scope="session", params=BACKENDS)
    async def platform(
        request: pytest.FixtureRequest,
        tmp_path_factory: pytest.TempPathFactory,
        recycled_postgres_databases: RecycledDatabases,
    ) -> AsyncIterator[FamilyPlatform]:
        data_dir = tmp_path_factory.mktemp(f"{family}-tables")
        if request.param == "sqlite":
            async with family_platform(family, sqlite_url(data_dir / "test.db"), data_dir) as running:
                yield running
            return
        from tests.conftest import _database_url

        name = await recycled_postgres_databases.take()
        try:
            async with family_platform(family, _database_url(name), data_dir) as running:
                yield running
        finally:
            await recycled_postgres_databases.give_back(name)

    return platform


def players(*names: str) -> list[str]:
    """Player ids no other test of the module uses."""
    tag = uuid.uuid4().hex[:8]
    return [f"{name}-{tag}" for name in names]


def fresh_fee() -> int:
    """An entry fee no other test of the module uses (so its quick-match pools are its own)."""
    return next(_fees)


def table_request(
    family: str,
    player: str,
    options: rules_pb2.MatchOptions,
    time_control: rules_pb2.TimeControl,
    policy: pb.DisconnectPolicy.ValueType = pb.DISCONNECT_POLICY_UNSPECIFIED,
    fee: int = 300,
) -> pb.CreateTableRequest:
    return pb.CreateTableRequest(
        player_id=player,
        family=family,
        options=options,
        time_control=time_control,
        entry_fee_minor=fee,
        currency="USD",
        visibility=pb.VISIBILITY_PUBLIC,
        idempotency_key=uuid.uuid4().hex,
        disconnect_policy=policy,
    )


def queue_request(
    family: str,
    player: str,
    options: rules_pb2.MatchOptions,
    time_control: rules_pb2.TimeControl,
    fee: int,
    policy: pb.DisconnectPolicy.ValueType = pb.DISCONNECT_POLICY_UNSPECIFIED,
) -> pb.EnterQueueRequest:
    return pb.EnterQueueRequest(
        player_id=player,
        family=family,
        options=options,
        time_control=time_control,
        entry_fee_minor=fee,
        currency="USD",
        disconnect_policy=policy,
    )


def as_created(family: str, options: rules_pb2.MatchOptions) -> rules_pb2.MatchOptions:
    """``options`` as the family's rules shard reports them once the match exists: read by the family's
    own codec, its defaults filled in (gin's 0 hands to win is 3, go's size 0 is 19, ...)."""
    declared = family_rules(family).family
    reported: rules_pb2.MatchOptions = declared.options_to_proto(declared.options_from_proto(options))
    return reported


def expected_stand_in_ms(policy: pb.DisconnectPolicy.ValueType) -> int:
    return STAND_IN_AFTER_MS if policy == pb.DISCONNECT_POLICY_STAND_IN else 0


async def table_makes_its_match(
    platform: FamilyPlatform,
    options: rules_pb2.MatchOptions,
    time_control: rules_pb2.TimeControl,
    policy: pb.DisconnectPolicy.ValueType,
    expected_options: rules_pb2.MatchOptions | None = None,
) -> rules_pb2.GetMatchResponse:
    """A table with ``options``, ``time_control`` and ``policy`` is created, listed by ListTables (with its
    policy, also under that policy's filter and not under the other's), joined, and its match made on the
    family's rules shard with exactly those options (``expected_options``: as the shard reports them, its
    defaults filled in), that clock and that policy; the match as the shard reports it."""
    mm, family = platform.mm, platform.family
    host, guest = players("host", "guest")
    shown = pb.DISCONNECT_POLICY_FORFEIT if policy == pb.DISCONNECT_POLICY_UNSPECIFIED else policy
    table = (await mm.CreateTable(table_request(family, host, options, time_control, policy))).table
    assert (table.family, table.options, table.time_control) == (family, options, time_control)
    assert table.disconnect_policy == shown
    listed = (await mm.ListTables(pb.ListTablesRequest(family=family))).tables
    assert [t for t in listed if t.table_id == table.table_id] == [table]
    same = (await mm.ListTables(pb.ListTablesRequest(family=family, disconnect_policy=shown))).tables
    assert table.table_id in {t.table_id for t in same}
    other = (
        pb.DISCONNECT_POLICY_STAND_IN
        if shown == pb.DISCONNECT_POLICY_FORFEIT
        else pb.DISCONNECT_POLICY_FORFEIT
    )
    others = (await mm.ListTables(pb.ListTablesRequest(family=family, disconnect_policy=other))).tables
    assert table.table_id not in {t.table_id for t in others}
    joined = (await mm.JoinTable(pb.JoinTableRequest(player_id=guest, table_id=table.table_id))).table
    assert joined.status == pb.TABLE_STATUS_PLAYING, joined
    assert joined.match_id.startswith(f"{family}.0.")
    assert joined.disconnect_policy == shown
    match: rules_pb2.GetMatchResponse = await platform.rules.GetMatch(
        rules_pb2.GetMatchRequest(match_id=joined.match_id, spectator=True)
    )
    assert [s.player_id for s in match.seats] == [host, guest]
    assert match.options == (as_created(family, options) if expected_options is None else expected_options)
    assert match.time_control == time_control
    assert match.stand_in_after_ms == expected_stand_in_ms(policy)
    return match


async def refused_on_tables_and_queue(
    platform: FamilyPlatform,
    options: rules_pb2.MatchOptions,
    time_control: rules_pb2.TimeControl,
    text: str,
    *,
    why: str,
    fields: tuple[str, ...] | None = None,
    policy: pb.DisconnectPolicy.ValueType = pb.DISCONNECT_POLICY_UNSPECIFIED,
) -> None:
    """Both a table and a queue entry with these are ``INVALID_ARGUMENT`` saying ``text`` (reason ``why``)."""
    [player] = players("picky")
    family = platform.family
    await refused(
        platform.mm.CreateTable(table_request(family, player, options, time_control, policy)),
        INVALID,
        text,
        why=why,
        fields=fields,
    )
    await refused(
        platform.mm.EnterQueue(queue_request(family, player, options, time_control, fresh_fee(), policy)),
        INVALID,
        text,
        why=why,
        fields=fields,
    )


async def quick_match_pairs_only_equal_pools(
    platform: FamilyPlatform,
    options: rules_pb2.MatchOptions,
    time_control: rules_pb2.TimeControl,
    policy: pb.DisconnectPolicy.ValueType,
    different: list[tuple[rules_pb2.MatchOptions, rules_pb2.TimeControl, pb.DisconnectPolicy.ValueType]],
    expected_options: rules_pb2.MatchOptions | None = None,
) -> None:
    """Two players asking for the same options, clock and policy are paired, and their match carries them;
    a player for each of ``different`` (other options, clock or policy: another pool, the same fee) is
    paired with nobody, and leaves the queue at once."""
    mm, family = platform.mm, platform.family
    fee = fresh_fee()
    first, second = players("qa", "qb")
    loners = players(*(f"q{i}" for i in range(len(different))))
    streams = {p: mm.WatchLobby(pb.WatchLobbyRequest(player_id=p)) for p in (first, second)}
    for stream in streams.values():
        await next_event(stream, "subscribed", within=10.0)
    pools = set()
    entered = await mm.EnterQueue(queue_request(family, first, options, time_control, fee, policy))
    pools.add(entered.pool)
    for loner, (other_options, other_clock, other_policy) in zip(loners, different, strict=True):
        reply = await mm.EnterQueue(
            queue_request(family, loner, other_options, other_clock, fee, other_policy)
        )
        pools.add(reply.pool)
    assert len(pools) == 1 + len(different), pools  # each a pool of its own
    again = await mm.EnterQueue(queue_request(family, second, options, time_control, fee, policy))
    assert again.pool == entered.pool
    ready = [(await next_event(streams[p], "match_ready", within=10.0)).match_ready for p in (first, second)]
    assert ready[0].match_id == ready[1].match_id
    assert {ready[0].opponent_id, ready[1].opponent_id} == {first, second}
    match = await platform.rules.GetMatch(
        rules_pb2.GetMatchRequest(match_id=ready[0].match_id, spectator=True)
    )
    assert match.options == (as_created(family, options) if expected_options is None else expected_options)
    assert match.time_control == time_control
    assert match.stand_in_after_ms == expected_stand_in_ms(policy)
    for loner in loners:
        assert (await mm.GetMatchHistory(pb.GetMatchHistoryRequest(player_id=loner))).matches == []
        assert (await mm.LeaveQueue(pb.LeaveQueueRequest(player_id=loner))).left
    for stream in streams.values():
        stream.cancel()


async def a_result_moves_only_this_familys_elo(
    platform: FamilyPlatform,
    options: rules_pb2.MatchOptions,
    time_control: rules_pb2.TimeControl,
    policy: pb.DisconnectPolicy.ValueType = pb.DISCONNECT_POLICY_UNSPECIFIED,
) -> None:
    """A table's match ended by a resignation (seat 1 resigns: the host wins) moves both players' rating in
    this family by Elo, and no rating of any other family."""
    mm, family = platform.mm, platform.family
    host, guest = players("winner", "loser")
    table = (await mm.CreateTable(table_request(family, host, options, time_control, policy))).table
    joined = (await mm.JoinTable(pb.JoinTableRequest(player_id=guest, table_id=table.table_id))).table
    await platform.rules.SubmitAction(
        rules_pb2.SubmitActionRequest(
            match_id=joined.match_id,
            seat=1,
            idempotency_key=uuid.uuid4().hex,
            action=rules_pb2.Action(resign=rules_pb2.Resign()),
        )
    )
    async with asyncio.timeout(10):  # the result arrives from the rules shard's outbox
        while True:
            ratings = await mm.GetRatings(pb.GetRatingsRequest(player_id=host))
            if ratings.ratings:
                break
            await asyncio.sleep(0.05)
    loser = await mm.GetRatings(pb.GetRatingsRequest(player_id=guest))
    # Equal ratings, K 40 for a new player: the winner gains 20, the loser gives 20.
    assert [(r.family, r.rating, r.games) for r in ratings.ratings] == [(family, 1520, 1)]
    assert [(r.family, r.rating, r.games) for r in loser.ratings] == [(family, 1480, 1)]
    assert {c.family for c in (*ratings.history, *loser.history)} == {family}
    [played] = (await mm.GetMatchHistory(pb.GetMatchHistoryRequest(player_id=guest))).matches
    assert played.match_id == joined.match_id
    assert played.result.termination == rules_pb2.TERMINATION_RESIGNATION
    assert (played.rating_before, played.rating_after) == (1500, 1480)


async def the_stand_in_policy_is_refused(
    platform: FamilyPlatform, options: rules_pb2.MatchOptions, time_control: rules_pb2.TimeControl
) -> None:
    """For a family without a stand-in: tables and queue entries asking for one are refused with the
    reason, and the forfeit rule, said or unsaid, is accepted."""
    await refused_on_tables_and_queue(
        platform,
        options,
        time_control,
        f"{platform.family} has no stand-in",
        why="OPTIONS_NOT_OFFERED",
        fields=("disconnect_policy",),
        policy=pb.DISCONNECT_POLICY_STAND_IN,
    )
    for policy in (pb.DISCONNECT_POLICY_UNSPECIFIED, pb.DISCONNECT_POLICY_FORFEIT):
        [player] = players("forfeit")
        request = table_request(platform.family, player, options, time_control, policy)
        table = (await platform.mm.CreateTable(request)).table
        assert table.disconnect_policy == pb.DISCONNECT_POLICY_FORFEIT
        await platform.mm.LeaveTable(pb.LeaveTableRequest(player_id=player, table_id=table.table_id))
