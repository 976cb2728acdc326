"""Skirmish Chess through rules-chess over real gRPC, on SQLite and PostgreSQL: duels scripted to the
outcome each test needs, the duel clocks and countdown on the runtime's timed phases, every draw rule, a
king lost in a duel, the PGN record, and a SIGKILL of the service in the middle of a duel."""

from __future__ import annotations

import asyncio
import io
import uuid
from pathlib import Path

import chess.pgn
import grpc
import pytest
from skillclassics.chess.v1 import chess_pb2
from skillclassics.rules.v1 import rules_pb2 as pb
from skillclassics.rules.v1 import rules_pb2_grpc

from libs.engines.skirmish import Position, new_duel
from tests.callers import RULES_CALLERS, Callers
from tests.libs.engines.skirmish_chess.lines import line_to
from tests.services.rules_chess.test_rules_chess_service import get, move, play
from tests.support import ServiceProcess, refused

Stub = rules_pb2_grpc.RulesServiceStub
MINUTE = 60_000
ATTACKER, DEFENDER, DRAW = True, False, None


async def create(
    stub: Stub,
    *,
    fen: str = "",
    draw_rule: chess_pb2.SkirmishDrawRule.ValueType = chess_pb2.SKIRMISH_DRAW_RULE_BOTH_STAY,
    preset: chess_pb2.SkirmishPreset.ValueType = chess_pb2.SKIRMISH_PRESET_CLASSIC,
    duel_ms: int = 0,
    increment_ms: int = 0,
    countdown_ms: int = 0,
) -> str:
    match_id = f"chess.0.{uuid.uuid4().hex[:12]}"
    await stub.CreateMatch(
        pb.CreateMatchRequest(
            match_id=match_id,
            seats=[pb.SeatAssignment(seat=0, player_id="alice"), pb.SeatAssignment(seat=1, player_id="bob")],
            options=pb.MatchOptions(
                chess=chess_pb2.ChessOptions(
                    ruleset=chess_pb2.RULESET_FIDE,
                    variant=chess_pb2.VARIANT_SKIRMISH,
                    initial_fen=fen,
                    skirmish=chess_pb2.SkirmishOptions(
                        preset=preset,
                        draw_rule=draw_rule,
                        clock_base_ms=duel_ms,
                        clock_increment_ms=increment_ms,
                        countdown_ms=countdown_ms,
                    ),
                )
            ),
            time_control=pb.TimeControl(base_ms=5 * MINUTE),
            idempotency_key=f"create-{match_id}",
        )
    )
    return match_id


async def play_duel(stub: Stub, match_id: str, winner: bool | None) -> pb.MatchUpdate:
    """Play the duel being played to an end with ``winner`` (the duel's White), each move by the seat the
    service names; returns the last update."""
    update = await get(stub, match_id)
    duel = update.view.chess.duel
    assert update.view.chess.HasField("duel")
    start = Position.from_fen(duel.fen)  # (the duel as it stands; its earlier moves are not needed)
    seats = {True: duel.white_seat, False: duel.black_seat}
    for uci in line_to(new_duel(start), winner):
        mover = seats[update.view.chess.duel.fen.endswith(" w")]
        assert update.to_move == mover
        assert uci in (await get(stub, match_id, mover)).legal_actions
        reply = await stub.SubmitAction(move(match_id, mover, uci))
        update = reply.update
    assert not update.view.chess.HasField("duel")
    return update


async def test_a_capture_is_decided_by_a_duel_with_its_own_clocks(stub: Stub) -> None:
    match_id = await create(stub, duel_ms=30_000, increment_ms=2_000)
    reply = await play(stub, match_id, "e4", "d5", "exd5")
    update = reply.update
    chess_view = update.view.chess
    assert chess_view.variant == chess_pb2.VARIANT_SKIRMISH
    assert chess_view.HasField("duel")
    duel = chess_view.duel
    assert (duel.capture_san, duel.attacker, duel.defender, duel.white_seat, duel.black_seat) == (
        "exd5",
        "P",
        "p",
        0,
        1,
    )
    assert duel.fen == "rnbqk/ppppp/5/PPPPP/RNBQK w"
    assert list(duel.clock_ms) == [30_000, 30_000]
    # The main clocks stop; the duel's deadline is White's duel clock from the capture.
    assert not any(c.running for c in update.clocks)
    assert update.phase_deadline_ms == update.event.at_ms + 30_000
    assert update.to_move == 0
    # Black may not move for White, nor offer a draw during the duel.
    failed = grpc.StatusCode.FAILED_PRECONDITION
    await refused(stub.SubmitAction(move(match_id, 1, "a4a3")), failed, "White's move", why="NOT_YOUR_TURN")
    offer = pb.SubmitActionRequest(
        match_id=match_id,
        seat=1,
        idempotency_key=uuid.uuid4().hex,
        action=pb.Action(chess=chess_pb2.ChessAction(draw=chess_pb2.DRAW_ACTION_OFFER)),
    )
    await refused(stub.SubmitAction(offer), failed, "duel", why="ILLEGAL_ACTION")
    await refused(stub.SubmitAction(move(match_id, 0, "a2a4")), failed, "double step", why="ILLEGAL_ACTION")
    done = await play_duel(stub, match_id, DEFENDER)
    assert list(done.view.chess.moves_san) == ["e4", "d5", "exd5-"]
    assert done.view.chess.fen == "rnbqkbnr/ppp1pppp/8/3p4/8/8/PPPP1PPP/RNBQKBNR b KQkq - 0 2"
    assert done.phase_deadline_ms == 0
    assert [c.running for c in done.clocks] == [False, True]  # Black's main clock runs again
    record = done.view.chess.duels[0]
    assert (record.capture_san, record.outcome) == ("exd5-", chess_pb2.DUEL_OUTCOME_DEFENDER_WON)
    assert record.end == "king_captured"


@pytest.mark.parametrize(
    ("rule", "fen"),
    [
        (
            chess_pb2.SKIRMISH_DRAW_RULE_BOTH_REMOVED,
            "rnbqkbnr/ppp1pppp/8/8/8/8/PPPP1PPP/RNBQKBNR b KQkq - 0 2",
        ),
        (
            chess_pb2.SKIRMISH_DRAW_RULE_BOTH_STAY,
            "rnbqkbnr/ppp1pppp/8/3p4/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 2",
        ),
        (
            chess_pb2.SKIRMISH_DRAW_RULE_DEFENDER_WINS,
            "rnbqkbnr/ppp1pppp/8/3p4/8/8/PPPP1PPP/RNBQKBNR b KQkq - 0 2",
        ),
    ],
)
async def test_each_draw_rule(stub: Stub, rule: chess_pb2.SkirmishDrawRule.ValueType, fen: str) -> None:
    match_id = await create(stub, draw_rule=rule)
    await play(stub, match_id, "e4", "d5", "exd5")
    done = await play_duel(stub, match_id, DRAW)
    assert done.view.chess.moves_san[-1] == "exd5="
    assert done.view.chess.fen == fen


async def test_a_king_lost_in_a_duel_ends_the_game_and_the_record_reads_as_pgn(stub: Stub) -> None:
    # White's bishop, pinned, takes the pinning bishop and loses; Black takes the exposed king and wins.
    match_id = await create(stub, fen="4k3/8/8/8/1b6/8/3B4/4K3 w - - 0 1")
    await play(stub, match_id, "Bxb4")
    update = await play_duel(stub, match_id, DEFENDER)
    assert "b4e1" in (await get(stub, match_id, 1)).legal_actions
    await play(stub, match_id, "Bxe1", first_seat=1)
    done = await play_duel(stub, match_id, ATTACKER)
    assert done.status == pb.MATCH_STATUS_FINISHED
    assert done.result.termination == pb.TERMINATION_KING_CAPTURED
    assert done.result.winner == 1
    assert list(done.view.chess.moves_san) == ["Bxb4-", "Bb4xe1+"]
    assert update.view.chess.fen == "4k3/8/8/8/1b6/8/8/4K3 b - - 0 1"
    record = await stub.GetRecord(pb.GetRecordRequest(match_id=match_id))
    stream = io.StringIO(record.record)
    parts = []
    while (part := chess.pgn.read_game(stream)) is not None:
        parts.append(part)
    assert len(parts) == 3
    assert all(part.errors == [] for part in parts)
    assert parts[-1].headers["Result"] == "0-1"
    assert "[%duel Bxb4-" in record.record
    assert "[%duel Bb4xe1+" in record.record


async def test_a_duel_clock_that_runs_out_loses_the_duel_and_the_countdown_comes_first(stub: Stub) -> None:
    match_id = await create(stub, duel_ms=1_000, countdown_ms=400)
    reply = await play(stub, match_id, "e4", "d5", "exd5")
    update = reply.update
    assert update.view.chess.duel.counting_down
    assert update.phase_deadline_ms == update.event.at_ms + 400
    assert list((await get(stub, match_id, 0)).legal_actions) == []
    countdown = stub.SubmitAction(move(match_id, 0, "a2a3"))
    await refused(countdown, grpc.StatusCode.FAILED_PRECONDITION, "countdown", why="NOT_YOUR_TURN")
    await asyncio.sleep(0.7)
    started = await get(stub, match_id)
    assert started.event.kind == "deadline"
    assert not started.view.chess.duel.counting_down
    assert started.phase_deadline_ms == started.event.at_ms + 1_000
    await stub.SubmitAction(move(match_id, 0, "a2a3"))
    await asyncio.sleep(1.4)  # Black (the defender) lets its duel clock run out
    after = await get(stub, match_id)
    assert list(after.view.chess.moves_san) == ["e4", "d5", "exd5+"]
    assert after.view.chess.duels[0].end == "timeout"
    assert [c.running for c in after.clocks] == [False, True]


async def test_a_random_setup_needs_the_fairness_service(stub: Stub) -> None:
    random_setup = create(stub, preset=chess_pb2.SKIRMISH_PRESET_RANDOM)
    await refused(random_setup, grpc.StatusCode.UNAVAILABLE, "fairness", why="NOT_CONFIGURED")


async def test_skirmish_options_are_checked(stub: Stub) -> None:
    await refused(create(stub, countdown_ms=40_000), grpc.StatusCode.INVALID_ARGUMENT, "countdown")
    await refused(create(stub, duel_ms=700_000), grpc.StatusCode.INVALID_ARGUMENT, "clock_base_ms")


async def test_kill_9_in_the_middle_of_a_duel_loses_nothing(database_url: str, tmp_path: Path) -> None:
    async with ServiceProcess("services.rules_chess", {"DATABASE_URL": database_url}) as service:
        async with Callers(service.address) as callers:
            stub = callers.stub(Stub, RULES_CALLERS)
            match_id = await create(stub, duel_ms=60_000)
            await play(stub, match_id, "e4", "d5", "exd5")
            await stub.SubmitAction(move(match_id, 0, "a2a3"))
            before = await get(stub, match_id)
        service.kill()
        await asyncio.sleep(1.0)
        await service.start()
        async with Callers(service.address) as callers:
            stub = callers.stub(Stub, RULES_CALLERS)
            after = await get(stub, match_id)
            assert after.event.kind == "resumed"
            assert list(after.view.chess.duel.moves_uci) == ["a2a3"]
            assert after.view.chess.duel.fen == before.view.chess.duel.fen
            # The outage is charged to nobody: Black's duel deadline moved on by the time it was down.
            down = after.event.at_ms - before.event.at_ms
            assert after.phase_deadline_ms >= before.phase_deadline_ms + down - 1_500
            assert not any(c.running for c in after.clocks)
            done = await play_duel(stub, match_id, ATTACKER)
            assert list(done.view.chess.moves_san) == ["e4", "d5", "exd5+"]


@pytest.mark.parametrize(
    ("fen", "capture", "winner", "rule", "after", "termination"),
    [
        # A failed en passant: only the capturing pawn goes.
        ("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2", "exd6", DEFENDER, 0, "4k3/8/8/3p4/8/8/8/4K3 b - - 0 2", None),
        # A failed promotion capture promotes nothing.
        ("3rk3/4P3/8/8/8/8/8/K7 w - - 0 1", "exd8=N", DEFENDER, 0, "3rk3/8/8/8/8/8/8/K7 b - - 0 1", None),
        # A rook removed by a failed capture takes its castling right.
        ("4k3/8/8/8/8/8/7p/4K2R w K - 0 1", "Rxh2", DEFENDER, 0, "4k3/8/8/8/8/8/7p/4K3 b - - 0 1", None),
        # A king that attacks and loses loses the game.
        ("4k3/8/8/8/8/8/3p4/4K3 w - - 0 1", "Kxd2", DEFENDER, 0, "", pb.TERMINATION_KING_CAPTURED),
        # A drawn duel that removes both leaves the opponent stalemated...
        (
            "k7/2K5/8/8/8/4B3/7R/7n w - - 0 1",
            "Rxh1",
            DRAW,
            chess_pb2.SKIRMISH_DRAW_RULE_BOTH_REMOVED,
            "k7/2K5/8/8/8/4B3/8/8 b - - 0 1",
            pb.TERMINATION_STALEMATE,
        ),
        # ...or mated.
        (
            "k7/1nK5/8/8/8/4B3/8/1R5B w - - 0 1",
            "Rxb7",
            DRAW,
            chess_pb2.SKIRMISH_DRAW_RULE_BOTH_REMOVED,
            "k7/2K5/8/8/8/4B3/8/7B b - - 0 1",
            pb.TERMINATION_CHECKMATE,
        ),
    ],
)
async def test_special_situations_through_the_service(
    stub: Stub,
    fen: str,
    capture: str,
    winner: bool | None,
    rule: chess_pb2.SkirmishDrawRule.ValueType,
    after: str,
    termination: pb.Termination.ValueType | None,
) -> None:
    match_id = await create(stub, fen=fen, draw_rule=rule or chess_pb2.SKIRMISH_DRAW_RULE_BOTH_STAY)
    await play(stub, match_id, capture)
    done = await play_duel(stub, match_id, winner)
    if after:
        assert done.view.chess.fen == after
    if termination is None:
        assert done.status == pb.MATCH_STATUS_LIVE
    else:
        assert done.result.termination == termination
