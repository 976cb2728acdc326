"""The go rules service over real gRPC on localhost, on SQLite and PostgreSQL: a whole 9x9 game to an
agreed count with its SGF record replayed by an independent reader (sgfmill), a handicap game, the
refusals (unreadable, not your turn, occupied, suicide, ko, a count answer outside the count), and a
SIGKILL of the service during the count, which it survives with the count and its answers intact."""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator

import grpc
import pytest
from sgfmill import boards, sgf, sgf_moves  # type: ignore[import-untyped]
from skillclassics.go.v1 import go_pb2 as gopb
from skillclassics.rules.v1 import rules_pb2 as pb
from skillclassics.rules.v1 import rules_pb2_grpc

from libs.runtime import RunningServer
from services.rules_go.service import go_rules_service
from tests.callers import RULES_CALLERS, Callers
from tests.support import ServiceProcess, backend_channel, refused, start_in_process

Stub = rules_pb2_grpc.RulesServiceStub
SEATS = [pb.SeatAssignment(seat=0, player_id="ann"), pb.SeatAssignment(seat=1, player_id="ben")]


@pytest.fixture
async def rules(database_url: str) -> AsyncIterator[RunningServer]:
    running = await start_in_process("rules-go", go_rules_service, database_url)
    yield running
    await running.stop(grace=0.5)


def create_request(match_id: str, options: gopb.GoOptions) -> pb.CreateMatchRequest:
    return pb.CreateMatchRequest(
        match_id=match_id,
        seats=SEATS,
        options=pb.MatchOptions(go=options),
        time_control=pb.TimeControl(base_ms=10 * 60_000, periods=5, period_ms=30_000),
        idempotency_key=f"create-{match_id}",
    )


async def create(address: str, options: gopb.GoOptions) -> str:
    match_id = f"go.0.{uuid.uuid4().hex[:12]}"
    async with backend_channel(address, "matchmaking") as channel:
        await Stub(channel).CreateMatch(create_request(match_id, options))
    return match_id


def act(match_id: str, seat: int, text: str) -> pb.SubmitActionRequest:
    return pb.SubmitActionRequest(
        match_id=match_id,
        seat=seat,
        idempotency_key=uuid.uuid4().hex,
        action=pb.Action(go=gopb.GoAction(action=text)),
    )


async def as_seat(stub: Stub, match_id: str, seat: int) -> pb.MatchUpdate:
    update: pb.MatchUpdate = (await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=seat))).update
    return update


async def play(stub: Stub, match_id: str, moves: list[str]) -> pb.MatchUpdate:
    """``moves`` in turn from the seat to move; the last reply's update."""
    update = await as_seat(stub, match_id, 0)
    for text in moves:
        reply = await stub.SubmitAction(act(match_id, update.to_move, text))
        update = reply.update
    return update


def check_view(view: gopb.GoView, size: int) -> None:
    assert view.size == size
    assert len(view.rows) == size
    assert all(len(row) == size and set(row) <= set("XO.") for row in view.rows)
    assert len(view.prisoners) == 2
    assert view.scoring == gopb.SCORING_AREA


async def test_a_whole_9x9_game_ends_by_the_count_and_its_sgf_replays_to_the_same_board(
    rules: RunningServer,
) -> None:
    match_id = await create(rules.address, gopb.GoOptions(size=9))
    rng = random.Random(5)
    async with backend_channel(rules.address, "gateway") as channel:
        stub = Stub(channel)
        update = await as_seat(stub, match_id, 0)
        for _ in range(40):  # forty random legal moves (captures happen), then both pass
            mover = update.to_move
            mine = await as_seat(stub, match_id, mover)
            check_view(mine.view.go, 9)
            points = [a for a in mine.legal_actions if a != "pass"]
            assert sorted(mine.view.go.legal_points) == sorted(points)
            update = (await stub.SubmitAction(act(match_id, mover, rng.choice(points)))).update
        update = await play(stub, match_id, ["pass", "pass"])
        view = update.view.go
        assert view.phase == gopb.PHASE_COUNT
        assert view.score.result  # the count is shown with its parts
        parts = view.score.black
        assert parts.total == parts.stones + parts.territory  # area scoring
        # Either may answer first: both seats see what they may do, though Black is named to move.
        for seat in (0, 1):
            mine = await as_seat(stub, match_id, seat)
            assert mine.to_move == 0
            assert list(mine.legal_actions) == ["accept", "resume"]
        # The seat that has accepted is shown.
        update = (await stub.SubmitAction(act(match_id, 1, "accept"))).update
        assert list(update.view.go.accepted) == [1]
        final = (await stub.SubmitAction(act(match_id, 0, "accept"))).update
        assert final.status == pb.MATCH_STATUS_FINISHED
        assert final.result.termination == pb.TERMINATION_SCORED
        assert final.view.go.phase == gopb.PHASE_OVER
        record = await stub.GetRecord(pb.GetRecordRequest(match_id=match_id))
    assert record.record_format == "sgf"
    game = sgf.Sgf_game.from_string(record.record)
    assert game.get_root().get("RE") == view.score.result
    assert game.get_root().get("RU") == "Chinese"
    board, plays = sgf_moves.get_setup_and_moves(game)
    assert isinstance(board, boards.Board)
    for colour, move in plays:
        if move is not None:
            board.play(move[0], move[1], colour)
    rows = [
        "".join({"b": "X", "w": "O", None: "."}[board.get(row, col)] for col in range(9))
        for row in range(8, -1, -1)
    ]
    assert rows == list(final.view.go.rows)


async def test_a_handicap_game_starts_with_blacks_stones_and_white_to_move(rules: RunningServer) -> None:
    match_id = await create(rules.address, gopb.GoOptions(size=13, handicap=4))
    async with backend_channel(rules.address, "gateway") as channel:
        got = await Stub(channel).GetMatch(pb.GetMatchRequest(match_id=match_id, seat=1))
    view = got.update.view.go
    assert got.update.to_move == 1
    assert view.handicap == 4
    assert view.komi == 0.5
    stones = [(row, col) for row, text in enumerate(view.rows) for col, c in enumerate(text) if c == "X"]
    assert len(stones) == 4
    assert got.options.go.handicap == 4


async def test_bad_actions_are_refused_with_their_reasons(rules: RunningServer) -> None:
    match_id = await create(rules.address, gopb.GoOptions(size=9))
    async with backend_channel(rules.address, "gateway") as channel:
        stub = Stub(channel)
        await refused(
            stub.SubmitAction(act(match_id, 0, "I5")),
            grpc.StatusCode.INVALID_ARGUMENT,
            why="MALFORMED_ACTION",
        )
        await refused(
            stub.SubmitAction(act(match_id, 0, "K5")),
            grpc.StatusCode.INVALID_ARGUMENT,
            why="MALFORMED_ACTION",
        )
        await refused(
            stub.SubmitAction(act(match_id, 1, "E5")),
            grpc.StatusCode.FAILED_PRECONDITION,
            why="NOT_YOUR_TURN",
        )
        await refused(
            stub.SubmitAction(act(match_id, 0, "accept")),
            grpc.StatusCode.FAILED_PRECONDITION,
            why="ILLEGAL_ACTION",
        )
        # A ko (columns C-F, rows 4-6):   row 6  . X O .
        #                                 row 5  X O X O   Black E5 has just taken White's D5
        #                                 row 4  . X O .
        update = await play(stub, match_id, ["D6", "E6", "C5", "F5", "D4", "E4", "A1", "D5", "E5"])
        assert list(update.view.go.last_captured) == ["D5"]
        assert update.view.go.ko == "D5"
        assert list(update.view.go.prisoners) == [1, 0]
        captured_at = update.sequence
        # White retaking at D5 at once would recreate the position: refused, nothing logged.
        problem = await refused(
            stub.SubmitAction(act(match_id, 1, "D5")),
            grpc.StatusCode.FAILED_PRECONDITION,
            why="ILLEGAL_ACTION",
        )
        assert "ko" in problem.message
        await refused(
            stub.SubmitAction(act(match_id, 1, "E5")),
            grpc.StatusCode.FAILED_PRECONDITION,
            "occupied",
            why="ILLEGAL_ACTION",
        )
        # White plays elsewhere, Black answers elsewhere, and the retake is legal now.
        update = await play(stub, match_id, ["A9", "B1", "D5"])
        assert list(update.view.go.last_captured) == ["E5"]
        assert list(update.view.go.prisoners) == [1, 1]
        assert update.view.go.move_number == 12
        assert update.sequence == captured_at + 3  # the refusals logged nothing


async def test_kill_9_during_the_count_keeps_the_count_and_its_answers(database_url: str) -> None:
    env = {"DATABASE_URL": database_url}
    async with ServiceProcess("services.rules_go", env) as service:
        async with Callers(service.address) as callers:
            stub = callers.stub(Stub, RULES_CALLERS)
            match_id = f"go.0.{uuid.uuid4().hex[:12]}"
            await stub.CreateMatch(create_request(match_id, gopb.GoOptions(size=9)))
            await play(stub, match_id, ["C3", "G7", "C7", "G3", "pass", "pass"])
            reply = await stub.SubmitAction(act(match_id, 0, "accept"))  # acknowledged: it is durable
            before = reply.update
            assert list(before.view.go.accepted) == [0]
        service.kill()
        await service.start()
        async with Callers(service.address) as callers:
            stub = callers.stub(Stub, RULES_CALLERS)
            after = await as_seat(stub, match_id, 1)
            assert after.view.go.phase == gopb.PHASE_COUNT
            assert list(after.view.go.accepted) == [0]
            assert after.view.go.rows == before.view.go.rows
            assert after.to_move == 1
            final = (await stub.SubmitAction(act(match_id, 1, "accept"))).update
            assert final.result.termination == pb.TERMINATION_SCORED
            assert final.result.HasField("winner")
            assert final.result.winner == 1
