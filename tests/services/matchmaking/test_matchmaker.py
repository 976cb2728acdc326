"""The quick-match pairing round when making a match fails, on SQLite and PostgreSQL: a partner who left
meanwhile, fairness down, the database failing. Nobody still queued is lost; whoever left stays gone.

These drive :class:`Matchmaker` directly (its store on a real database, fairness over real gRPC) so that
the failure lands exactly between the pairing decision and its transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from skillclassics.gin.v1 import gin_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.rules.v1 import rules_pb2

from libs.pairing import Seeker
from libs.runtime.timesource import ServiceTime
from services.matchmaking.families import FAMILIES
from services.matchmaking.lobby import LobbyHub
from services.matchmaking.matchmaker import PAIRING_BATCH, Matchmaker
from services.matchmaking.shards import RulesShards
from services.matchmaking.store import MatchmakingStore
from tests.services.matchmaking.rows import match_row
from tests.support import free_port, start_fairness, transport_as

GIN = rules_pb2.MatchOptions(gin=gin_pb2.GinOptions(variant=gin_pb2.VARIANT_STANDARD))


class RecordingShards(RulesShards):
    """Rules shards that only record the matches created on them."""

    def __init__(self) -> None:
        super().__init__(  # as matchmaking: the matchmaker calls fairness with these shards' transport
            {"RULES_CHESS_ADDRESSES": "127.0.0.1:1", "RULES_GIN_ADDRESSES": "127.0.0.1:1"},
            [*FAMILIES],
            transport_as("matchmaking"),
        )
        self.created: list[rules_pb2.CreateMatchRequest] = []

    async def create_match(self, request: rules_pb2.CreateMatchRequest) -> None:
        self.created.append(request)


@pytest.fixture
async def fairness_port() -> int:
    return free_port()  # nothing listens there until a test starts fairness on it


@pytest.fixture
async def matchmaker(store: MatchmakingStore, fairness_port: int) -> AsyncIterator[Matchmaker]:
    made = Matchmaker(store, RecordingShards(), LobbyHub(), ServiceTime(), f"127.0.0.1:{fairness_port}")
    yield made
    await made.close()


async def enter(mm: Matchmaker, player: str, family: str = "chess") -> None:
    """What ``EnterQueue`` does once the request is valid: the queue row, then the in-memory seeker."""
    request = pb.EnterQueueRequest(
        player_id=player,
        family=family,
        options=GIN if family == "gin" else rules_pb2.MatchOptions(),
        time_control=rules_pb2.TimeControl(base_ms=10 * 60_000),
        entry_fee_minor=100,
        currency="USD",
    )
    now = mm.time.now_ms()
    pool = f"{family}|test"
    row = {"player_id": player, "pool": pool, "family": family, "rating": 1500, "entered_at_ms": now}
    await mm.store.enter_queue({**row, "request": request.SerializeToString()})
    mm.queue(Seeker(player, 1500, now, pool), request)
    await asyncio.sleep(0.002)  # distinct entry times: the first to enter waited longest


async def opponents(store: MatchmakingStore, player: str) -> list[tuple[str, str]]:
    """``player``'s matches as (seat 0, seat 1)."""
    return [(m["player0"], m["player1"]) for m in await store.matches_of(player, "")]


async def test_a_partner_leaving_mid_pairing_stays_gone_and_the_other_is_paired_later(
    matchmaker: Matchmaker, store: MatchmakingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await enter(matchmaker, "leaver")
    await enter(matchmaker, "stayer")
    pair_in_store = store.pair_many

    async def leave_just_before(pairs: list[tuple[str, str, dict[str, Any]]]) -> list[bool]:
        # LeaveQueue, exactly as the servicer does it, between the pairing decision and its transaction.
        matchmaker.dequeue("leaver")
        assert await store.leave_queue("leaver")
        return await pair_in_store(pairs)

    monkeypatch.setattr(store, "pair_many", leave_just_before)
    assert await matchmaker.pair_now() == 0
    monkeypatch.setattr(store, "pair_many", pair_in_store)
    assert await store.still_queued(["leaver", "stayer"]) == {"stayer"}
    assert await opponents(store, "stayer") == []

    assert await matchmaker.pair_now() == 0  # the one left has nobody to pair with (the leaver is gone)
    await enter(matchmaker, "newcomer")
    assert await matchmaker.pair_now() == 1
    assert await opponents(store, "stayer") == [("stayer", "newcomer")]  # kept their place: seat 0
    assert await store.still_queued(["stayer", "newcomer"]) == set()
    assert await opponents(store, "leaver") == []
    await enter(matchmaker, "leaver")  # free: nothing of the failed pairing holds them


async def test_fairness_down_keeps_both_queued_and_they_pair_once_it_is_back(
    matchmaker: Matchmaker,
    store: MatchmakingStore,
    fairness_port: int,
    migrated_url: str,
    tmp_path: Path,
) -> None:
    shards = matchmaker.shards
    assert isinstance(shards, RecordingShards)
    await enter(matchmaker, "g1", "gin")
    await enter(matchmaker, "g2", "gin")
    for _ in range(2):  # the Commit fails (nothing listens): every round puts both back
        assert await matchmaker.pair_now() == 0
    assert await store.still_queued(["g1", "g2"]) == {"g1", "g2"}
    assert await opponents(store, "g1") == []
    assert shards.created == []

    fairness = await start_fairness(migrated_url, tmp_path, GRPC_PORT=str(fairness_port))
    try:
        made = 0
        async with asyncio.timeout(30):  # the channel reconnects after its back-off
            while not made:
                made = await matchmaker.pair_now()
                await asyncio.sleep(0.2)
    finally:
        await fairness.stop(grace=0.5)
    assert await opponents(store, "g1") == [("g1", "g2")]
    [created] = shards.created
    assert created.match_id.startswith("gin.0.")
    assert len(created.fairness_commitment) == 64  # committed before the match was created


async def test_a_database_error_while_pairing_loses_nobody(
    matchmaker: Matchmaker, store: MatchmakingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await enter(matchmaker, "d1")
    await enter(matchmaker, "d2")
    pair_in_store = store.pair_many

    async def failing(pairs: list[tuple[str, str, dict[str, Any]]]) -> list[bool]:
        raise ConnectionResetError("the database went away")

    monkeypatch.setattr(store, "pair_many", failing)
    assert await matchmaker.pair_now() == 0
    monkeypatch.setattr(store, "pair_many", pair_in_store)
    assert await matchmaker.pair_now() == 1
    assert await opponents(store, "d1") == [("d1", "d2")]


async def test_a_round_of_many_pairs_is_made_in_batches_and_one_leaver_costs_only_their_pair(
    matchmaker: Matchmaker, store: MatchmakingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    players = [f"b{i:03}" for i in range(2 * PAIRING_BATCH + 2)]  # a full batch, then one more pair
    for player in players:
        await enter(matchmaker, player)
    pair_in_store = store.pair_many
    batches: list[int] = []

    async def one_leaves_during_the_first_batch(pairs: list[tuple[str, str, dict[str, Any]]]) -> list[bool]:
        if not batches:
            matchmaker.dequeue("b004")
            assert await store.leave_queue("b004")
        batches.append(len(pairs))
        return await pair_in_store(pairs)

    monkeypatch.setattr(store, "pair_many", one_leaves_during_the_first_batch)
    assert await matchmaker.pair_now() == PAIRING_BATCH  # 65 pairs, one of them lost to the leaver
    assert batches == [PAIRING_BATCH, 1]
    assert await store.still_queued(players) == {"b005"}  # b004's partner, back in the queue
    shards = matchmaker.shards
    assert isinstance(shards, RecordingShards)
    assert len(shards.created) == PAIRING_BATCH
    assert await opponents(store, "b000") == [("b000", "b001")]
    assert await opponents(store, "b128") == [("b128", "b129")]
    monkeypatch.setattr(store, "pair_many", pair_in_store)
    await enter(matchmaker, "late")
    assert await matchmaker.pair_now() == 1
    assert await opponents(store, "b005") == [("b005", "late")]


async def test_pair_many_makes_exactly_the_pairs_whose_players_are_all_still_queued(
    matchmaker: Matchmaker, store: MatchmakingStore
) -> None:
    for player in ("p1", "p2", "p3", "p4", "p5", "p6"):
        await enter(matchmaker, player)
    assert await store.leave_queue("p3")

    def row(match_id: str, first: str, second: str) -> dict[str, Any]:
        return match_row(match_id, first, second, entry_fee_minor=100)

    made = await store.pair_many(
        [
            ("p1", "p2", row("chess.0.a", "p1", "p2")),
            ("p3", "p4", row("chess.0.b", "p3", "p4")),
            ("p5", "p6", row("chess.0.c", "p5", "p6")),
        ]
    )
    assert made == [True, False, True]
    assert await store.still_queued(["p1", "p2", "p3", "p4", "p5", "p6"]) == {"p4"}
    assert await opponents(store, "p4") == []
    assert sorted(m["match_id"] for m in await store.matches_starting()) == ["chess.0.a", "chess.0.c"]
    assert not await store.pair("p1", "p4", row("chess.0.d", "p1", "p4"))  # p1 is in a match now


async def test_a_catch_up_tells_a_player_the_rating_changes_since_the_gap(
    matchmaker: Matchmaker, migrated_url: str
) -> None:
    """A replica that stopped hearing the others catches its players up from the database: a rating change
    made meanwhile (a result reported to another replica) comes as ``RatingChanged``, one made before the
    gap does not come again."""
    from sqlalchemy import insert
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    from libs.persistence.schema import mm_rating_changes

    engine = create_async_engine(migrated_url, poolclass=NullPool)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                insert(mm_rating_changes),
                [
                    {
                        "match_id": "gin.0.old",
                        "player_id": "cu-a",
                        "family": "gin",
                        "before": 1500,
                        "after": 1480,
                        "at_ms": 1_000,
                    },
                    {
                        "match_id": "chess.0.new",
                        "player_id": "cu-a",
                        "family": "chess",
                        "before": 1500,
                        "after": 1520,
                        "at_ms": 9_000,
                    },
                    {
                        "match_id": "chess.0.new",
                        "player_id": "cu-b",
                        "family": "chess",
                        "before": 1500,
                        "after": 1480,
                        "at_ms": 9_000,
                    },
                ],
            )
    finally:
        await engine.dispose()
    events = matchmaker.hub.watch("cu-a")
    assert (await anext(events)).WhichOneof("event") == "subscribed"
    await matchmaker.catch_up(["cu-a"], 5_000)
    told = await asyncio.wait_for(anext(events), 2)
    assert told.WhichOneof("event") == "rating_changed"
    changed = told.rating_changed
    assert (changed.family, changed.match_id, changed.before, changed.after) == (
        "chess",
        "chess.0.new",
        1500,
        1520,
    )
    with pytest.raises(TimeoutError):  # nothing else: not the older change, not the other player's
        await asyncio.wait_for(anext(events), 0.3)


async def test_a_catch_up_tells_of_a_table_cancelled_during_the_gap(
    matchmaker: Matchmaker, store: MatchmakingStore
) -> None:
    """A table created before the gap and cancelled during it is found by when its status changed
    (``mm_tables.updated_at_ms``), so the player's stream learns it is cancelled; one cancelled before the
    gap is not told again."""
    from tests.services.matchmaking.rows import table_row

    for table_id, cancelled_at in (("t-gap", 9_000), ("t-before", 2_000)):
        await store.create_table(table_row(table_id, "cu-host"))
        await store.cancel_table(table_id, "cu-host", cancelled_at)
    events = matchmaker.hub.watch("cu-host")
    assert (await anext(events)).WhichOneof("event") == "subscribed"
    await matchmaker.catch_up(["cu-host"], 5_000)
    told = await asyncio.wait_for(anext(events), 2)
    assert (told.table_updated.table_id, told.table_updated.status) == ("t-gap", pb.TABLE_STATUS_CANCELLED)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(anext(events), 0.3)
