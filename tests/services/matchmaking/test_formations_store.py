"""Matchmaking's store of saved formations on SQLite and PostgreSQL: the limit holds under concurrent
saves, a replace keeps its creation time, and the order is the same on both databases."""

from __future__ import annotations

import asyncio

import pytest

from libs.runtime.errors import ErrorReason, FailedPrecondition, NotFound
from services.matchmaking.store import MAX_FORMATIONS, MatchmakingStore

TEXT = "a1=FLG"  # the store keeps what it is given; the servicer checks formations (tests/services/gateway)


async def test_concurrent_saves_never_pass_the_limit(store: MatchmakingStore) -> None:
    for number in range(MAX_FORMATIONS - 1):
        await store.save_formation("alice", f"f{number:02}", TEXT, 1)
    results = await asyncio.gather(
        *(store.save_formation("alice", f"new {n}", TEXT, 2) for n in range(6)),
        store.save_formation("alice", "f03", "b1=FLG", 2),  # a replace, not a new name
        return_exceptions=True,
    )
    refused = [r for r in results if isinstance(r, FailedPrecondition)]
    assert len(refused) == 5
    assert {r.reason for r in refused} == {ErrorReason.ERROR_REASON_FORMATION_LIMIT_REACHED}
    assert sum(1 for r in results if isinstance(r, tuple)) == 2
    rows = await store.formations("alice")
    assert len(rows) == MAX_FORMATIONS
    assert {r["name"]: r["text"] for r in rows}["f03"] == "b1=FLG"


async def test_a_replace_keeps_its_creation_time(store: MatchmakingStore) -> None:
    _, replaced = await store.save_formation("alice", "Wall", TEXT, 100)
    assert not replaced
    second, replaced = await store.save_formation("alice", "Wall", "b1=FLG", 250)
    assert replaced
    assert (second["created_at_ms"], second["updated_at_ms"], second["text"]) == (100, 250, "b1=FLG")
    assert await store.formations("alice") == [second]
    assert await store.formations("bob") == []


async def test_the_order_is_by_name_ignoring_case_then_by_code_point(store: MatchmakingStore) -> None:
    names = ["beta", "Wall", "alpha", "Beta", "_x", "2 wide", "wall.2", "A"]
    for name in names:
        await store.save_formation("alice", name, TEXT, 1)
    listed = [row["name"] for row in await store.formations("alice")]
    assert listed == ["2 wide", "_x", "A", "alpha", "Beta", "beta", "Wall", "wall.2"]


async def test_deleting_what_is_not_there_is_not_found(store: MatchmakingStore) -> None:
    await store.save_formation("alice", "Wall", TEXT, 1)
    with pytest.raises(NotFound):
        await store.delete_formation("bob", "Wall")
    with pytest.raises(NotFound):
        await store.delete_formation("alice", "wall")
    assert (await store.delete_formation("alice", "Wall"))["text"] == TEXT
    with pytest.raises(NotFound):
        await store.delete_formation("alice", "Wall")
