"""The backgammon rules service over real gRPC on localhost, with the fairness service, on SQLite and
PostgreSQL: whole money games and matches, the cube, resign offers, refusals, the MAT record, a SIGKILL
mid-game, and the dice recomputed from the revealed fairness proof."""

from __future__ import annotations

import asyncio
import base64
import random
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from skillclassics.backgammon.v1 import backgammon_pb2 as bg
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc
from skillclassics.rules.v1 import rules_pb2 as pb
from skillclassics.rules.v1 import rules_pb2_grpc

from libs.engines.backgammon import BackgammonOptions, BackgammonState, Variant, parse_mat, replay
from libs.fairness import DrawKind, DrawSpec, Proof, draw_values, stream_key, verify
from libs.runtime import RunningServer
from services.fairness.service import FairnessService
from services.rules_backgammon.service import backgammon_rules_service
from tests.callers import RULES_CALLERS, Callers
from tests.support import ServiceProcess, backend_channel, refused, start_in_process

Stub = rules_pb2_grpc.RulesServiceStub
SEED_KEY = base64.b64encode(bytes(range(32))).decode()
SEATS = [pb.SeatAssignment(seat=0, player_id="ann"), pb.SeatAssignment(seat=1, player_id="ben")]
MAX_ACTIONS = 3000
Chooser = Callable[[pb.MatchUpdate], str]


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
        "rules-backgammon", backgammon_rules_service, database_url, {"FAIRNESS_ADDRESS": fairness.address}
    )
    running = Stack(fairness, rules)
    yield running
    await running.rules.stop(grace=0.5)
    await fairness.stop(grace=0.5)


async def commit(fairness_address: str, match_id: str) -> str:
    async with backend_channel(fairness_address, "matchmaking") as channel:
        reply = await fairness_pb2_grpc.FairnessServiceStub(channel).Commit(
            fairness_pb2.CommitRequest(match_id=match_id, idempotency_key=match_id)
        )
    commitment: str = reply.commitment
    return commitment


def create_request(match_id: str, commitment: str, options: bg.BackgammonOptions) -> pb.CreateMatchRequest:
    return pb.CreateMatchRequest(
        match_id=match_id,
        seats=SEATS,
        options=pb.MatchOptions(backgammon=options),
        time_control=pb.TimeControl(base_ms=30 * 60_000),
        fairness_commitment=commitment,
        idempotency_key=f"create-{match_id}",
    )


async def create(stack: Stack, options: bg.BackgammonOptions | None = None) -> str:
    match_id = f"backgammon.0.{uuid.uuid4().hex[:12]}"
    commitment = await commit(stack.fairness.address, match_id)
    async with backend_channel(stack.rules.address, "matchmaking") as channel:
        await Stub(channel).CreateMatch(
            create_request(match_id, commitment, options or bg.BackgammonOptions())
        )
    return match_id


def act(match_id: str, seat: int, text: str) -> pb.SubmitActionRequest:
    return pb.SubmitActionRequest(
        match_id=match_id,
        seat=seat,
        idempotency_key=uuid.uuid4().hex,
        action=pb.Action(backgammon=bg.BackgammonAction(action=text)),
    )


def chooser(seed: int, *, take: bool = True, accept: bool = False) -> Chooser:
    """A player that picks a random legal play from the view's list (by its notation or its number),
    rolls rather than doubles, takes (or drops) doubles, rejects (or accepts) resign offers, and says
    continue between games."""
    rng = random.Random(seed)

    def choose(update: pb.MatchUpdate) -> str:
        view = update.view.backgammon
        if view.phase == bg.PHASE_MOVE:
            index = rng.randrange(len(view.legal_plays))
            return view.legal_plays[index] if rng.random() < 0.7 else str(index + 1)
        return {
            bg.PHASE_ROLL_OR_DOUBLE: "roll",
            bg.PHASE_DOUBLED: "take" if take else "drop",
            bg.PHASE_RESIGN_OFFERED: "accept" if accept else "reject",
            bg.PHASE_BETWEEN_GAMES: "continue",
        }[view.phase]

    return choose


def is_over(update: pb.MatchUpdate) -> bool:
    return update.status in (pb.MATCH_STATUS_FINISHED, pb.MATCH_STATUS_ABORTED)


def waits_for_a_seat(update: pb.MatchUpdate) -> bool:
    """Whether a seat is to act (not while the dice are being drawn)."""
    drawing = update.view.backgammon.phase in (bg.PHASE_OPENING, bg.PHASE_ROLLING)
    return update.HasField("to_move") and not drawing


async def current(stub: Stub, match_id: str) -> pb.MatchUpdate:
    """The match once no draw is pending (the dice are drawn right after the action that asks for them)."""
    for _ in range(200):
        update: pb.MatchUpdate = (await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=0))).update
        if is_over(update):
            return update
        if waits_for_a_seat(update):  # as the mover sees it (with their legal actions)
            mine: pb.MatchUpdate = (
                await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=update.to_move))
            ).update
            return mine
        await asyncio.sleep(0.01)
    raise AssertionError(f"{match_id} never had a seat to move")


async def play_out(stub: Stub, match_id: str, choose: Chooser, *, limit: int = MAX_ACTIONS) -> pb.MatchUpdate:
    """Play ``match_id`` for both seats until it ends; every view is checked on the way."""
    update = await current(stub, match_id)
    for _ in range(limit):
        if is_over(update):
            return update
        check_view(update)
        reply = await stub.SubmitAction(act(match_id, update.to_move, choose(update)))
        update = reply.update if is_over(reply.update) else await current(stub, match_id)
    raise AssertionError(f"{match_id} did not end within {limit} actions")


def check_view(update: pb.MatchUpdate) -> None:
    """What every view shows: the board (15 or 3 checkers a side), pips, the dice and the plays of a
    turn being played, the cube."""
    view = update.view.backgammon
    assert len(view.board.points) == 25
    assert view.board.points[0] == 0
    checkers = 3 if view.variant == bg.VARIANT_HYPERGAMMON else 15
    white = sum(p for p in view.board.points if p > 0) + view.board.bar[0] + view.board.off[0]
    black = -sum(p for p in view.board.points if p < 0) + view.board.bar[1] + view.board.off[1]
    assert (white, black) == (checkers, checkers)
    assert len(view.pips) == 2
    assert len(view.score) == 2
    assert view.cube_value >= 1
    if view.phase == bg.PHASE_MOVE:
        assert len(view.dice) == 2
        assert all(1 <= d <= 6 for d in view.dice)
        assert view.legal_plays
        # The plays the view lists are exactly the plays among the mover's legal actions.
        assert sorted(view.legal_plays) == sorted(
            a for a in update.legal_actions if not a.startswith("resign")
        )
    else:
        assert not view.legal_plays


async def watch_all(stub: Stub, match_id: str, seat: int | None) -> list[pb.MatchUpdate]:
    request = (
        pb.WatchRequest(match_id=match_id, spectator=True)
        if seat is None
        else pb.WatchRequest(match_id=match_id, seat=seat)
    )
    return [response.update async for response in stub.Watch(request)]


async def revealed_proof(stack: Stack, match_id: str) -> Proof:
    async with backend_channel(stack.fairness.address, "gateway") as channel:  # as for a player's proof
        fairness = fairness_pb2_grpc.FairnessServiceStub(channel)
        for _ in range(100):
            try:
                revealed = await fairness.Reveal(fairness_pb2.RevealRequest(match_id=match_id))
                return Proof.from_json(revealed.proof_json)
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.1)  # the result reaches fairness through the outbox
    raise AssertionError("the fairness stream was never finished")


def recomputed_dice(proof: Proof) -> list[tuple[int, int]]:
    """Every die of the match, recomputed from the revealed seeds (not read from the proof's values)."""
    key = stream_key(proof.server_seed, proof.match_id, {c.seat: c.seed for c in proof.client_seeds})
    count = sum(1 for d in proof.draws if d.stream == "dice")
    dice = [draw_values(key, "dice", index, DrawSpec(DrawKind.DICE, 2, 0)) for index in range(count)]
    return [(d[0], d[1]) for d in dice]


def replay_from(
    options: BackgammonOptions, updates: list[pb.MatchUpdate], dice: list[tuple[int, int]]
) -> BackgammonState:
    """The match rebuilt from the logged actions and the recomputed dice, in log order."""
    steps: list[tuple[int, str] | tuple[int, ...]] = []
    rolls = iter(dice)
    for update in updates:
        event = update.event
        if event.kind == "chance":
            assert event.draw.stream == "dice"
            steps.append(next(rolls))
        elif event.kind == "action":
            steps.append((event.seat, event.description))
    return replay(options, steps)


# -- tests -----------------------------------------------------------------------------------------------


async def test_a_backgammon_match_needs_a_fairness_commitment(stack: Stack) -> None:
    async with backend_channel(stack.rules.address, "matchmaking") as channel:
        await refused(
            Stub(channel).CreateMatch(create_request("backgammon.0.nocommit", "", bg.BackgammonOptions())),
            grpc.StatusCode.INVALID_ARGUMENT,
            "fairness_commitment",
        )
        # Options the engine refuses are refused with its reason.
        commitment = await commit(stack.fairness.address, "backgammon.0.badoptions")
        await refused(
            Stub(channel).CreateMatch(
                create_request("backgammon.0.badoptions", commitment, bg.BackgammonOptions(beavers=True))
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "need the doubling cube",
        )


async def test_a_whole_money_game_is_played_from_the_dice_of_the_proof(stack: Stack) -> None:
    match_id = await create(stack)
    async with backend_channel(stack.rules.address, "gateway") as channel:  # playing for both seats
        stub = Stub(channel)
        final = await play_out(stub, match_id, chooser(1))
        assert final.status == pb.MATCH_STATUS_FINISHED
        assert final.result.termination == pb.TERMINATION_BEAR_OFF
        winner = final.result.winner
        view = final.view.backgammon
        assert view.phase == bg.PHASE_OVER
        assert view.board.off[winner] == 15
        assert view.pips[winner] == 0
        assert view.board.off[1 - winner] < 15
        assert list(final.result.score) == ([1.0, 0.0] if winner == 0 else [0.0, 1.0])
        assert view.message
        assert view.last_play
        assert view.HasField("last_seat")
        seen = {seat: await watch_all(stub, match_id, seat) for seat in (0, 1)}
        spectator = await watch_all(stub, match_id, None)
        record = await stub.GetRecord(pb.GetRecordRequest(match_id=match_id))

    # Nothing is hidden: both seats and spectators get every update, in order, with the same view.
    assert [u.sequence for u in seen[0]] == list(range(1, final.sequence + 1))
    for theirs in (seen[1], spectator):
        assert [u.view for u in theirs] == [u.view for u in seen[0]]
    moves = [u for u in seen[0] if u.view.backgammon.phase == bg.PHASE_MOVE]
    assert moves
    assert all(len(u.view.backgammon.dice) == 2 for u in moves)

    # The record is a MAT file that reads back with the same result.
    assert record.record_format == "mat"
    assert '; [Match ID "' + match_id + '"]' in record.record
    mat = parse_mat(record.record)
    assert mat.match_to == 0
    assert len(mat.games) == 1
    assert mat.names == ("ann", "ben")

    # The dice are the fairness stream's: the proof verifies, every draw the record lists is in it, and
    # the match replayed from the logged plays with dice recomputed from the seeds ends where it ended.
    proof = await revealed_proof(stack, match_id)
    assert verify(proof).ok
    dice = recomputed_dice(proof)
    assert [tuple(d.values) for d in record.fairness_draws] == dice
    assert [(d.stream, d.index, d.kind, d.count) for d in record.fairness_draws] == [
        ("dice", n, "dice", 2) for n in range(len(dice))
    ]
    state = replay_from(BackgammonOptions(), seen[0], dice)
    assert list(state.position.points) == list(view.board.points)
    assert state.result is not None
    assert state.result.winner == winner
    # Each turn's dice in the views are the recomputed ones (opening ties aside, a roll's dice are the
    # draw just before the turn).
    shown = [
        tuple(u.view.backgammon.dice) for u in seen[0] if u.event.kind == "chance" and u.view.backgammon.dice
    ]
    assert set(shown) <= set(dice) | {(b, a) for a, b in dice}


async def test_a_resign_offer_accepted_ends_the_game(stack: Stack) -> None:
    match_id = await create(stack)
    async with backend_channel(stack.rules.address, "gateway") as channel:
        stub = Stub(channel)
        update = await current(stub, match_id)
        mover = update.to_move
        assert "resign single" in update.legal_actions
        assert "resign gammon" not in update.legal_actions  # gammons are not scored at this table
        offered = (await stub.SubmitAction(act(match_id, mover, "resign single"))).update
        assert offered.to_move == 1 - mover
        view = offered.view.backgammon
        assert (view.phase, view.resign_offered) == (bg.PHASE_RESIGN_OFFERED, 1)
        await refused(
            stub.SubmitAction(act(match_id, 1 - mover, "roll")),
            grpc.StatusCode.FAILED_PRECONDITION,
            "accept or reject",
            why="ILLEGAL_ACTION",
        )
        ended = (await stub.SubmitAction(act(match_id, 1 - mover, "accept"))).update
    assert ended.status == pb.MATCH_STATUS_FINISHED
    assert ended.result.termination == pb.TERMINATION_RESIGNATION_ACCEPTED
    assert ended.result.winner == 1 - mover
    assert ended.view.backgammon.resign_offered == 0


async def test_a_double_dropped_ends_the_game_at_the_stake_before_it(stack: Stack) -> None:
    match_id = await create(stack, bg.BackgammonOptions(cube=True))
    async with backend_channel(stack.rules.address, "gateway") as channel:
        stub = Stub(channel)
        update = await current(stub, match_id)
        # The opening roll is played at once; the other seat's turn starts with the choice to double.
        update = (await stub.SubmitAction(act(match_id, update.to_move, "1"))).update
        update = await current(stub, match_id)
        view = update.view.backgammon
        assert view.phase == bg.PHASE_ROLL_OR_DOUBLE
        assert (view.cube_value, view.HasField("cube_owner"), view.cube_offered) == (1, False, 0)
        assert sorted(a for a in update.legal_actions if not a.startswith("resign")) == ["double", "roll"]
        doubler = update.to_move
        doubled = (await stub.SubmitAction(act(match_id, doubler, "double"))).update
        view = doubled.view.backgammon
        assert (view.phase, doubled.to_move, view.cube_offered) == (bg.PHASE_DOUBLED, 1 - doubler, 2)
        dropped = (await stub.SubmitAction(act(match_id, 1 - doubler, "drop"))).update
    assert dropped.result.termination == pb.TERMINATION_DOUBLE_DROPPED
    assert dropped.result.winner == doubler
    assert max(dropped.result.score) == 1.0


async def test_a_double_taken_turns_the_cube_to_the_taker(stack: Stack) -> None:
    match_id = await create(stack, bg.BackgammonOptions(cube=True))
    async with backend_channel(stack.rules.address, "gateway") as channel:
        stub = Stub(channel)
        update = await current(stub, match_id)
        await stub.SubmitAction(act(match_id, update.to_move, "1"))
        update = await current(stub, match_id)
        doubler = update.to_move
        await stub.SubmitAction(act(match_id, doubler, "double"))
        await stub.SubmitAction(act(match_id, 1 - doubler, "take"))
        update = await current(stub, match_id)  # the doubler's dice are drawn at once
        view = update.view.backgammon
        assert (view.cube_value, view.cube_owner, view.cube_offered) == (2, 1 - doubler, 0)
        assert update.to_move == doubler
        assert view.phase == bg.PHASE_MOVE
        assert len(view.dice) == 2


async def test_a_three_point_match_with_the_continue_step(stack: Stack) -> None:
    options = bg.BackgammonOptions(variant=bg.VARIANT_HYPERGAMMON, match_to=3)
    match_id = await create(stack, options)
    between: list[pb.MatchUpdate] = []
    choose = chooser(7)

    def recording(update: pb.MatchUpdate) -> str:
        if update.view.backgammon.phase == bg.PHASE_BETWEEN_GAMES:
            between.append(update)
        return choose(update)

    async with backend_channel(stack.rules.address, "gateway") as channel:
        stub = Stub(channel)
        final = await play_out(stub, match_id, recording)
        updates = await watch_all(stub, match_id, 0)
        record = await stub.GetRecord(pb.GetRecordRequest(match_id=match_id))
    assert final.result.termination == pb.TERMINATION_MATCH_POINTS
    assert final.result.cause == pb.TERMINATION_BEAR_OFF
    view = final.view.backgammon
    assert view.match_to == 3
    assert max(view.score) == 3
    assert view.score[final.result.winner] == 3
    assert list(final.result.score) == [float(s) for s in view.score]
    games = view.game_number
    assert games >= 3  # no cube, no gammons: one point a game
    # Between games both seats confirm: the first "continue" shows one seat confirmed, the next game
    # starts after the second.
    assert len(between) == 2 * (games - 1)
    assert [list(u.view.backgammon.continued) for u in between[:2]] == [[], [0]]
    numbers = [u.view.backgammon.game_number for u in updates]
    assert numbers == sorted(numbers)
    assert numbers[-1] == games
    mat = parse_mat(record.record)
    assert mat.match_to == 3
    assert len(mat.games) == games


async def test_bad_actions_are_refused_with_their_reasons(stack: Stack) -> None:
    match_id = await create(stack)
    async with backend_channel(stack.rules.address, "gateway") as channel:
        stub = Stub(channel)
        update = await current(stub, match_id)
        mover = update.to_move
        plays = list(update.view.backgammon.legal_plays)
        await refused(
            stub.SubmitAction(act(match_id, mover, "24-18")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "cannot read",
            why="MALFORMED_ACTION",
        )
        await refused(
            stub.SubmitAction(act(match_id, 1 - mover, plays[0])),
            grpc.StatusCode.FAILED_PRECONDITION,
            why="NOT_YOUR_TURN",
        )
        illegal = next(p for p in ("24/18", "13/7", "6/5", "8/7", "24/23") if p not in plays)
        problem = await refused(
            stub.SubmitAction(act(match_id, mover, illegal)),
            grpc.StatusCode.FAILED_PRECONDITION,
            "is not a legal play",
            why="ILLEGAL_ACTION",
        )
        high, low = sorted(update.view.backgammon.dice, reverse=True)
        assert f"with {high}-{low}" in problem.message
        await refused(
            stub.SubmitAction(act(match_id, mover, str(len(plays) + 1))),
            grpc.StatusCode.FAILED_PRECONDITION,
            why="ILLEGAL_ACTION",
        )
        await refused(
            stub.SubmitAction(act(match_id, mover, "double")),  # no cube at this table
            grpc.StatusCode.FAILED_PRECONDITION,
            why="ILLEGAL_ACTION",
        )
        await refused(
            stub.SubmitAction(
                pb.SubmitActionRequest(match_id=match_id, seat=mover, idempotency_key="c", action=pb.Action())
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
        )
        # Nothing was logged by the refusals; the play by its number is accepted and described in notation.
        reply = await stub.SubmitAction(act(match_id, mover, "1"))
        assert reply.update.event.description == plays[0]
        assert reply.update.view.backgammon.last_play == plays[0]
        assert reply.sequence == update.sequence + 1


async def test_kill_9_mid_game_loses_no_acknowledged_action(database_url: str, stack: Stack) -> None:
    await stack.rules.stop(grace=0)  # the shard is this test's own process (one owner per shard)
    match_id = f"backgammon.0.{uuid.uuid4().hex[:12]}"
    commitment = await commit(stack.fairness.address, match_id)
    env = {"DATABASE_URL": database_url, "FAIRNESS_ADDRESS": stack.fairness.address}
    choose = chooser(3)
    acknowledged: list[str] = []
    async with ServiceProcess("services.rules_backgammon", env) as service:
        async with Callers(service.address) as callers:
            stub = callers.stub(Stub, RULES_CALLERS)
            await stub.CreateMatch(create_request(match_id, commitment, bg.BackgammonOptions()))
            for _ in range(8):
                update = await current(stub, match_id)
                reply = await stub.SubmitAction(act(match_id, update.to_move, choose(update)))
                acknowledged.append(reply.update.event.description)
            before = await current(stub, match_id)
        service.kill()
        await service.start()
        async with Callers(service.address) as callers:
            stub = callers.stub(Stub, RULES_CALLERS)
            after = await current(stub, match_id)
            # Every acknowledged action is there, the dice were not drawn again, and play resumes.
            assert after.event.kind == "resumed"
            assert after.sequence == before.sequence + 1
            assert after.view.backgammon == before.view.backgammon
            assert after.to_move == before.to_move
            logged = [u async for u in _actions(stub, match_id)]
            assert logged == acknowledged
            final = await play_out(stub, match_id, choose)
            assert final.result.termination == pb.TERMINATION_BEAR_OFF
            record = await stub.GetRecord(pb.GetRecordRequest(match_id=match_id))
        # The result reaches fairness (the shard's outbox): every die, before and after the kill, is the
        # one the revealed seeds give.
        proof = await revealed_proof(stack, match_id)
    assert verify(proof).ok
    assert [tuple(d.values) for d in record.fairness_draws] == recomputed_dice(proof)


async def _actions(stub: Stub, match_id: str) -> AsyncIterator[str]:
    call = stub.Watch(pb.WatchRequest(match_id=match_id, seat=0))
    try:
        async with asyncio.timeout(10):
            async for response in call:
                if response.update.event.kind == "action":
                    yield response.update.event.description
                if response.update.event.kind == "resumed":
                    return
    finally:
        call.cancel()


async def test_options_round_trip_and_the_view_names_the_variant(stack: Stack) -> None:
    options = bg.BackgammonOptions(variant=bg.VARIANT_NACKGAMMON, cube=True, gammons=True, match_to=5)
    match_id = await create(stack, options)
    async with backend_channel(stack.rules.address, "gateway") as channel:
        stub = Stub(channel)
        got = await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=0))
    assert got.options.backgammon == options
    view = got.update.view.backgammon
    assert view.variant == bg.VARIANT_NACKGAMMON
    assert view.match_to == 5
    assert sum(p for p in view.board.points if p > 0) == 15
    assert view.pips[0] == view.pips[1] == 194
    assert Variant.NACKGAMMON.value == "nackgammon"
