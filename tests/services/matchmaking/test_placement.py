"""Placement: a new match goes to the least loaded of its family's live shards, and shards appended to the
directory file are used without a restart (services/matchmaking/shards.py, docs/matchmaking.md)."""

from __future__ import annotations

import asyncio
import collections
import time
import uuid
from pathlib import Path

import pytest
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.match.ids import MatchId
from libs.match.routing import ShardDirectory, parse_shards_file, write_shards_file
from libs.persistence import Database
from libs.persistence.schema import mm_matches
from libs.runtime.errors import Unavailable
from services.matchmaking.shards import MatchLoad, RulesShards
from services.rules_chess.service import chess_rules_service
from tests.services.matchmaking.rows import match_row
from tests.support import backend_channel, start_in_process, transport_as

NOWHERE = "127.0.0.1:1"  # nothing listens there: refused at once


def shards(env: dict[str, str], counts: dict[tuple[str, int], int] | None = None) -> RulesShards:
    async def load() -> dict[tuple[str, int], int]:
        return dict(counts or {})

    return RulesShards(env, ["chess", "gin"], transport_as("matchmaking"), load=load, watch=False)


def placed(rules: RulesShards, family: str, count: int) -> collections.Counter[int]:
    return collections.Counter(MatchId.parse(rules.new_match_id(family)).shard for _ in range(count))


async def test_the_least_loaded_live_shard_takes_the_match() -> None:
    env = {"RULES_CHESS_ADDRESSES": ",".join([NOWHERE] * 3)}
    rules = shards(env, {("chess", 0): 6, ("chess", 1): 2, ("chess", 2): 3})
    try:
        await rules.count_load()
        # 1 takes matches until it has as many as 2, then they alternate; 0 waits for both to reach 6.
        assert placed(rules, "chess", 1) == {1: 1}
        assert placed(rules, "chess", 6) == {1: 3, 2: 3}
        assert placed(rules, "chess", 3) == {0: 1, 1: 1, 2: 1}
        assert rules.state("chess", 1).load == 7
        # A new count replaces what was placed since the last one (the count includes those matches).
        await rules.count_load()
        assert [rules.state("chess", n).load for n in range(3)] == [6, 2, 3]

        # A shard whose health check failed is skipped while the others are live...
        rules.state("chess", 1).serving = False
        assert rules.live_shards("chess") == [0, 2]
        assert placed(rules, "chess", 3) == {2: 3}  # up to shard 0's 6
        # ...and when none is live, the match still gets a shard (its creation is retried until it answers).
        for n in range(3):
            rules.state("chess", n).serving = False
        assert sum(placed(rules, "chess", 20).values()) == 20
    finally:
        await rules.close()


async def test_the_health_probe_and_a_refused_creation_take_a_shard_out() -> None:
    rules = shards({"RULES_CHESS_ADDRESSES": f"{NOWHERE},{NOWHERE}", "RULES_PLACEMENT_COOLDOWN_MS": "60000"})
    try:
        assert rules.live_shards("chess") == [0, 1]  # never checked: counted live
        await rules.probe()  # nothing answers at either address
        assert rules.live_shards("chess") == []
        rules.state("chess", 0).serving = rules.state("chess", 1).serving = True

        match_id = rules.new_match_id("chess")
        shard = MatchId.parse(match_id).shard
        request = rules_pb2.CreateMatchRequest(match_id=match_id, idempotency_key=match_id)
        with pytest.raises(Unavailable, match="refused"):
            await rules.create_match(request)  # UNAVAILABLE: skipped for the cooldown
        assert rules.state("chess", shard).down_until > time.monotonic() + 50
        assert rules.live_shards("chess") == [1 - shard]
        assert placed(rules, "chess", 5) == {1 - shard: 5}
    finally:
        await rules.close()


async def test_a_shard_appended_to_the_directory_file_gets_matches(tmp_path: Path) -> None:
    directory = tmp_path / "rules-shards.env"
    write_shards_file(directory, {"chess": ["10.0.0.1:50060", "10.0.0.2:50060"]})
    assert parse_shards_file(directory.read_text()) == {"chess": ["10.0.0.1:50060", "10.0.0.2:50060"]}
    env = {"RULES_CHESS_ADDRESSES": "10.0.0.1:50060", "RULES_SHARDS_FILE": str(directory)}
    rules = shards(env, {("chess", 0): 4, ("chess", 1): 4})
    try:
        assert rules.require("chess") == ["10.0.0.1:50060", "10.0.0.2:50060"]  # the file's list
        await rules.count_load()
        assert set(placed(rules, "chess", 4)) == {0, 1}

        write_shards_file(directory, {"chess": ["10.0.0.1:50060", "10.0.0.2:50060", "10.0.0.3:50060"]})
        assert rules.directory.refresh()
        assert rules.require("chess")[2] == "10.0.0.3:50060"
        assert placed(rules, "chess", 3) == {2: 3}  # the new, empty shard first
        assert rules.stub("chess.2.x") is rules.stub("chess.2.y")

        # Shards are never removed (ids name them), and a file that does not parse changes nothing.
        write_shards_file(directory, {"chess": ["10.0.0.1:50060"]})
        assert not rules.directory.refresh()
        directory.write_text("RULES_CHESS_ADDRESSES=a\nnot a line\n")
        assert not rules.directory.refresh()
        assert len(rules.require("chess")) == 3
    finally:
        await rules.close()


async def test_the_directory_re_reads_its_file_while_watching(tmp_path: Path) -> None:
    directory = tmp_path / "rules-shards.env"
    directory.write_text("# comment\n\nRULES_GIN_ADDRESSES=g0\n")
    watched = ShardDirectory({"RULES_SHARDS_FILE": str(directory), "RULES_SHARDS_REFRESH_MS": "50"})
    assert watched == {"gin": ["g0"]}
    watched.start()
    try:
        write_shards_file(directory, {"gin": ["g0", "g1"]})
        for _ in range(100):  # re-read within a refresh (50 ms); 5 s at most
            await asyncio.sleep(0.05)
            if watched.get("gin") == ["g0", "g1"]:
                break
        assert watched["gin"] == ["g0", "g1"]
    finally:
        await watched.close()
    with pytest.raises(ValueError, match="line 1"):
        parse_shards_file("CHESS=1")


async def test_load_counts_the_matches_matchmaking_has_not_seen_end(migrated_url: str) -> None:
    db = Database(migrated_url)
    try:
        async with db.engine.begin() as conn:
            rows = [
                match_row("chess.0.a", "p", "q"),
                match_row("chess.1.b", "p", "q"),
                {**match_row("chess.1.c", "p", "q"), "status": "playing"},
                {**match_row("chess.1.d", "p", "q"), "status": "finished"},
                {**match_row("gin.1.e", "p", "q"), "family": "gin", "status": "playing"},
            ]
            await conn.execute(mm_matches.insert(), rows)
    finally:
        await db.dispose()
    load = MatchLoad(migrated_url)
    try:
        assert await load() == {("chess", 0): 1, ("chess", 1): 2, ("gin", 1): 1}
    finally:
        await load.close()


async def test_a_shard_counts_every_live_match_it_holds_directly_created_ones_included(
    migrated_url: str,
) -> None:
    """Placement asks each shard its load (GetLoad): matches another backend created directly on it (a
    tournament's) count, which matchmaking's own tables cannot know. A shard that does not answer is counted
    from matchmaking's tables."""
    shard = await start_in_process("rules-chess", chess_rules_service, migrated_url)
    try:
        env = {"RULES_CHESS_ADDRESSES": f"{shard.address},{NOWHERE}"}
        rules = shards(env, {("chess", 0): 99, ("chess", 1): 2})  # 99: what the database would say of 0
        async with backend_channel(shard.address, "matchmaking") as channel:
            stub = rules_pb2_grpc.RulesServiceStub(channel)
            direct = [f"chess.0.direct{uuid.uuid4().hex[:8]}" for _ in range(3)]
            for match_id in direct:
                await stub.CreateMatch(
                    rules_pb2.CreateMatchRequest(
                        match_id=match_id,
                        seats=[
                            rules_pb2.SeatAssignment(seat=0, player_id="white"),
                            rules_pb2.SeatAssignment(seat=1, player_id="black"),
                        ],
                        time_control=rules_pb2.TimeControl(base_ms=300_000),
                        idempotency_key=match_id,
                    )
                )
            load = await stub.GetLoad(rules_pb2.GetLoadRequest())
            assert (load.family, load.shard, load.live_matches) == ("chess", 0, 3)
        try:
            await rules.count_load()
            assert [rules.state("chess", n).live for n in (0, 1)] == [3, 2]  # 0 answered; 1 from the tables
            assert placed(rules, "chess", 1) == {1: 1}
            assert placed(rules, "chess", 2) == {0: 1, 1: 1}
        finally:
            await rules.close()
        # A match that ended leaves the count.
        async with backend_channel(shard.address, "gateway") as channel:
            await rules_pb2_grpc.RulesServiceStub(channel).SubmitAction(
                rules_pb2.SubmitActionRequest(
                    match_id=direct[0],
                    seat=0,
                    idempotency_key="resign",
                    action=rules_pb2.Action(resign=rules_pb2.Resign()),
                )
            )
        async with backend_channel(shard.address, "matchmaking") as channel:
            load = await rules_pb2_grpc.RulesServiceStub(channel).GetLoad(rules_pb2.GetLoadRequest())
            assert load.live_matches == 2
    finally:
        await shard.stop(grace=0.5)


async def test_a_shard_listed_in_the_wrong_place_is_not_believed(migrated_url: str) -> None:
    """An address that answers as another shard (a directory that lists it in the wrong place) is counted
    from the tables, not from its answer."""
    shard = await start_in_process("rules-chess", chess_rules_service, migrated_url, {"RULES_SHARD": "1"})
    rules = shards({"RULES_CHESS_ADDRESSES": shard.address}, {("chess", 0): 4})
    try:
        await rules.count_load()
        assert rules.state("chess", 0).live == 4
    finally:
        await rules.close()
        await shard.stop(grace=0.5)


async def test_a_placement_made_while_the_shards_are_counted_stays_in_the_load() -> None:
    """The count replaces the placements made before it began (it includes them); one made while the
    shards were answering may not be in their answers, so it stays counted until the next count."""
    rules: RulesShards | None = None

    async def load() -> dict[tuple[str, int], int]:
        assert rules is not None
        rules.new_match_id("chess")  # placed while the count is in flight
        return {("chess", 0): 5}

    rules = RulesShards(
        {"RULES_CHESS_ADDRESSES": NOWHERE}, ["chess"], transport_as("matchmaking"), load=load, watch=False
    )
    try:
        rules.new_match_id("chess")  # before the count: in it
        await rules.count_load()
        state = rules.state("chess", 0)
        assert (state.live, state.placed, state.load) == (5, 1, 6)
    finally:
        await rules.close()
