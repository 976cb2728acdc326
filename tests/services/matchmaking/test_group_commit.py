"""Matchmaking's writes through group commit, on SQLite and PostgreSQL: concurrent lobby calls share
commits and are all durable, the writes sharing a transaction keep the rules of one transaction each (one
winner of a seat, later writes see earlier ones), a refused write fails alone, and shutting down commits
what is queued and refuses what comes later with UNAVAILABLE.

Store methods called in one event loop step (``asyncio.gather`` of methods whose first await is their
write) are queued together, so they share the committer's next transaction.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import grpc
import pytest
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.matchmaking.v1 import matchmaking_pb2_grpc
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from libs.persistence import Database
from libs.persistence.group_commit import GroupCommitter
from libs.persistence.schema import mm_activity, mm_matches, mm_queue
from libs.runtime.errors import FailedPrecondition, Unavailable
from services.matchmaking.service import MatchmakingService
from services.matchmaking.store import MatchmakingStore
from tests.services.matchmaking.rows import match_row, queue_row, table_row
from tests.services.matchmaking.test_matchmaking_service import Platform, running_platform, table_request
from tests.support import backend_channel

BURST = 50


@pytest.fixture
async def platform(database_url: str) -> AsyncIterator[Platform]:
    async with running_platform(database_url) as running:
        yield running


def committer(platform: Platform) -> GroupCommitter:
    """The group committer of the matchmaking service running now."""
    service = platform.matchmaking.service
    assert isinstance(service, MatchmakingService)
    assert service.matchmaker is not None
    return service.matchmaker.store.committer


async def listed(stub: matchmaking_pb2_grpc.MatchmakingServiceStub) -> set[str]:
    """The ids of the open chess tables."""
    reply = await stub.ListTables(pb.ListTablesRequest(family="chess", limit=1000))
    return {table.table_id for table in reply.tables}


async def rows(url: str, table: object) -> int:
    """How many rows ``table`` has, read through an engine of its own (what is committed)."""
    db = Database(url)
    try:
        async with db.connect() as conn:
            return int(await conn.scalar(select(func.count()).select_from(table)) or 0)  # type: ignore[arg-type]
    finally:
        await db.dispose()


async def test_a_burst_of_create_tables_shares_commits_and_every_table_survives_a_restart(
    platform: Platform,
) -> None:
    writer = committer(platform)
    batches, units = writer.batches, writer.units
    replies = await asyncio.gather(
        *(platform.mm.CreateTable(table_request(f"burst{i}")) for i in range(BURST))
    )
    made = {reply.table.table_id for reply in replies}
    assert len(made) == BURST
    assert all(reply.table.status == pb.TABLE_STATUS_OPEN for reply in replies)
    # Every create is a unit (on SQLite its idempotency lookup is one too: reads join the batches there).
    assert writer.units - units >= BURST
    assert writer.batches - batches < BURST  # commits shared: fewer commits than calls

    await platform.restart_matchmaking()
    async with backend_channel(platform.matchmaking.address, "gateway") as channel:
        stub = matchmaking_pb2_grpc.MatchmakingServiceStub(channel)
        assert made <= await listed(stub)
        for i in (0, BURST - 1):  # each creator is still at their table: a second one is refused
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.CreateTable(table_request(f"burst{i}"))
            assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "already waiting at table" in (caught.value.details() or "")


async def test_calls_answered_before_a_stop_are_durable_and_the_others_are_refused_cleanly(
    platform: Platform,
) -> None:
    calls = [asyncio.ensure_future(platform.mm.CreateTable(table_request(f"stop{i}"))) for i in range(BURST)]
    await asyncio.wait(calls, return_when=asyncio.FIRST_COMPLETED)  # the others in flight or queued
    await platform.restart_matchmaking()
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    answered = {o.table.table_id for o in outcomes if isinstance(o, pb.CreateTableResponse)}
    refused = [o for o in outcomes if not isinstance(o, pb.CreateTableResponse)]
    assert answered
    for error in refused:  # the stop refused them: nothing crashed
        assert isinstance(error, grpc.aio.AioRpcError), error
        assert error.code() in {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}, error
    async with backend_channel(platform.matchmaking.address, "gateway") as channel:
        assert answered <= await listed(matchmaking_pb2_grpc.MatchmakingServiceStub(channel))


async def test_two_joins_of_one_table_in_one_transaction_have_one_winner(
    store: MatchmakingStore, migrated_url: str
) -> None:
    await store.create_table(table_row("t-race", "host"))
    first, second = match_row("chess.0.first", "host", "j1"), match_row("chess.0.second", "host", "j2")
    outcomes = await asyncio.gather(
        store.join_table("t-race", "j1", first),
        store.join_table("t-race", "j2", second),
        return_exceptions=True,
    )
    winner, loser = outcomes
    assert isinstance(winner, dict)
    assert (winner["status"], winner["joiner_id"], winner["match_id"]) == ("starting", "j1", "chess.0.first")
    assert winner == await store.table("t-race")
    # The refusal a second joiner always got: the table is no longer open.
    assert isinstance(loser, FailedPrecondition)
    assert loser.message == "table t-race is not open (it is starting)"
    assert [m["match_id"] for m in await store.matches_starting()] == ["chess.0.first"]
    assert await rows(migrated_url, mm_matches) == 1
    await store.enter_queue(queue_row("j2"))  # the loser is free: nothing of their join remained


async def test_writes_sharing_a_transaction_see_the_writes_before_them(store: MatchmakingStore) -> None:
    writer = store.committer
    await store.enter_queue(queue_row("warm-up"))  # the writer is running and idle
    batches, units = writer.batches, writer.units
    entered, left, again = await asyncio.gather(
        store.enter_queue(queue_row("p")), store.leave_queue("p"), store.leave_queue("p")
    )
    assert (entered, left, again) == (None, True, False)  # in order, as one transaction each would be
    assert (writer.batches - batches, writer.units - units) == (1, 3)  # and they shared one commit
    assert await store.still_queued(["p"]) == set()


async def test_a_refused_write_fails_alone_and_the_others_of_its_transaction_are_committed(
    store: MatchmakingStore, migrated_url: str
) -> None:
    await store.enter_queue(queue_row("busy"))
    await store.enter_queue(queue_row("a"))
    await store.enter_queue(queue_row("b"))
    await store.create_table(table_row("t-old", "host"))
    await store.join_table("t-old", "guest", match_row("chess.0.taken", "host", "guest"))
    fresh = [f"ok{i}" for i in range(4)]
    outcomes = await asyncio.gather(
        *(store.enter_queue(queue_row(player)) for player in fresh[:2]),
        store.enter_queue(queue_row("busy")),  # refused by a check: already in the queue
        store.pair("a", "b", match_row("chess.0.taken", "a", "b")),  # refused by the database: id taken
        *(store.enter_queue(queue_row(player)) for player in fresh[2:]),
        return_exceptions=True,
    )
    assert outcomes[:2] == [None, None]
    assert outcomes[4:] == [None, None]
    refusal, failure = outcomes[2:4]
    assert isinstance(refusal, FailedPrecondition)
    assert refusal.message == "player busy is already in the queue chess|test"
    assert isinstance(failure, IntegrityError)
    # The others are committed; the failed pairing left a and b queued and free of any match.
    assert await store.still_queued([*fresh, "busy", "a", "b"]) == {*fresh, "busy", "a", "b"}
    assert await rows(migrated_url, mm_queue) == len(fresh) + 3
    assert await rows(migrated_url, mm_activity) == len(fresh) + 3 + 2  # and host and guest, playing
    assert [m["match_id"] for m in await store.matches_starting()] == ["chess.0.taken"]
    assert await store.pair("a", "b", match_row("chess.0.new", "a", "b"))


async def test_closing_commits_what_is_queued_and_refuses_later_writes_as_unavailable(
    store: MatchmakingStore, migrated_url: str
) -> None:
    players = [f"q{i}" for i in range(20)]
    queued = [asyncio.ensure_future(store.enter_queue(queue_row(player))) for player in players]
    await asyncio.sleep(0)  # every write queued for the writer
    await store.close()
    assert await asyncio.gather(*queued) == [None] * len(players)  # none refused: all were committed
    assert await rows(migrated_url, mm_queue) == len(players)
    with pytest.raises(Unavailable) as caught:
        await store.create_table(table_row(f"t-{uuid.uuid4().hex[:8]}", "late"))
    assert caught.value.message == "matchmaking is shutting down and takes no more changes; try again"
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE
    assert await store.still_queued(["late"]) == set()  # reads still work; nothing was written
