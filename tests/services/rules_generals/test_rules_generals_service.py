"""The Game of the Generals rules service over real gRPC on localhost, with the fairness service, on SQLite
and PostgreSQL: whole games from the setup (both seats at once) and the first mover drawn from the fairness
stream to the end, no opposing rank in anything a seat is sent, byte-identical streams for two matches that
differ only in ranks the seat may not see, the record after the game, and a SIGKILL during the setup."""

from __future__ import annotations

import asyncio
import base64
import random
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc
from skillclassics.generals.v1 import generals_pb2 as gpb
from skillclassics.rules.v1 import rules_pb2 as pb
from skillclassics.rules.v1 import rules_pb2_grpc

from libs.engines.generals import CODES, parse_record
from libs.runtime import RunningServer
from services.fairness.service import FairnessService
from services.rules_generals.service import generals_rules_service
from tests.callers import RULES_CALLERS, Callers
from tests.libs.engines.generals.helpers import FULL_BLACK, FULL_WHITE, random_setup
from tests.support import ServiceProcess, backend_channel, refused, start_in_process

Stub = rules_pb2_grpc.RulesServiceStub
SEED_KEY = base64.b64encode(bytes(range(32))).decode()
SEATS = [pb.SeatAssignment(seat=0, player_id="ann"), pb.SeatAssignment(seat=1, player_id="ben")]
RANKS = set(CODES.values())


@dataclass
class Stack:
    fairness: RunningServer
    rules: RunningServer


@pytest.fixture
async def stack(database_url: str, tmp_path: Path) -> AsyncIterator[Stack]:
    fairness = await start_in_process(
        "fairness", FairnessService, database_url, {"FAIRNESS_SEED_KEY": SEED_KEY}, DATA_DIR=str(tmp_path)
    )
    rules = await start_in_process(
        "rules-generals", generals_rules_service, database_url, {"FAIRNESS_ADDRESS": fairness.address}
    )
    yield Stack(fairness, rules)
    await rules.stop(grace=0.5)
    await fairness.stop(grace=0.5)


async def commit(fairness_address: str, match_id: str) -> str:
    async with backend_channel(fairness_address, "matchmaking") as channel:
        reply = await fairness_pb2_grpc.FairnessServiceStub(channel).Commit(
            fairness_pb2.CommitRequest(match_id=match_id, idempotency_key=match_id)
        )
    commitment: str = reply.commitment
    return commitment


def create_request(match_id: str, commitment: str) -> pb.CreateMatchRequest:
    return pb.CreateMatchRequest(
        match_id=match_id,
        seats=SEATS,
        options=pb.MatchOptions(generals=gpb.GeneralsOptions()),
        time_control=pb.TimeControl(periods=3, period_ms=60_000),
        fairness_commitment=commitment,
        idempotency_key=f"create-{match_id}",
    )


async def create(stack: Stack) -> str:
    match_id = f"generals.0.{uuid.uuid4().hex[:12]}"
    commitment = await commit(stack.fairness.address, match_id)
    async with backend_channel(stack.rules.address, "matchmaking") as channel:
        await Stub(channel).CreateMatch(create_request(match_id, commitment))
    return match_id


def act(match_id: str, seat: int, text: str) -> pb.SubmitActionRequest:
    return pb.SubmitActionRequest(
        match_id=match_id,
        seat=seat,
        idempotency_key=uuid.uuid4().hex,
        action=pb.Action(generals=gpb.GeneralsAction(action=text)),
    )


async def as_seat(stub: Stub, match_id: str, seat: int) -> pb.MatchUpdate:
    update: pb.MatchUpdate = (await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=seat))).update
    return update


async def in_play(stub: Stub, match_id: str) -> pb.MatchUpdate:
    """The match once the first mover was drawn (the draw follows the second ``ready`` at once)."""
    for _ in range(200):
        update = await as_seat(stub, match_id, 0)
        if update.view.generals.phase == gpb.PHASE_PLAY and not update.view.generals.awaiting_chance:
            return update
        await asyncio.sleep(0.01)
    raise AssertionError("the first mover was never drawn")


async def set_up(stub: Stub, match_id: str, white: str, black: str) -> pb.MatchUpdate:
    for seat, text in ((1, black), (0, white)):  # Black first: either may act first
        await stub.SubmitAction(act(match_id, seat, f"setup {text}"))
        await stub.SubmitAction(act(match_id, seat, "ready"))
    return await in_play(stub, match_id)


async def watch_all(stub: Stub, match_id: str, seat: int | None) -> list[pb.MatchUpdate]:
    request = (
        pb.WatchRequest(match_id=match_id, spectator=True)
        if seat is None
        else pb.WatchRequest(match_id=match_id, seat=seat)
    )
    return [response.update async for response in stub.Watch(request)]


def opposing_ranks(update: pb.MatchUpdate, viewer: int | None) -> list[str]:
    """Every place an update could carry a rank the viewer may not see, while the game is on: pieces and
    lost pieces of the other seat (of both, for a spectator), and rank codes in the texts."""
    if update.status == pb.MATCH_STATUS_FINISHED:
        return []  # the game is over: every rank is shown (docs/generals.md)
    view = update.view.generals
    hidden = {0, 1} if viewer is None else {1 - viewer}
    found = [p.rank for p in view.pieces if p.seat in hidden and p.rank]
    found += [rank for seat in hidden for rank in view.lost[seat].ranks] if view.lost else []
    texts = [update.event.description, view.message, *(w.text for w in view.warnings), *update.legal_actions]
    if viewer is None:
        found += [word for text in texts for word in text.replace("=", " ").split() if word.upper() in RANKS]
    return found


async def test_a_whole_game_from_the_setup_never_shows_a_seat_an_opposing_rank(stack: Stack) -> None:
    match_id = await create(stack)
    rng = random.Random(4)
    async with backend_channel(stack.rules.address, "gateway") as channel:
        stub = Stub(channel)
        # During the setup each seat sees only its own arrangement; both may act, in either order.
        await stub.SubmitAction(act(match_id, 1, f"setup {random_setup(rng, 1)}"))
        white = (await as_seat(stub, match_id, 0)).view.generals
        assert list(white.pieces) == []
        assert white.phase == gpb.PHASE_SETUP
        await refused(
            stub.SubmitAction(act(match_id, 0, "a3-a4")),
            grpc.StatusCode.FAILED_PRECONDITION,
            why="ILLEGAL_ACTION",
        )
        await stub.SubmitAction(act(match_id, 1, "ready"))
        await refused(
            stub.SubmitAction(act(match_id, 1, f"setup {random_setup(rng, 1)}")),
            grpc.StatusCode.FAILED_PRECONDITION,
            why="ILLEGAL_ACTION",
        )
        await stub.SubmitAction(act(match_id, 0, f"setup {random_setup(rng, 0)}"))
        await stub.SubmitAction(act(match_id, 0, "ready"))
        update = await in_play(stub, match_id)
        assert update.view.generals.HasField("first")
        for _ in range(2000):
            if update.status == pb.MATCH_STATUS_FINISHED:
                break
            mover = update.to_move
            mine = await as_seat(stub, match_id, mover)
            moves = [a for a in mine.legal_actions if "-" in a] or list(mine.legal_actions)
            update = (await stub.SubmitAction(act(match_id, mover, rng.choice(moves)))).update
        assert update.status == pb.MATCH_STATUS_FINISHED
        streams = {seat: await watch_all(stub, match_id, seat) for seat in (0, 1, None)}
        record = await stub.GetRecord(pb.GetRecordRequest(match_id=match_id))
    for viewer, updates in streams.items():
        assert [u.sequence for u in updates] == list(range(1, update.sequence + 1))
        leaks = [(u.sequence, opposing_ranks(u, viewer)) for u in updates if opposing_ranks(u, viewer)]
        assert leaks == [], f"seat {viewer} was shown opposing ranks"
        # A setup is described to everybody without its placements.
        assert all(
            u.event.description in ("setup", "ready") for u in updates[1:5] if u.event.kind == "action"
        )
    # The record, once the game is over, reveals every rank and reads back.
    assert record.record_format == "txt"
    game = parse_record(record.record)
    assert [len(arrangement) for arrangement in game.arrangements] == [21, 21]
    assert game.termination is not None


def normalised(update: pb.MatchUpdate) -> bytes:
    """The update with what differs between two matches for reasons that are not ranks blanked out:
    the match id, the fairness commitment, and the instants and clock readings (wall-clock time)."""
    copy = pb.MatchUpdate()
    copy.CopyFrom(update)
    copy.match_id = ""
    copy.fairness_commitment = ""
    copy.server_time_ms = 0
    copy.event.at_ms = 0
    if copy.phase_deadline_ms:  # an instant too (the setup's deadline), but present in both or neither
        copy.phase_deadline_ms = 1
    for clock in copy.clocks:
        clock.remaining_ms = 0
    return copy.SerializeToString(deterministic=True)


def swapped(text: str, first: str, second: str) -> str:
    """``text``'s placements with the ranks on squares ``first`` and ``second`` exchanged."""
    ranks = dict(item.split("=") for item in text.split())
    ranks[first], ranks[second] = ranks[second], ranks[first]
    return " ".join(f"{square}={rank}" for square, rank in ranks.items())


async def test_two_matches_differing_only_in_hidden_ranks_give_white_byte_identical_streams(
    stack: Stack,
) -> None:
    # Black's 1LT and 2LT (a7, b7) swap places in the second match; neither moves nor is challenged.
    # The moves: a plain advance each, then White's Private challenges Black's Brigadier General on e5
    # (the Private loses, in both matches), then White resigns.
    black_b = swapped(FULL_BLACK, "a7", "b7")
    white_moves = ["e2-e3", "e3-e4", "e4-e5"]
    black_moves = ["e6-e5", "h6-h5", "h5-h4"]
    async with backend_channel(stack.rules.address, "gateway") as channel:
        stub = Stub(channel)
        for _attempt in range(12):  # the first mover is drawn: find two matches where it is the same
            ids = [await create(stack), await create(stack)]
            firsts = []
            for match_id, black in zip(ids, (FULL_BLACK, black_b), strict=True):
                firsts.append((await set_up(stub, match_id, FULL_WHITE, black)).view.generals.first)
            if firsts[0] == firsts[1]:
                break
        else:
            raise AssertionError("twelve pairs of matches never drew the same first mover")
        order = [black_moves, white_moves] if firsts[0] == 1 else [white_moves, black_moves]
        seats = [1, 0] if firsts[0] == 1 else [0, 1]
        for match_id in ids:
            for n in range(3):
                for seat, moves in zip(seats, order, strict=True):
                    await stub.SubmitAction(act(match_id, seat, moves[n]))
            await stub.SubmitAction(
                pb.SubmitActionRequest(
                    match_id=match_id, seat=0, idempotency_key="resign", action=pb.Action(resign=pb.Resign())
                )
            )
        streams = [await watch_all(stub, match_id, 0) for match_id in ids]
        spectators = [await watch_all(stub, match_id, None) for match_id in ids]
    challenged = [u for u in streams[0] if u.view.generals.last_move.challenge]
    assert challenged
    assert challenged[-1].view.generals.last_move.result == "defender"
    for first, second in (streams, spectators):
        assert len(first) == len(second)
        # Every update before the game's end: byte for byte, so sizes too.
        for one, other in zip(first[:-1], second[:-1], strict=True):
            assert normalised(one) == normalised(other), (one.sequence, one.event.kind)
    # Black sees its own arrangement, which differs.
    async with backend_channel(stack.rules.address, "gateway") as channel:
        blacks = [await as_seat(Stub(channel), match_id, 1) for match_id in ids]
    assert normalised(blacks[0]) != normalised(blacks[1])


async def test_kill_9_during_the_setup_keeps_the_ready_arrangement(database_url: str, stack: Stack) -> None:
    await stack.rules.stop(grace=0)  # the shard is this test's own process
    env = {"DATABASE_URL": database_url, "FAIRNESS_ADDRESS": stack.fairness.address}
    match_id = f"generals.0.{uuid.uuid4().hex[:12]}"
    commitment = await commit(stack.fairness.address, match_id)
    async with ServiceProcess("services.rules_generals", env) as service:
        async with Callers(service.address) as callers:
            stub = callers.stub(Stub, RULES_CALLERS)
            await stub.CreateMatch(create_request(match_id, commitment))
            await stub.SubmitAction(act(match_id, 1, f"setup {FULL_BLACK}"))
            await stub.SubmitAction(act(match_id, 1, "ready"))  # acknowledged: durable
            await stub.SubmitAction(act(match_id, 0, "setup a1=FLG"))
        service.kill()
        await service.start()
        async with Callers(service.address) as callers:
            stub = callers.stub(Stub, RULES_CALLERS)
            black = (await as_seat(stub, match_id, 1)).view.generals
            white = (await as_seat(stub, match_id, 0)).view.generals
            assert black.phase == gpb.PHASE_SETUP
            assert list(black.ready) == [1]
            assert len(black.pieces) == 21
            assert [(p.square, p.rank) for p in white.pieces] == [("a1", "FLG")]
            await stub.SubmitAction(act(match_id, 0, f"setup {FULL_WHITE}"))
            await stub.SubmitAction(act(match_id, 0, "ready"))
            update = await in_play(stub, match_id)
            assert update.view.generals.HasField("first")
