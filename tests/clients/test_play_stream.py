"""The player library's play stream (:class:`clients.player.PlayStream`): its answer routing and
reconnection against scripted streams, then over real gRPC against the in-process stack of
``test_gateway_clients`` (a whole game, a refused move, a gateway restart mid-game), and the load
harness on both transports."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import grpc
import pytest
from skillclassics.gateway.v1 import gateway_pb2 as gw
from skillclassics.rules.v1 import rules_pb2

from clients.families import family
from clients.load.cli import build_parser, config_from_args
from clients.load.harness import LoadConfig, TokenMinter, Transport, parse_families, run_load
from clients.player import GatewayError, PlayerSession, PlayStream, RetryPolicy, development_token
from libs.runtime import RunningServer
from libs.runtime.config import sqlite_url
from services.gateway.service import GatewayService
from tests.clients import test_gateway_clients
from tests.clients.test_gateway_clients import ENV, FAST, Stack, player, private_match, session
from tests.support import free_port, start_in_process

CHESS = family("chess")
MATCH = "chess.0.fake"
QUICK = RetryPolicy(
    first_delay_s=0.001, max_delay_s=0.01, stream_attempts=5, stream_outage_s=0.0, creation_wait_s=0.5
)


async def until(condition: Callable[[], bool], what: str, within: float = 10) -> None:
    """Poll ``condition`` to a deadline."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


# -- against scripted streams ----------------------------------------------------------------------------


def rpc_error(code: grpc.StatusCode, details: str = "") -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


class FakeCall:
    """One scripted ``Play`` call: what the client wrote, and what the test makes the server say."""

    def __init__(self) -> None:
        self.sent: list[gw.PlayRequest] = []
        self.cancelled = False
        self.done_writing_called = False
        self.writes_flow = asyncio.Event()
        """Cleared: a write waits (as for a client flow-control window)."""
        self.writes_flow.set()
        self._said: asyncio.Queue[gw.PlayResponse | grpc.aio.AioRpcError | None] = asyncio.Queue()

    async def write(self, request: gw.PlayRequest) -> None:
        assert not self.done_writing_called, "written after done_writing"
        self.sent.append(request)
        await self.writes_flow.wait()

    async def done_writing(self) -> None:
        self.done_writing_called = True

    def cancel(self) -> bool:
        self.cancelled = True
        self._said.put_nowait(rpc_error(grpc.StatusCode.CANCELLED))
        return True

    def __aiter__(self) -> Any:
        return self._read()

    async def _read(self) -> Any:
        while (said := await self._said.get()) is not None:
            if isinstance(said, grpc.aio.AioRpcError):
                raise said
            yield said

    # The server's side.

    def opened(self, seat: int) -> None:
        self._said.put_nowait(gw.PlayResponse(opened=gw.PlayOpened(match_id=MATCH, seat=seat)))

    def update(self, sequence: int, *, over: bool = False) -> None:
        status = rules_pb2.MATCH_STATUS_FINISHED if over else rules_pb2.MATCH_STATUS_LIVE
        self._said.put_nowait(gw.PlayResponse(update=rules_pb2.MatchUpdate(sequence=sequence, status=status)))

    def answer(
        self, key: str, sequence: int = 0, code: grpc.StatusCode = grpc.StatusCode.OK, why: str = ""
    ) -> None:
        answer = gw.PlayAnswer(idempotency_key=key, sequence=sequence, code=code.value[0], message=why)
        self._said.put_nowait(gw.PlayResponse(answer=answer))

    def fail(self, code: grpc.StatusCode, details: str = "") -> None:
        self._said.put_nowait(rpc_error(code, details))

    def end(self) -> None:
        self._said.put_nowait(None)

    def actions(self) -> list[str]:
        """The idempotency keys of the actions written, in order."""
        return [request.action.idempotency_key for request in self.sent if request.HasField("action")]


class ScriptedSession(PlayerSession):
    """A session whose play streams are :class:`FakeCall` objects (and whose ``SubmitAction`` answers
    from ``unary_answers``)."""

    def __init__(self) -> None:
        super().__init__("127.0.0.1:1", "token", retry=QUICK)
        self.calls: list[FakeCall] = []
        self.unary_answers: dict[str, int] = {}

    def _open_play_stream(self) -> FakeCall:
        call = FakeCall()
        self.calls.append(call)
        return call

    async def submit(
        self, match_id: str, action: rules_pb2.Action, *, idempotency_key: str | None = None
    ) -> gw.SubmitActionResponse:
        assert idempotency_key is not None
        return gw.SubmitActionResponse(sequence=self.unary_answers[idempotency_key])


async def call_number(session: ScriptedSession, number: int) -> FakeCall:
    await until(lambda: len(session.calls) >= number, f"play stream #{number}")
    return session.calls[number - 1]


async def written(call: FakeCall, keys: list[str]) -> None:
    await until(lambda: call.actions() == keys, f"actions {keys} (written: {call.actions()})")


def collect(stream: PlayStream) -> tuple[list[int], asyncio.Task[None]]:
    seen: list[int] = []

    async def read() -> None:
        async for update in stream:
            seen.append(update.sequence)

    return seen, asyncio.create_task(read())


def move(text: str) -> rules_pb2.Action:
    return CHESS.parse(text)


async def test_answers_are_routed_by_key_and_a_refusal_does_not_end_the_stream() -> None:
    session = ScriptedSession()
    async with session.play(MATCH) as stream:
        call = await call_number(session, 1)
        assert call.sent[0].open == gw.PlayOpen(match_id=MATCH, from_sequence=0)
        call.opened(seat=1)
        assert await stream.opened() == 1
        assert stream.seat == 1
        seen, reading = collect(stream)
        first = asyncio.create_task(stream.submit(move("e2e4"), idempotency_key="k1"))
        second = asyncio.create_task(stream.submit(move("e7e5"), idempotency_key="k2"))
        third = asyncio.create_task(stream.submit(move("a1a8"), idempotency_key="k3"))
        await written(call, ["k1", "k2", "k3"])
        assert [request.action.action.chess.move for request in call.sent[1:]] == ["e2e4", "e7e5", "a1a8"]
        call.answer("k3", code=grpc.StatusCode.FAILED_PRECONDITION, why="illegal move")
        call.answer("k2", sequence=8)
        call.update(7)
        call.answer("k1", sequence=7)
        call.update(8)
        with pytest.raises(GatewayError) as refused:
            await third
        assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
        assert refused.value.details == "illegal move"
        assert await second == 8
        assert await first == 7
        call.answer("k1", sequence=7)  # a repeat's answer nobody waits for is ignored
        call.update(9, over=True)
        await asyncio.wait_for(reading, 5)
    assert seen == [7, 8, 9]
    assert stream.reconnects == 0
    with pytest.raises(GatewayError) as late:
        await stream.submit(move("g1f3"))
    assert late.value.code == grpc.StatusCode.CANCELLED


async def test_a_broken_stream_is_reopened_from_the_last_sequence_and_resends_what_was_unanswered() -> None:
    session = ScriptedSession()
    stream = session.play(MATCH, from_sequence=2)
    seen, reading = collect(stream)
    first = await call_number(session, 1)
    assert first.sent[0].open.from_sequence == 2
    first.opened(seat=0)
    first.update(3)
    answered = asyncio.create_task(stream.submit(move("e2e4"), idempotency_key="a"))
    in_flight = asyncio.create_task(stream.submit(move("d2d4"), idempotency_key="b"))
    await written(first, ["a", "b"])
    first.answer("a", sequence=4)
    assert await answered == 4
    first.update(4)
    first.fail(grpc.StatusCode.UNAVAILABLE, "the gateway is shutting down")
    second = await call_number(session, 2)
    await written(second, ["b"])  # only the unanswered action, with its key
    assert second.sent[0].open == gw.PlayOpen(match_id=MATCH, from_sequence=4)
    assert first.cancelled
    later = asyncio.create_task(stream.submit(move("c2c4"), idempotency_key="c"))
    await written(second, ["b", "c"])
    second.opened(seat=0)
    second.update(4)  # already seen: not passed on again
    second.update(5)
    second.answer("b", sequence=5)
    second.answer("c", sequence=6)
    second.update(6, over=True)
    assert await in_flight == 5
    assert await later == 6
    await asyncio.wait_for(reading, 5)
    assert seen == [3, 4, 5, 6]
    assert stream.reconnects == 1
    await stream.aclose()


async def test_a_match_not_created_yet_is_waited_for_and_a_refusal_ends_everything() -> None:
    session = ScriptedSession()
    stream = session.play(MATCH)
    seen, reading = collect(stream)
    (await call_number(session, 1)).fail(grpc.StatusCode.NOT_FOUND, "no such match")
    second = await call_number(session, 2)
    second.opened(seat=1)
    waiting = asyncio.create_task(stream.submit(move("e7e5"), idempotency_key="w"))
    await written(second, ["w"])
    second.fail(grpc.StatusCode.PERMISSION_DENIED, "not seated")
    with pytest.raises(GatewayError) as ended:
        await asyncio.wait_for(reading, 5)
    assert ended.value.code == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(GatewayError) as failed:
        await waiting
    assert failed.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert seen == []
    assert stream.reconnects == 1
    assert len(session.calls) == 2


async def test_a_write_failing_as_the_stream_ends_is_a_break_but_a_gateway_internal_error_is_not() -> None:
    session = ScriptedSession()
    stream = session.play(MATCH)
    seen, reading = collect(stream)
    first = await call_number(session, 1)
    first.opened(seat=0)
    first.writes_flow.clear()
    waiting = asyncio.create_task(stream.submit(move("e4"), idempotency_key="w"))
    await written(first, ["w"])
    # gRPC reports a write on a stream the gateway was ending as INTERNAL, hiding its UNAVAILABLE.
    first.fail(grpc.StatusCode.INTERNAL, "Internal error from Core")
    second = await call_number(session, 2)
    await written(second, ["w"])
    second.answer("w", sequence=1)
    assert await waiting == 1
    second.fail(grpc.StatusCode.INTERNAL, "a bug in the gateway")  # no write under way: the gateway's own
    with pytest.raises(GatewayError, match="a bug in the gateway"):
        await asyncio.wait_for(reading, 5)
    assert stream.reconnects == 1
    assert len(session.calls) == 2
    assert seen == []


async def test_answers_still_due_when_the_match_ended_come_from_the_stream_or_by_key() -> None:
    session = ScriptedSession()
    session.unary_answers["last"] = 12
    stream = session.play(MATCH, from_sequence=10)
    seen, reading = collect(stream)
    call = await call_number(session, 1)
    call.opened(seat=0)
    resign = asyncio.create_task(
        stream.submit(rules_pb2.Action(resign=rules_pb2.Resign()), idempotency_key="r")
    )
    last = asyncio.create_task(stream.submit(move("Qh5"), idempotency_key="last"))
    await written(call, ["r", "last"])
    call.update(11)
    call.update(12, over=True)
    await asyncio.wait_for(reading, 5)  # the updates end with the match, answers or not
    assert seen == [11, 12]
    await until(lambda: call.done_writing_called, "the client to say it sends no more")
    call.answer("r", code=grpc.StatusCode.FAILED_PRECONDITION, why="the match is over")
    call.end()  # the gateway ended the stream without the other answer
    with pytest.raises(GatewayError, match="the match is over"):
        await resign
    assert await asyncio.wait_for(last, 5) == 12  # asked again with SubmitAction and its key
    assert len(session.calls) == 1  # a match that is over is not reopened
    with pytest.raises(GatewayError) as over:
        await stream.submit(move("e4"))
    assert over.value.code == grpc.StatusCode.FAILED_PRECONDITION
    await stream.aclose()


# -- over gRPC, against the in-process stack -------------------------------------------------------------

stack = test_gateway_clients.stack
"""The in-process stack of ``test_gateway_clients`` (its module-scoped fixture, started once here too)."""

SCHOLARS_MATE = ["e4", "e5", "Bc4", "Nc6", "Qh5", "Nf6", "Qxf7#"]


class Follower:
    """Reads a play stream to its end in the background, keeping every update."""

    def __init__(self, stream: PlayStream) -> None:
        self.stream = stream
        self.updates: list[rules_pb2.MatchUpdate] = []
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for update in self.stream:
            self.updates.append(update)

    @property
    def sequences(self) -> list[int]:
        return [update.sequence for update in self.updates]

    async def reached(self, sequence: int) -> None:
        await until(
            lambda: bool(self.updates) and self.updates[-1].sequence >= sequence, f"sequence {sequence}"
        )


def assert_every_update_once(*followers: Follower) -> None:
    for follower in followers:
        sequences = follower.sequences
        assert sequences == list(range(1, sequences[-1] + 1)), sequences
    assert len({tuple(follower.sequences) for follower in followers}) == 1


async def test_two_players_play_a_chess_game_to_mate_over_play_streams(stack: Stack) -> None:
    white, black = player("pw"), player("pb")
    async with session(stack, white) as first, session(stack, black) as second:
        match_id = await private_match(first, second, "chess", minutes=5)
        async with first.play(match_id) as white_stream, second.play(match_id) as black_stream:
            assert (await white_stream.opened(), await black_stream.opened()) == (0, 1)
            followers = [Follower(white_stream), Follower(black_stream)]
            streams = [white_stream, black_stream]
            answered = []
            for ply, text in enumerate(SCHOLARS_MATE):
                if ply == 2:  # a refused move is an answer; the stream goes on
                    with pytest.raises(GatewayError) as refused:
                        await black_stream.submit(CHESS.parse("d5"))  # not black's turn
                    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
                    with pytest.raises(GatewayError) as illegal:
                        await white_stream.submit(CHESS.parse("Ke3"))
                    assert illegal.value.code == grpc.StatusCode.FAILED_PRECONDITION
                answered.append(await streams[ply % 2].submit(CHESS.parse(text)))
            for follower in followers:
                await asyncio.wait_for(follower.task, 10)
    assert_every_update_once(*followers)
    for follower in followers:
        final = follower.updates[-1]
        assert final.result.termination == rules_pb2.TERMINATION_CHECKMATE
        assert list(final.view.chess.moves_san) == SCHOLARS_MATE
        by_sequence = {update.sequence: update for update in follower.updates}
        assert [by_sequence[sequence].view.chess.ply for sequence in answered] == list(range(1, 8))
        assert follower.stream.reconnects == 0
    assert answered == sorted(answered)


async def test_play_streams_reconnect_across_a_gateway_restart_and_answer_in_flight_actions_once(
    stack: Stack,
) -> None:
    port = free_port()

    async def start() -> RunningServer:
        return await start_in_process(
            "gateway",
            GatewayService,
            sqlite_url(stack.tmp / "play-restart.db"),
            stack.gateway_env(**FAST),
            GRPC_PORT=str(port),
        )

    restarting = await start()
    white, black = player("rw"), player("rb")
    retry = RetryPolicy(first_delay_s=0.05, max_delay_s=0.2, stream_attempts=40)
    async with session(stack, white) as first, session(stack, black) as second:
        match_id = await private_match(first, second, "chess", minutes=5)
        players = [
            PlayerSession(f"127.0.0.1:{port}", development_token(name, ENV), retry=retry)
            for name in (white, black)
        ]
        streams = [players[0].play(match_id), players[1].play(match_id)]
        followers = [Follower(stream) for stream in streams]
        try:
            for ply in range(4):
                await streams[ply % 2].submit(CHESS.parse(SCHOLARS_MATE[ply]))
            for follower in followers:
                await follower.reached(4)
            # White's move races the gateway's shutdown: answered before the break, or sent again after.
            racing = asyncio.create_task(streams[0].submit(CHESS.parse("Qh5"), idempotency_key="racing"))
            await restarting.stop(grace=0.5)  # the streams end UNAVAILABLE
            restarting = await start()  # same port: they reopen from their last sequence
            raced = await asyncio.wait_for(racing, 10)
            for follower in followers:
                await follower.reached(raced)
            # Black's move is submitted while the gateway is down: sent when the stream is back.
            broken = streams[1].reconnects
            await restarting.stop(grace=0.5)
            waiting = asyncio.create_task(streams[1].submit(CHESS.parse("Nf6"), idempotency_key="waiting"))
            await until(lambda: streams[1].reconnects >= broken + 2, "a reopening that failed while down")
            assert not waiting.done()
            restarting = await start()
            waited = await asyncio.wait_for(waiting, 10)
            mate = await streams[0].submit(CHESS.parse("Qxf7#"))
            for follower in followers:
                await asyncio.wait_for(follower.task, 10)
            # The same key through SubmitAction returns the original answer: each was applied once.
            assert (
                await first.submit(match_id, CHESS.parse("Qh5"), idempotency_key="racing")
            ).sequence == raced
            assert (
                await second.submit(match_id, CHESS.parse("Nf6"), idempotency_key="waiting")
            ).sequence == waited
        finally:
            for stream in streams:
                await stream.aclose()
            for each in players:
                await each.close()
            await restarting.stop(grace=0.2)
    assert_every_update_once(*followers)
    assert raced < waited < mate
    for follower in followers:
        assert follower.stream.reconnects >= 2
        final = follower.updates[-1]
        assert final.result.termination == rules_pb2.TERMINATION_CHECKMATE
        assert list(final.view.chess.moves_san) == SCHOLARS_MATE


# -- the load harness on both transports -----------------------------------------------------------------


def test_the_transport_is_an_option_and_play_is_the_default() -> None:
    parser = build_parser()
    assert config_from_args(parser.parse_args([]), {}).transport == "play"
    unary = config_from_args(parser.parse_args(["--transport", "unary"]), {})
    assert unary.transport == "unary"
    assert "unary transport" in unary.describe()
    with pytest.raises(SystemExit):
        parser.parse_args(["--transport", "carrier-pigeon"])
    with pytest.raises(ValueError, match="transport"):
        replace(unary, transport="carrier-pigeon").validate()  # type: ignore[arg-type]


@pytest.mark.parametrize("transport", ["play", "unary"])
async def test_the_load_harness_plays_chess_and_gin_on_each_transport(
    stack: Stack, transport: Transport
) -> None:
    config = LoadConfig(
        families=parse_families("chess=2,gin=1"),
        gateway=stack.gateway,
        transport=transport,
        duration_s=None,
        matches=4,
        max_plies=30,
        progress_s=0,
        seed=7,
    )
    assert f"{transport} transport" in config.describe()
    result = await run_load(config, tokens=TokenMinter(ENV))
    metrics = result.metrics
    assert result.stopped_by == "matches"
    assert not metrics.errors
    assert metrics.total("failed") == 0
    assert metrics.total("finished") >= 4
    assert metrics.families["chess"].finished >= 1
    assert metrics.families["gin"].finished >= 1
    actions = metrics.total("actions")
    assert actions >= 4 * 30
    assert metrics.merged("submit_action").total == actions
    assert metrics.merged("opponent_update").total == actions  # every accepted action reached the other side
    assert metrics.reconnects == 0


async def test_a_play_stream_the_gateway_cuts_with_cancelled_is_reopened_not_ended() -> None:
    """A gateway shutting down ends calls it had received but not begun with CANCELLED and no answer of
    its own (grpc/grpc#41785). That is not this side's close: the stream is reopened from its last
    sequence (it used to end quietly, without the match's final update)."""
    session = ScriptedSession()
    stream = session.play(MATCH)
    seen, reading = collect(stream)
    first = await call_number(session, 1)
    first.opened(seat=0)
    first.update(1)
    await until(lambda: seen == [1], "the first update")
    first.fail(grpc.StatusCode.CANCELLED)
    second = await call_number(session, 2)
    assert second.sent[0].open.from_sequence == 1
    second.opened(seat=0)
    second.update(2, over=True)
    await asyncio.wait_for(reading, 5)
    assert seen == [1, 2]
    assert stream.reconnects == 1
