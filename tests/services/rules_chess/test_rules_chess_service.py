"""The chess rules service over real gRPC on localhost, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import grpc
import pytest
from skillclassics.chess.v1 import chess_pb2
from skillclassics.rules.v1 import rules_pb2 as pb
from skillclassics.rules.v1 import rules_pb2_grpc

from libs.match.actor import rebuild
from libs.match.model import EventKind, MatchEvent
from libs.match.service import RulesService
from libs.match.store import MatchStore
from libs.persistence import Database
from libs.runtime import RunningServer
from services.rules_chess.family import ChessFamily
from services.rules_chess.service import chess_rules_service
from tests.callers import RULES_CALLERS, Callers
from tests.services.rules_chess.conftest import start_rules_chess
from tests.support import ServiceProcess, backend_channel, refused, start_in_process

ROOT = Path(__file__).resolve().parents[3]
Stub = rules_pb2_grpc.RulesServiceStub
MINUTE = 60_000
STALEMATE_IN_ONE = "7k/4Q3/6K1/8/8/8/8/8 w - - 0 1"  # 1. Qf7 stalemates Black: White wins on material


def new_id() -> str:
    return f"chess.0.{uuid.uuid4().hex[:12]}"


async def create(
    stub: Stub,
    match_id: str | None = None,
    *,
    base_ms: int = 5 * MINUTE,
    ruleset: chess_pb2.Ruleset.ValueType = chess_pb2.RULESET_CONTEST,
    fen: str = "",
    first_move_timeout_ms: int = 0,
    disconnect_forfeit_ms: int = 0,
) -> str:
    match_id = match_id or new_id()
    await stub.CreateMatch(
        pb.CreateMatchRequest(
            match_id=match_id,
            seats=[pb.SeatAssignment(seat=0, player_id="alice"), pb.SeatAssignment(seat=1, player_id="bob")],
            options=pb.MatchOptions(chess=chess_pb2.ChessOptions(ruleset=ruleset, initial_fen=fen)),
            time_control=pb.TimeControl(base_ms=base_ms),
            idempotency_key=f"create-{match_id}",
            first_move_timeout_ms=first_move_timeout_ms,
            disconnect_forfeit_ms=disconnect_forfeit_ms,
        )
    )
    return match_id


def move(match_id: str, seat: int, notation: str, key: str | None = None) -> pb.SubmitActionRequest:
    return pb.SubmitActionRequest(
        match_id=match_id,
        seat=seat,
        idempotency_key=uuid.uuid4().hex if key is None else key,
        action=pb.Action(chess=chess_pb2.ChessAction(move=notation)),
    )


async def play(stub: Stub, match_id: str, *moves: str, first_seat: int = 0) -> pb.SubmitActionResponse:
    reply = None
    for ply, notation in enumerate(moves, start=first_seat):
        reply = await stub.SubmitAction(move(match_id, ply % 2, notation))
    assert reply is not None
    answer: pb.SubmitActionResponse = reply
    return answer


async def list_all(
    stub: Stub, *statuses: pb.MatchStatus.ValueType, page_size: int = 0
) -> list[pb.MatchSummary]:
    """Every match ``ListMatches`` lists (with ``statuses``), page after page until the last."""
    summaries: list[pb.MatchSummary] = []
    token = ""
    while True:
        reply = await stub.ListMatches(
            pb.ListMatchesRequest(statuses=statuses, page_size=page_size, page_token=token)
        )
        summaries.extend(reply.matches)
        token = reply.next_page_token
        if not token:
            return summaries


async def get(stub: Stub, match_id: str, seat: int | None = None) -> pb.MatchUpdate:
    request = pb.GetMatchRequest(match_id=match_id)
    if seat is None:
        request.spectator = True
    else:
        request.seat = seat
    reply = await stub.GetMatch(request)
    update: pb.MatchUpdate = reply.update
    return update


async def watch(
    stub: Stub, match_id: str, from_sequence: int, until_sequence: int, within: float = 5.0
) -> list[pb.MatchUpdate]:
    call = stub.Watch(pb.WatchRequest(match_id=match_id, spectator=True, from_sequence=from_sequence))
    updates: list[pb.MatchUpdate] = []
    try:
        async with asyncio.timeout(within):
            async for reply in call:
                updates.append(reply.update)
                if reply.update.sequence >= until_sequence:
                    break
    finally:
        call.cancel()
    return updates


async def test_a_whole_game_to_checkmate_with_pgn(stub: Stub) -> None:
    match_id = await create(stub)
    created = await get(stub, match_id, seat=0)
    assert created.status == pb.MATCH_STATUS_WAITING
    assert created.to_move == 0
    assert "e2e4" in created.legal_actions
    reply = await play(stub, match_id, "f3", "e7e5", "g4", "Qh4#")
    update = reply.update
    assert update.status == pb.MATCH_STATUS_FINISHED
    assert update.result.termination == pb.TERMINATION_CHECKMATE
    assert update.result.winner == 1
    assert list(update.result.score) == [0.0, 1.0]
    assert list(update.view.chess.moves_san) == ["f3", "e5", "g4", "Qh4#"]
    assert update.event.description == "Qh4#"
    record = await stub.GetRecord(pb.GetRecordRequest(match_id=match_id))
    assert record.record_format == "pgn"
    assert '[White "alice"]' in record.record
    assert "[%clk 0:05:00]" in record.record
    assert record.record.rstrip().endswith("0-1")
    await refused(stub.SubmitAction(move(match_id, 0, "e4")), grpc.StatusCode.FAILED_PRECONDITION, "over")


async def test_bad_actions_are_refused_with_clear_codes(stub: Stub) -> None:
    match_id = await create(stub)
    failed, invalid = grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT
    await refused(stub.SubmitAction(move(match_id, 1, "e5")), failed, "White", why="NOT_YOUR_TURN")
    await refused(stub.SubmitAction(move(match_id, 0, "e2e5")), failed, "e2e5", why="ILLEGAL_ACTION")
    await refused(stub.SubmitAction(move(match_id, 0, "zz9")), invalid, "zz9", why="MALFORMED_ACTION")
    await refused(stub.SubmitAction(move(match_id, 5, "e4")), invalid, "seat", why="INVALID_FIELDS")
    empty = pb.SubmitActionRequest(match_id=match_id, seat=0, idempotency_key="k", action=pb.Action())
    await refused(stub.SubmitAction(empty), invalid, why="INVALID_FIELDS", fields=("action.kind",))
    await refused(
        stub.SubmitAction(move(match_id, 0, "e4", key="")),
        invalid,
        why="INVALID_FIELDS",
        fields=("idempotency_key",),
    )
    nope = move("chess.0.nope", 0, "e4")
    await refused(stub.SubmitAction(nope), grpc.StatusCode.NOT_FOUND, "no match", why="MATCH_NOT_FOUND")
    await refused(stub.SubmitAction(move("chess.7.other", 0, "e4")), failed, "shard 7", why="WRONG_STATE")
    await refused(stub.SubmitAction(move("go.0.other", 0, "e4")), invalid, "go match", why="WRONG_FAMILY")
    await refused(
        stub.SubmitAction(move("not an id", 0, "e4")), invalid, why="INVALID_FIELDS", fields=("match_id",)
    )
    # nothing of that changed the match
    assert (await get(stub, match_id)).sequence == 1


def draw(match_id: str, seat: int, kind: chess_pb2.DrawAction.ValueType) -> pb.SubmitActionRequest:
    return pb.SubmitActionRequest(
        match_id=match_id,
        seat=seat,
        idempotency_key=uuid.uuid4().hex,
        action=pb.Action(chess=chess_pb2.ChessAction(draw=kind)),
    )


async def test_acting_for_the_other_seat_is_refused(stub: Stub) -> None:
    """The rules service acts for the seat the request names (the gateway derives it from the caller's
    token and refuses a seat that is not theirs with PERMISSION_DENIED). Whatever that seat tries on the
    other seat's behalf is a rules error: FAILED_PRECONDITION with the reason; reusing the other seat's
    idempotency key is ALREADY_EXISTS."""
    match_id = await create(stub, ruleset=chess_pb2.RULESET_FIDE)
    failed = grpc.StatusCode.FAILED_PRECONDITION
    # Black plays White's move on White's turn.
    await refused(stub.SubmitAction(move(match_id, 1, "e2e4")), failed, "it is White's turn")
    first = await stub.SubmitAction(move(match_id, 0, "e4", key="white-1"))
    # White plays Black's reply on Black's turn.
    await refused(stub.SubmitAction(move(match_id, 0, "e7e5")), failed, "it is Black's turn")
    # Black, on its own turn, moves one of White's pawns.
    await refused(stub.SubmitAction(move(match_id, 1, "d2d4")), failed, "not a legal move")
    # White offers a draw; White cannot accept (or decline) it for Black.
    await stub.SubmitAction(draw(match_id, 0, chess_pb2.DRAW_ACTION_OFFER))
    await refused(
        stub.SubmitAction(draw(match_id, 0, chess_pb2.DRAW_ACTION_ACCEPT)), failed, "no draw offer from Black"
    )
    await refused(
        stub.SubmitAction(draw(match_id, 0, chess_pb2.DRAW_ACTION_DECLINE)),
        failed,
        "no draw offer from Black",
    )
    # Black cannot replay White's acknowledged action under White's key.
    await refused(
        stub.SubmitAction(move(match_id, 1, "e4", key="white-1")),
        grpc.StatusCode.ALREADY_EXISTS,
        "different action",
    )
    update = await get(stub, match_id)
    assert update.sequence == first.sequence + 1  # only the offer was added
    assert list(update.view.chess.moves_san) == ["e4"]
    assert update.view.chess.draw_offer_by == 0
    assert update.status == pb.MATCH_STATUS_LIVE


async def test_promotion_must_name_its_piece(stub: Stub) -> None:
    match_id = await create(stub, fen="8/4P3/8/8/8/k7/8/4K3 w - - 0 1")
    await refused(stub.SubmitAction(move(match_id, 0, "e7e8")), grpc.StatusCode.FAILED_PRECONDITION, "promot")
    reply = await stub.SubmitAction(move(match_id, 0, "e7e8q"))
    assert reply.update.view.chess.moves_san[-1] == "e8=Q"


async def test_bad_matches_are_refused(stub: Stub) -> None:
    invalid = grpc.StatusCode.INVALID_ARGUMENT
    base = pb.CreateMatchRequest(
        match_id=new_id(),
        seats=[pb.SeatAssignment(seat=0, player_id="a"), pb.SeatAssignment(seat=1, player_id="b")],
        time_control=pb.TimeControl(base_ms=MINUTE),
        idempotency_key="k",
    )
    same_player = pb.CreateMatchRequest()
    same_player.CopyFrom(base)
    same_player.seats[1].player_id = "a"
    await refused(stub.CreateMatch(same_player), invalid, "both seats")
    no_clock = pb.CreateMatchRequest()
    no_clock.CopyFrom(base)
    no_clock.ClearField("time_control")
    await refused(stub.CreateMatch(no_clock), invalid, "time_control")
    bad_fen = pb.CreateMatchRequest()
    bad_fen.CopyFrom(base)
    bad_fen.options.chess.initial_fen = "not a fen"
    await refused(stub.CreateMatch(bad_fen), invalid, "FEN")
    one_seat = pb.CreateMatchRequest()
    one_seat.CopyFrom(base)
    del one_seat.seats[1]
    await refused(stub.CreateMatch(one_seat), invalid, "seats 0 and 1")
    ghosted = pb.CreateMatchRequest()
    ghosted.CopyFrom(base)
    ghosted.stand_in_after_ms = 120_000  # chess has no stand-in (docs/match-runtime.md, "Stand-ins")
    await refused(
        stub.CreateMatch(ghosted), invalid, "no stand-in", why="INVALID_FIELDS", fields=("stand_in_after_ms",)
    )
    await stub.CreateMatch(base)
    assert (await stub.CreateMatch(base)).update.sequence == 1  # the same key: the original answer
    again = pb.CreateMatchRequest()
    again.CopyFrom(base)
    again.idempotency_key = "other"
    await refused(stub.CreateMatch(again), grpc.StatusCode.ALREADY_EXISTS, "exists")


async def test_a_retried_create_gets_the_original_answer_and_another_request_is_refused(stub: Stub) -> None:
    match_id = new_id()
    request = pb.CreateMatchRequest(
        match_id=match_id,
        seats=[pb.SeatAssignment(seat=0, player_id="alice"), pb.SeatAssignment(seat=1, player_id="bob")],
        options=pb.MatchOptions(chess=chess_pb2.ChessOptions(ruleset=chess_pb2.RULESET_FIDE)),
        time_control=pb.TimeControl(base_ms=3 * MINUTE),
        idempotency_key="create-once",
    )
    original = await stub.CreateMatch(request)
    assert original.update.sequence == 1
    await play(stub, match_id, "e4", "e5")
    # The same request again (seats listed in another order is the same request): the original answer,
    # although the match has moved on.
    again = pb.CreateMatchRequest()
    again.CopyFrom(request)
    again.seats.reverse()
    assert await stub.CreateMatch(again) == original

    exists = grpc.StatusCode.ALREADY_EXISTS
    other_key = pb.CreateMatchRequest()
    other_key.CopyFrom(request)
    other_key.idempotency_key = "create-twice"
    await refused(stub.CreateMatch(other_key), exists, "different idempotency key")
    other_seats = pb.CreateMatchRequest()
    other_seats.CopyFrom(request)
    other_seats.seats[1].player_id = "carol"
    await refused(stub.CreateMatch(other_seats), exists, "different players")
    other_rules = pb.CreateMatchRequest()
    other_rules.CopyFrom(request)
    other_rules.options.chess.ruleset = chess_pb2.RULESET_CONTEST
    await refused(stub.CreateMatch(other_rules), exists, "different options")
    other_clock = pb.CreateMatchRequest()
    other_clock.CopyFrom(request)
    other_clock.time_control.base_ms = 5 * MINUTE
    other_clock.first_move_timeout_ms = 30_000
    await refused(stub.CreateMatch(other_clock), exists, "different first_move_timeout_ms, time_control")
    # None of that touched the match.
    update = await get(stub, match_id)
    assert update.sequence == 3
    assert list(update.view.chess.moves_san) == ["e4", "e5"]


async def test_a_retried_action_gets_the_original_answer(stub: Stub) -> None:
    match_id = await create(stub)
    first = await stub.SubmitAction(move(match_id, 0, "e4", key="m1"))
    await stub.SubmitAction(move(match_id, 1, "e5", key="m2"))
    retry = await stub.SubmitAction(move(match_id, 0, "e4", key="m1"))
    assert retry.sequence == first.sequence
    assert list(retry.update.view.chess.moves_san) == ["e4"]
    await refused(
        stub.SubmitAction(move(match_id, 0, "d4", key="m1")),
        grpc.StatusCode.ALREADY_EXISTS,
        "different action",
    )
    assert list((await get(stub, match_id)).view.chess.moves_san) == ["e4", "e5"]


async def test_resignation_ends_the_match_at_once(stub: Stub) -> None:
    match_id = await create(stub)
    await play(stub, match_id, "e4")
    reply = await stub.SubmitAction(
        pb.SubmitActionRequest(
            match_id=match_id, seat=0, idempotency_key="r", action=pb.Action(resign=pb.Resign())
        )
    )
    assert reply.update.result.termination == pb.TERMINATION_RESIGNATION
    assert reply.update.result.winner == 1


async def test_stalemate_goes_to_the_tiebreak_in_contest_games(stub: Stub) -> None:
    match_id = await create(stub, fen=STALEMATE_IN_ONE)
    reply = await play(stub, match_id, "Qf7")
    result = reply.update.result
    assert result.termination == pb.TERMINATION_TIEBREAK
    assert result.cause == pb.TERMINATION_STALEMATE
    assert result.tiebreak_step == "material"
    assert result.winner == 0


async def test_fide_draw_by_agreement(stub: Stub) -> None:
    match_id = await create(stub, ruleset=chess_pb2.RULESET_FIDE)
    await play(stub, match_id, "e4")
    draw = pb.SubmitActionRequest(
        match_id=match_id,
        seat=1,
        idempotency_key="offer",
        action=pb.Action(chess=chess_pb2.ChessAction(draw=chess_pb2.DRAW_ACTION_OFFER)),
    )
    offered = await stub.SubmitAction(draw)
    assert offered.update.view.chess.draw_offer_by == 1
    accept = pb.SubmitActionRequest(
        match_id=match_id,
        seat=0,
        idempotency_key="accept",
        action=pb.Action(chess=chess_pb2.ChessAction(draw=chess_pb2.DRAW_ACTION_ACCEPT)),
    )
    result = (await stub.SubmitAction(accept)).update.result
    assert result.termination == pb.TERMINATION_DRAW_AGREED
    assert not result.HasField("winner")
    assert list(result.score) == [0.5, 0.5]


async def test_the_flag_falls_on_its_own_and_a_late_move_is_refused(stub: Stub) -> None:
    match_id = await create(stub, base_ms=400)
    reply = await play(stub, match_id, "e4")  # Black's clock starts now
    updates = await watch(stub, match_id, reply.sequence, reply.sequence + 1)
    result = updates[-1].result
    assert result.termination == pb.TERMINATION_TIMEOUT
    assert result.winner == 0
    assert updates[-1].clocks[1].remaining_ms == 0
    await refused(stub.SubmitAction(move(match_id, 1, "e5")), grpc.StatusCode.FAILED_PRECONDITION, "over")


async def test_a_player_who_never_moves_aborts_the_match(stub: Stub) -> None:
    match_id = await create(stub, first_move_timeout_ms=300)
    updates = await watch(stub, match_id, 1, 2)
    assert updates[-1].status == pb.MATCH_STATUS_ABORTED
    assert updates[-1].result.termination == pb.TERMINATION_ABORTED
    assert not updates[-1].result.HasField("winner")


async def test_disconnect_forfeit_and_its_cancellation(stub: Stub) -> None:
    match_id = await create(stub, disconnect_forfeit_ms=400)
    for seat in (0, 1):
        await stub.SetPresence(pb.SetPresenceRequest(match_id=match_id, seat=seat, connected=True))
    await play(stub, match_id, "e4", "e5")
    # Black drops and comes back in time: nothing happens.
    await stub.SetPresence(pb.SetPresenceRequest(match_id=match_id, seat=1, connected=False))
    await asyncio.sleep(0.1)
    await stub.SetPresence(pb.SetPresenceRequest(match_id=match_id, seat=1, connected=True))
    await asyncio.sleep(0.5)
    assert (await get(stub, match_id)).status == pb.MATCH_STATUS_LIVE
    # White drops for good and forfeits.
    sequence = (
        await stub.SetPresence(pb.SetPresenceRequest(match_id=match_id, seat=0, connected=False))
    ).sequence
    updates = await watch(stub, match_id, sequence, sequence + 1)
    assert updates[-1].result.termination == pb.TERMINATION_DISCONNECT_FORFEIT
    assert updates[-1].result.winner == 1


async def test_a_watcher_resuming_from_sequence_n_misses_nothing(stub: Stub) -> None:
    match_id = await create(stub)
    moves = ["e4", "e5", "Nf3", "Nc6", "Bb5", "a6"]
    first = asyncio.ensure_future(watch(stub, match_id, 0, 1 + len(moves)))
    await asyncio.sleep(0.05)
    await play(stub, match_id, *moves[:3])
    resumed = asyncio.ensure_future(watch(stub, match_id, 2, 1 + len(moves)))
    await asyncio.sleep(0.05)
    await play(stub, match_id, *moves[3:], first_seat=1)
    everything = await first
    assert [u.sequence for u in everything] == list(range(1, 2 + len(moves)))
    assert [u.sequence for u in await resumed] == list(range(3, 2 + len(moves)))
    assert [u.event.description for u in everything[1:]] == ["e4", "e5", "Nf3", "Nc6", "Bb5", "a6"]
    assert list(everything[-1].view.chess.moves_san) == moves


async def test_a_write_after_the_writer_closed_is_unavailable_not_internal(
    server: RunningServer, stub: Stub
) -> None:
    """Shutting down closes the store's writer; a write that comes after it (a create, a move, a
    presence report) is refused UNAVAILABLE with a reason, so the caller retries, not INTERNAL, and the
    match is as it was."""
    match_id = await create(stub)
    await play(stub, match_id, "e4")
    service = server.service
    assert isinstance(service, RulesService)
    assert service.runtime is not None
    await service.runtime.store.close()
    for call in (
        stub.CreateMatch(
            pb.CreateMatchRequest(
                match_id=new_id(),
                seats=[pb.SeatAssignment(seat=0, player_id="a"), pb.SeatAssignment(seat=1, player_id="b")],
                options=pb.MatchOptions(chess=chess_pb2.ChessOptions(ruleset=chess_pb2.RULESET_CONTEST)),
                time_control=pb.TimeControl(base_ms=MINUTE),
                idempotency_key="late",
            )
        ),
        stub.SubmitAction(move(match_id, 1, "e5")),
        stub.SetPresence(pb.SetPresenceRequest(match_id=match_id, seat=0, connected=True)),
    ):
        await refused(call, grpc.StatusCode.UNAVAILABLE, "shutting down")
    update = await get(stub, match_id)
    assert (update.sequence, list(update.view.chess.moves_san)) == (2, ["e4"])
    assert [m.match_id for m in await list_all(stub)] == [match_id]  # the refused create left nothing


async def test_a_restart_resumes_every_match_with_its_clocks(database_url: str) -> None:
    first = await start_rules_chess(database_url)
    async with Callers(first.address) as callers:
        stub = callers.stub(Stub, RULES_CALLERS)
        match_id = await create(stub)
        await play(stub, match_id, "e4", "e5", "Nf3")
        before = await get(stub, match_id)
    await first.stop(grace=0.5)
    await asyncio.sleep(0.3)
    second = await start_rules_chess(database_url)
    try:
        async with Callers(second.address) as callers:
            stub = callers.stub(Stub, RULES_CALLERS)
            after = await get(stub, match_id)
            # One more event: play resumed, the time the shard was down charged to nobody.
            assert (after.sequence, after.event.kind) == (before.sequence + 1, "resumed")
            assert list(after.view.chess.moves_san) == ["e4", "e5", "Nf3"]
            # Black's clock did not run while the service was down (docs/match-runtime.md, "Server
            # downtime is not a player's time"): at most the bound of the time between the answers.
            elapsed = after.server_time_ms - before.server_time_ms
            assert elapsed >= 300
            assert before.clocks[1].remaining_ms - after.clocks[1].remaining_ms <= DOWNTIME_BOUND_MS
            assert after.clocks[0].remaining_ms == before.clocks[0].remaining_ms
            assert after.clocks[1].running
            await play(stub, match_id, "Nc6", first_seat=1)
            listed = await list_all(stub, pb.MATCH_STATUS_LIVE)
            assert match_id in [m.match_id for m in listed]
    finally:
        await second.stop(grace=0.5)


async def test_list_matches_serves_every_status_with_its_filter(database_url: str) -> None:
    first = await start_rules_chess(database_url)
    async with Callers(first.address) as callers:
        stub = callers.stub(Stub, RULES_CALLERS)
        finished = await create(stub)
        await play(stub, finished, "f3", "e5", "g4", "Qh4#")
        aborted = await create(stub, first_move_timeout_ms=300)
        await watch(stub, aborted, 1, 2)  # nobody moves: aborted after 0.3 s
        live = await create(stub)
        await play(stub, live, "e4")
        waiting = await create(stub)
        expected: dict[str, tuple[int, int]] = {
            finished: (pb.MATCH_STATUS_FINISHED, 5),
            aborted: (pb.MATCH_STATUS_ABORTED, 2),
            live: (pb.MATCH_STATUS_LIVE, 2),
            waiting: (pb.MATCH_STATUS_WAITING, 1),
        }
        await _check_listing(stub, expected)
        await refused(
            stub.ListMatches(pb.ListMatchesRequest(statuses=[pb.MATCH_STATUS_UNSPECIFIED])),
            grpc.StatusCode.INVALID_ARGUMENT,
            why="INVALID_FIELDS",
            fields=("statuses[0]",),
        )
    await first.stop(grace=0.5)
    # After a restart only the unfinished matches are in memory: the listing comes from the database.
    # The unfinished ones have one more event: play resumed after the restart.
    expected[live] = (pb.MATCH_STATUS_LIVE, 3)
    expected[waiting] = (pb.MATCH_STATUS_WAITING, 2)
    second = await start_rules_chess(database_url)
    try:
        async with Callers(second.address) as callers:
            await _check_listing(callers.stub(Stub, RULES_CALLERS), expected)
    finally:
        await second.stop(grace=0.5)


async def _check_listing(stub: Stub, expected: dict[str, tuple[int, int]]) -> None:
    """Every filter gives exactly the matches in those states, by match id, with seats and sequence."""

    async def listed(*statuses: pb.MatchStatus.ValueType) -> dict[str, tuple[int, int]]:
        summaries = await list_all(stub, *statuses, page_size=1)  # a page per match: tokens too
        ids = [m.match_id for m in summaries]
        assert ids == sorted(ids)
        for summary in summaries:
            assert summary.family == "chess"
            assert [(s.seat, s.player_id) for s in summary.seats] == [(0, "alice"), (1, "bob")]
        return {m.match_id: (m.status, m.sequence) for m in summaries}

    def only(*statuses: int) -> dict[str, tuple[int, int]]:
        return {k: v for k, v in expected.items() if v[0] in statuses}

    assert await listed(pb.MATCH_STATUS_FINISHED) == only(pb.MATCH_STATUS_FINISHED)
    assert await listed(pb.MATCH_STATUS_ABORTED) == only(pb.MATCH_STATUS_ABORTED)
    both = await listed(pb.MATCH_STATUS_FINISHED, pb.MATCH_STATUS_ABORTED)
    assert both == only(pb.MATCH_STATUS_FINISHED, pb.MATCH_STATUS_ABORTED)
    assert len(both) == 2
    assert await listed(pb.MATCH_STATUS_LIVE) == only(pb.MATCH_STATUS_LIVE)
    assert await listed(pb.MATCH_STATUS_WAITING) == only(pb.MATCH_STATUS_WAITING)
    assert await listed() == expected


async def test_kill_9_mid_game_loses_no_acknowledged_move(database_url: str, tmp_path: Path) -> None:
    await _kill_9(database_url, tmp_path)


CLOCK_TOLERANCE_MS = 25
"""Two processes read the same wall clock once each at start: their Unix milliseconds may differ by a
rounding step or a wall-clock adjustment between the two starts. Everything else is measured."""
DOWNTIME_BOUND_MS = 1_500
"""The most of a shard's downtime a player may be charged in these tests (the documented bound is about a
second: docs/match-runtime.md, "Server downtime is not a player's time"; generous for a loaded machine)."""
DOWN_S = 3.0
"""How long the killed shard stays down before it is started again."""


async def _kill_9(database_url: str, tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()

    def now_ms() -> float:
        return loop.time() * 1000

    async with ServiceProcess("services.rules_chess", {"DATABASE_URL": database_url}) as service:
        async with Callers(service.address) as callers:
            stub = callers.stub(Stub, RULES_CALLERS)
            match_id = await create(stub)
            acknowledged = ["e4", "e5", "Nf3", "Nc6", "Bc4"]
            await play(stub, match_id, *acknowledged)
            before = await get(stub, match_id)
        killed_at = now_ms()
        service.kill()
        await asyncio.sleep(DOWN_S)
        spawned_at = now_ms()
        await service.start()
        async with Callers(service.address) as callers:
            stub = callers.stub(Stub, RULES_CALLERS)
            asked_after = now_ms()
            after = await get(stub, match_id)
            answered_after = now_ms()
            assert list(after.view.chess.moves_san) == acknowledged
            # Black was to move before the kill and still is; White's clock did not run.
            assert [c.running for c in before.clocks] == [c.running for c in after.clocks] == [False, True]
            assert after.clocks[0].remaining_ms == before.clocks[0].remaining_ms
            # Server downtime is not a player's time. Black was charged all of it before: the seconds
            # the shard was dead, then its start. Now, of the time from the kill to the second answer, the
            # seconds it was dead are not charged at all...
            charged = before.clocks[1].remaining_ms - after.clocks[1].remaining_ms
            assert -CLOCK_TOLERANCE_MS - 300 <= charged <= answered_after - spawned_at + DOWNTIME_BOUND_MS
            # One more event: play resumed after the outage...
            assert before.sequence == 6
            assert (after.sequence, after.event.kind) == (7, "resumed")
            # ...and, as the shard logged it, the outage credited covers at least the time the process was
            # dead, and Black is charged at most the bound beyond what followed the resumption (the shard
            # serves within milliseconds of it; this test's health poll and reconnection take longer).
            log = await _log_of(database_url, match_id)
            resumed = log[-1]
            assert resumed.kind is EventKind.RESUMED
            assert resumed.payload["down_ms"] >= spawned_at - killed_at - CLOCK_TOLERANCE_MS
            assert resumed.payload["down_from_ms"] + resumed.payload["down_ms"] == resumed.at_ms
            assert charged <= after.server_time_ms - resumed.at_ms + DOWNTIME_BOUND_MS
            # A replay of the log gives the same clocks (the model is deterministic).
            replayed = rebuild(ChessFamily(), log)
            at = after.server_time_ms
            assert [replayed.clock.remaining_ms(seat, at) for seat in (0, 1)] == [
                c.remaining_ms for c in after.clocks
            ]
            assert asked_after >= spawned_at
            reply = await stub.SubmitAction(move(match_id, 1, "Nf6"))
            assert reply.sequence == 8
            assert list(reply.update.view.chess.moves_san) == [*acknowledged, "Nf6"]
            # Black's clock mark for Nf6 (the PGN's [%clk]) is what the clock showed: no downtime in it.
            log = await _log_of(database_url, match_id)
            record = rebuild(ChessFamily(), log)
            mark = record.clock_marks[-1]
            assert mark.seat == 1
            assert mark.remaining_ms == reply.update.clocks[1].remaining_ms
            # (as the clock ran on from the second reading: the outage is not in it)
            assert mark.remaining_ms == after.clocks[1].remaining_ms - (mark.at_ms - after.server_time_ms)


async def _log_of(database_url: str, match_id: str) -> list[MatchEvent]:
    """``match_id``'s log as committed (read from the database)."""
    db = Database(database_url)
    try:
        store = MatchStore(db, "chess", "0")
        try:
            return await store.load_log(match_id)
        finally:
            await store.close()
    finally:
        await db.dispose()


async def test_wake_ups_come_from_the_clock_service(database_url: str) -> None:
    from skillclassics.clock.v1 import clock_pb2, clock_pb2_grpc

    from services.clock.service import ClockService

    clock = await start_in_process("clock", ClockService, database_url)
    rules = await start_rules_chess(database_url, {"CLOCK_ADDRESS": clock.address})
    try:
        async with Callers(rules.address) as callers:
            stub = callers.stub(Stub, RULES_CALLERS)
            match_id = await create(stub, base_ms=300)
            reply = await play(stub, match_id, "d4")
            updates = await watch(stub, match_id, reply.sequence, reply.sequence + 1)
            assert updates[-1].result.termination == pb.TERMINATION_TIMEOUT
        async with backend_channel(clock.address, "rules-chess-0") as channel:  # the shard, for its timers
            # The expiry is acknowledged once handled: soon nothing is pending for the rules shard.
            clock_stub = clock_pb2_grpc.ClockServiceStub(channel)
            # Each look waits 0.2 s for a pending expiry; the acknowledgement may still be in flight,
            # so keep looking (with a pause) for up to 10 s rather than a fixed number of tries.
            deadline = asyncio.get_running_loop().time() + 10
            while True:
                call = clock_stub.WatchExpirations(clock_pb2.WatchExpirationsRequest(owner="rules-chess-0"))
                try:
                    async with asyncio.timeout(0.2):
                        await call.read()
                except TimeoutError:
                    break
                finally:
                    call.cancel()
                if asyncio.get_running_loop().time() > deadline:
                    pytest.fail("the rules service never acknowledged its wake-up")
                await asyncio.sleep(0.1)
    finally:
        await rules.stop(grace=0.5)
        await clock.stop(grace=0.5)


async def test_results_reach_the_fairness_service_even_after_it_was_down(
    database_url: str, tmp_path: Path
) -> None:
    import base64

    from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc

    fairness_env = {
        "DATABASE_URL": database_url,
        "DATA_DIR": str(tmp_path),
        "FAIRNESS_SEED_KEY": base64.b64encode(bytes(32)).decode(),
    }
    async with ServiceProcess("services.fairness", fairness_env) as fairness:
        match_id = new_id()
        async with backend_channel(fairness.address, "matchmaking") as channel:
            committed = await fairness_pb2_grpc.FairnessServiceStub(channel).Commit(
                fairness_pb2.CommitRequest(match_id=match_id, idempotency_key="k")
            )
        fairness.kill()  # the fairness service is down when the match ends
        rules = await start_rules_chess(database_url, {"FAIRNESS_ADDRESS": fairness.address})
        try:
            async with Callers(rules.address) as callers:
                stub = callers.stub(Stub, RULES_CALLERS)
                request = pb.CreateMatchRequest(
                    match_id=match_id,
                    seats=[
                        pb.SeatAssignment(seat=0, player_id="a"),
                        pb.SeatAssignment(seat=1, player_id="b"),
                    ],
                    time_control=pb.TimeControl(base_ms=MINUTE),
                    fairness_commitment=committed.commitment,
                    idempotency_key="k",
                )
                await stub.CreateMatch(request)
                await play(stub, match_id, "f3", "e5", "g4", "Qh4#")
            await fairness.start()
            async with backend_channel(fairness.address, "rules-chess-0") as channel:  # the match's shard
                fairness_stub = fairness_pb2_grpc.FairnessServiceStub(channel)
                for _ in range(50):
                    status = await fairness_stub.GetCommitment(
                        fairness_pb2.GetCommitmentRequest(match_id=match_id)
                    )
                    if status.state == fairness_pb2.MATCH_STATE_FINISHED:
                        break
                    await asyncio.sleep(0.1)
                assert status.state == fairness_pb2.MATCH_STATE_FINISHED
                revealed = await fairness_stub.Reveal(fairness_pb2.RevealRequest(match_id=match_id))
                assert revealed.commitment == committed.commitment
        finally:
            await rules.stop(grace=0.5)


def test_an_empty_shard_number_is_refused_rather_than_read_as_shard_0() -> None:
    from libs.runtime import ConfigError, ServiceConfig

    config = ServiceConfig.from_env("rules-chess", {"DATABASE_URL": "sqlite+aiosqlite:///unused.db"})
    with pytest.raises(ConfigError, match="RULES_SHARD is set but empty"):
        chess_rules_service(config, {"RULES_SHARD": ""})
    assert chess_rules_service(config, {"RULES_SHARD": "3"}).shard == 3
