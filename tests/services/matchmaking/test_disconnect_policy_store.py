"""The disconnect policy in matchmaking's store, on SQLite and PostgreSQL: a column of its own on
``mm_tables`` and ``mm_matches`` (migration 0010), written by ``create_table``, ``join_table`` and the
quick-match pairing, read back into ``Table.disconnect_policy`` and into the match's ``stand_in_after_ms``
when it is created on its shard (the retry loop's path too). The options columns stay plain
``MatchOptions``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from google.protobuf.unknown_fields import UnknownFieldSet
from skillclassics.gin.v1 import gin_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.rules.v1 import rules_pb2

from libs.runtime.timesource import ServiceTime
from services.matchmaking.families import STAND_IN_AFTER_MS, policy_column, policy_of_column
from services.matchmaking.lobby import LobbyHub
from services.matchmaking.matchmaker import Matchmaker
from services.matchmaking.servicer import table_proto
from services.matchmaking.store import FORFEIT, STAND_IN, MatchmakingStore
from tests.services.matchmaking.rows import match_row, queue_row, table_row
from tests.services.matchmaking.test_matchmaker import RecordingShards

GIN = rules_pb2.MatchOptions(gin=gin_pb2.GinOptions(variant=gin_pb2.VARIANT_OKLAHOMA))


@pytest.fixture
async def matchmaker(store: MatchmakingStore) -> AsyncIterator[Matchmaker]:
    made = Matchmaker(store, RecordingShards(), LobbyHub(), ServiceTime())
    yield made
    await made.close()


def test_the_column_values_map_to_the_contracts_policies() -> None:
    assert policy_column(pb.DISCONNECT_POLICY_UNSPECIFIED) == FORFEIT
    assert policy_column(pb.DISCONNECT_POLICY_FORFEIT) == FORFEIT
    assert policy_column(pb.DISCONNECT_POLICY_STAND_IN) == STAND_IN
    assert policy_of_column(FORFEIT) == pb.DISCONNECT_POLICY_FORFEIT
    assert policy_of_column(STAND_IN) == pb.DISCONNECT_POLICY_STAND_IN


async def test_a_tables_policy_is_stored_listed_and_given_to_its_match(store: MatchmakingStore) -> None:
    options = GIN.SerializeToString()
    stand_in = {**table_row("t-stand-in", "host1"), "family": "gin", "options": options}
    stand_in["disconnect_policy"] = STAND_IN
    forfeit = {**table_row("t-forfeit", "host2"), "family": "gin", "options": options}
    await store.create_table(stand_in)
    await store.create_table(forfeit)

    stored = await store.table("t-stand-in")
    assert stored["disconnect_policy"] == STAND_IN
    assert bytes(stored["options"]) == options  # the options alone: nothing appended
    table = table_proto(stored)
    assert table.disconnect_policy == pb.DISCONNECT_POLICY_STAND_IN
    assert table.options == GIN
    assert len(UnknownFieldSet(table.options)) == 0
    assert table_proto(await store.table("t-forfeit")).disconnect_policy == pb.DISCONNECT_POLICY_FORFEIT

    listed = await store.open_tables("gin", 0, "", disconnect_policy=STAND_IN)
    assert [row["table_id"] for row in listed] == ["t-stand-in"]
    listed = await store.open_tables("gin", 0, "", disconnect_policy=FORFEIT)
    assert [row["table_id"] for row in listed] == ["t-forfeit"]
    assert len(await store.open_tables("gin", 0, "")) == 2

    match = {**match_row("gin.0.t", "host1", "guest"), "family": "gin", "table_id": "t-stand-in"}
    match["disconnect_policy"] = stored["disconnect_policy"]  # as JoinTable copies it
    joined = await store.join_table("t-stand-in", "guest", match)
    assert joined["disconnect_policy"] == STAND_IN
    [starting] = await store.matches_starting()
    assert starting["disconnect_policy"] == STAND_IN


async def test_a_row_without_a_policy_is_refused_and_nothing_is_written(store: MatchmakingStore) -> None:
    table = table_row("t-none", "host")
    del table["disconnect_policy"]
    with pytest.raises(ValueError, match="disconnect_policy"):
        await store.create_table(table)
    with pytest.raises(ValueError, match="disconnect_policy"):
        await store.create_table({**table, "disconnect_policy": "ghost"})
    assert await store.open_tables("chess", 0, "") == []

    for player in ("a", "b"):
        await store.enter_queue(queue_row(player))
    match = match_row("chess.0.none", "a", "b")
    del match["disconnect_policy"]
    with pytest.raises(ValueError, match="disconnect_policy"):
        await store.pair_many([("a", "b", match)])
    assert await store.still_queued(["a", "b"]) == {"a", "b"}
    assert await store.matches_starting() == []


async def test_a_starting_matchs_policy_is_read_from_its_row_when_it_is_created(
    matchmaker: Matchmaker, store: MatchmakingStore
) -> None:
    """The pairing writes the policy with the match; creating it on its shard (here as the retry loop
    does, from the rows still ``starting``) reads it back into ``stand_in_after_ms``."""
    for player in ("s1", "s2", "f1", "f2"):
        await store.enter_queue({**queue_row(player, "gin|test"), "family": "gin"})
    options = GIN.SerializeToString()
    stand_in = {**match_row("gin.0.s", "s1", "s2"), "family": "gin", "options": options}
    stand_in["disconnect_policy"] = STAND_IN
    forfeit = {**match_row("gin.0.f", "f1", "f2"), "family": "gin", "options": options}
    assert await store.pair_many([("s1", "s2", stand_in), ("f1", "f2", forfeit)]) == [True, True]

    starting = sorted(await store.matches_starting(), key=lambda m: m["match_id"])
    assert [(m["match_id"], m["disconnect_policy"]) for m in starting] == [
        ("gin.0.f", FORFEIT),
        ("gin.0.s", STAND_IN),
    ]
    assert sorted(await matchmaker.launch_many(starting)) == ["gin.0.f", "gin.0.s"]
    shards = matchmaker.shards
    assert isinstance(shards, RecordingShards)
    created = {request.match_id: request for request in shards.created}
    assert created["gin.0.s"].stand_in_after_ms == STAND_IN_AFTER_MS
    assert created["gin.0.f"].stand_in_after_ms == 0
    assert created["gin.0.s"].options == GIN
    assert len(UnknownFieldSet(created["gin.0.s"].options)) == 0


async def test_a_queue_pairs_match_row_takes_the_requests_policy(matchmaker: Matchmaker) -> None:
    request = pb.EnterQueueRequest(
        family="chess",
        time_control=rules_pb2.TimeControl(base_ms=10 * 60_000),
        currency="USD",
        disconnect_policy=pb.DISCONNECT_POLICY_FORFEIT,
    )
    row = await matchmaker._match_row(("a", "b"), request)
    assert row["disconnect_policy"] == FORFEIT
    request.disconnect_policy = pb.DISCONNECT_POLICY_UNSPECIFIED
    assert (await matchmaker._match_row(("a", "b"), request))["disconnect_policy"] == FORFEIT
    request.disconnect_policy = pb.DISCONNECT_POLICY_STAND_IN  # (refused for chess by EnterQueue, earlier)
    assert (await matchmaker._match_row(("a", "b"), request))["disconnect_policy"] == STAND_IN
