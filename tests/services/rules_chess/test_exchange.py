"""``RulesService.Exchange``: many submits and watches over one stream, over real gRPC on localhost, and
the session's batching on its own."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import grpc
import pytest
import structlog
from skillclassics.rules.v1 import rules_pb2 as pb

from libs.match.exchange import ExchangeSession
from libs.match.service import RulesService
from libs.runtime import RunningServer
from libs.runtime.errors import ErrorReason, FailedPrecondition, ResourceExhausted, Unavailable
from tests.services.rules_chess.test_rules_chess_service import Stub, create, get, move
from tests.support import stream_calls_counted

OK = 0
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT.value[0]
NOT_FOUND = grpc.StatusCode.NOT_FOUND.value[0]
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION.value[0]
UNAVAILABLE = grpc.StatusCode.UNAVAILABLE.value[0]
INTERNAL = grpc.StatusCode.INTERNAL.value[0]


class Exchange:
    """A test's end of one Exchange stream: send calls (each batch one message), read replies by id."""

    def __init__(self, stub: Stub) -> None:
        self._outgoing: asyncio.Queue[pb.ExchangeRequest | None] = asyncio.Queue()
        self.call = stub.Exchange(self._requests())
        self.replies: dict[int, list[pb.ExchangeReply]] = {}
        self.messages = 0
        self._arrived = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _requests(self) -> AsyncIterator[pb.ExchangeRequest]:
        while (request := await self._outgoing.get()) is not None:
            yield request

    async def _read(self) -> None:
        async for response in self.call:
            self.messages += 1
            for reply in response.replies:
                self.replies.setdefault(reply.id, []).append(reply)
            self._arrived.set()

    def send(self, *calls: pb.ExchangeCall) -> None:
        self._outgoing.put_nowait(pb.ExchangeRequest(calls=list(calls)))

    def half_close(self) -> None:
        self._outgoing.put_nowait(None)

    async def wait(self, call_id: int, count: int = 1, within: float = 5.0) -> list[pb.ExchangeReply]:
        """The first ``count`` replies to ``call_id``, waiting for them."""
        async with asyncio.timeout(within):
            while len(self.replies.get(call_id, [])) < count:
                if self._reader.done():
                    self._reader.result()
                    raise AssertionError(f"the stream ended before {count} replies to call {call_id}")
                self._arrived.clear()
                await asyncio.wait(
                    [asyncio.ensure_future(self._arrived.wait()), self._reader],
                    return_when=asyncio.FIRST_COMPLETED,
                )
        return self.replies[call_id][:count]

    async def ended(self, within: float = 5.0) -> None:
        async with asyncio.timeout(within):
            await self._reader

    def close(self) -> None:
        self.call.cancel()
        self._reader.cancel()


def submit(call_id: int, request: pb.SubmitActionRequest) -> pb.ExchangeCall:
    return pb.ExchangeCall(id=call_id, submit=request)


def a_submit(key: str) -> pb.SubmitActionRequest:
    """A submit that keeps the contract's rules (the stream checks each call's), for the fakes."""
    return pb.SubmitActionRequest(
        match_id="chess.0.m", seat=0, idempotency_key=key, action=pb.Action(resign=pb.Resign())
    )


def watch(call_id: int, match_id: str, seat: int | None, from_sequence: int = 0) -> pb.ExchangeCall:
    request = pb.WatchRequest(match_id=match_id, from_sequence=from_sequence)
    if seat is None:
        request.spectator = True
    else:
        request.seat = seat
    return pb.ExchangeCall(id=call_id, watch=request)


@pytest.fixture
async def exchange(stub: Stub) -> AsyncIterator[Exchange]:
    stream = Exchange(stub)
    yield stream
    stream.close()


async def test_submits_and_watches_share_one_stream(stub: Stub, exchange: Exchange) -> None:
    match_id = await create(stub)
    exchange.send(watch(1, match_id, 0), watch(2, match_id, 1), watch(3, match_id, None))
    for call_id in (1, 2, 3):
        (created,) = await exchange.wait(call_id)
        assert created.update.sequence == 1
    exchange.send(submit(10, move(match_id, 0, "e4")))
    (answer,) = await exchange.wait(10)
    assert answer.WhichOneof("reply") == "submitted"
    assert answer.submitted.sequence == 2
    exchange.send(submit(11, move(match_id, 1, "e5")))
    (answer,) = await exchange.wait(11)
    assert answer.submitted.sequence == 3
    for call_id in (1, 2, 3):
        updates = [r.update for r in await exchange.wait(call_id, 3)]
        assert [u.sequence for u in updates] == [1, 2, 3]
    # Each watch sees its own seat's view: legal moves only for the seat to move, never for spectators.
    white, black, spectator = (exchange.replies[i][2].update for i in (1, 2, 3))
    assert white.to_move == 0
    assert white.legal_actions
    assert not black.legal_actions
    assert not spectator.legal_actions
    now = await get(stub, match_id, 0)  # what the unary call says (its clocks are as of now)
    assert (white.view, white.legal_actions, white.event) == (now.view, now.legal_actions, now.event)
    assert (await get(stub, match_id)).sequence == 3  # both moves are durable and applied


async def test_a_refused_call_does_not_end_the_stream(stub: Stub, exchange: Exchange) -> None:
    match_id = await create(stub)
    exchange.send(
        submit(1, move(match_id, 0, "e5")),  # illegal for White
        submit(2, move(match_id, 1, "e5")),  # not Black's turn
        pb.ExchangeCall(id=3),  # no call at all
        submit(4, move("chess.0.nosuchmatch00", 0, "e4")),
        watch(5, "chess.0.nosuchmatch00", 0),
        watch(6, match_id, 7),  # no such seat
        submit(7, pb.SubmitActionRequest(match_id=match_id, seat=0, idempotency_key="k")),  # no action
    )
    expected = {
        1: FAILED_PRECONDITION,
        2: FAILED_PRECONDITION,
        3: INVALID_ARGUMENT,
        4: NOT_FOUND,
        5: NOT_FOUND,
        6: INVALID_ARGUMENT,
        7: INVALID_ARGUMENT,
    }
    for call_id, code in expected.items():
        (reply,) = await exchange.wait(call_id)
        assert reply.WhichOneof("reply") == "refused", reply
        assert reply.refused.code == code, reply.refused
        assert reply.refused.message, "every refusal says why"
    assert "not a legal move" in exchange.replies[1][0].refused.message
    exchange.send(submit(8, move(match_id, 0, "e4")))
    (reply,) = await exchange.wait(8)
    assert reply.submitted.sequence == 2
    assert (await get(stub, match_id)).sequence == 2  # the refused calls changed nothing


async def test_a_submit_after_the_writer_closed_is_refused_unavailable(
    server: RunningServer, stub: Stub, exchange: Exchange
) -> None:
    """Shutting down closes the store's writer: a submit that comes after it is refused UNAVAILABLE
    (the gateway retries it), not INTERNAL, and the stream goes on."""
    match_id = await create(stub)
    service = server.service
    assert isinstance(service, RulesService)
    assert service.runtime is not None
    await service.runtime.store.close()
    exchange.send(submit(1, move(match_id, 0, "e4")))
    (reply,) = await exchange.wait(1)
    assert reply.WhichOneof("reply") == "refused", reply
    assert reply.refused.code == UNAVAILABLE, reply.refused
    assert "shutting down" in reply.refused.message
    exchange.send(watch(2, match_id, None))
    (update,) = await exchange.wait(2)
    assert update.update.sequence == 1  # the stream still serves; the refused move changed nothing


def _submits_counted(code: str) -> float:
    return stream_calls_counted("skillclassics.rules.v1.RulesService", "Exchange", "submit", code)


async def test_each_submit_is_counted_by_its_code(stub: Stub, exchange: Exchange) -> None:
    match_id = await create(stub)
    ok, refused = _submits_counted("OK"), _submits_counted("FAILED_PRECONDITION")
    exchange.send(submit(1, move(match_id, 0, "e4")), submit(2, move(match_id, 0, "e5")))
    await exchange.wait(1)
    await exchange.wait(2)
    assert _submits_counted("OK") == ok + 1
    assert _submits_counted("FAILED_PRECONDITION") == refused + 1


async def test_a_retry_returns_the_original_answer(stub: Stub, exchange: Exchange) -> None:
    match_id = await create(stub)
    exchange.send(submit(1, move(match_id, 0, "e4", key="same")))
    (first,) = await exchange.wait(1)
    exchange.send(submit(2, move(match_id, 0, "e4", key="same")))
    (second,) = await exchange.wait(2)
    assert first.submitted.sequence == second.submitted.sequence == 2
    unary = await stub.SubmitAction(move(match_id, 0, "e4", key="same"))
    assert unary.sequence == 2
    assert (await get(stub, match_id)).sequence == 2


async def test_unwatch_stops_a_watch_and_a_finished_match_ends_it(stub: Stub, exchange: Exchange) -> None:
    match_id = await create(stub)
    exchange.send(watch(1, match_id, 0), watch(2, match_id, 1))
    await exchange.wait(1)
    await exchange.wait(2)
    exchange.send(pb.ExchangeCall(id=3, unwatch=pb.Unwatch(watch_id=1)))
    exchange.send(submit(4, move(match_id, 0, "e4")))
    await exchange.wait(4)
    await exchange.wait(2, 2)  # the other watch saw the move...
    assert len(exchange.replies[1]) == 1  # ...the unwatched one did not
    resign = pb.SubmitActionRequest(
        match_id=match_id, seat=1, idempotency_key="resign", action=pb.Action(resign=pb.Resign())
    )
    exchange.send(submit(5, resign))
    replies = await exchange.wait(2, 4)
    assert replies[2].update.status == pb.MATCH_STATUS_FINISHED
    assert replies[3].WhichOneof("reply") == "refused"
    assert replies[3].refused.code == OK


async def test_half_close_answers_what_was_sent_then_ends(stub: Stub, exchange: Exchange) -> None:
    match_id = await create(stub)
    exchange.send(watch(1, match_id, 0), submit(2, move(match_id, 0, "e4")))
    exchange.half_close()
    await exchange.ended()
    assert exchange.replies[2][0].submitted.sequence == 2
    assert await exchange.call.code() == grpc.StatusCode.OK


async def test_many_matches_over_one_stream(stub: Stub, exchange: Exchange) -> None:
    matches = [await create(stub) for _ in range(8)]
    exchange.send(*(submit(i, move(m, 0, "d4")) for i, m in enumerate(matches)))
    for i in range(len(matches)):
        (reply,) = await exchange.wait(i)
        assert reply.submitted.sequence == 2
    for match_id in matches:
        assert (await get(stub, match_id)).sequence == 2


# -- the session on its own: batching ------------------------------------------------------------------


async def test_replies_ready_together_go_out_as_one_message() -> None:
    gate = asyncio.Event()

    async def held_submit(request: pb.SubmitActionRequest) -> int:
        await gate.wait()
        if request.idempotency_key == "bad":
            raise FailedPrecondition("illegal move", reason=ErrorReason.ERROR_REASON_ILLEGAL_ACTION)
        return int(request.idempotency_key)

    async def no_watch(request: pb.WatchRequest) -> AsyncIterator[pb.MatchUpdate]:
        yield pb.MatchUpdate(match_id=request.match_id, sequence=1)

    session = ExchangeSession(held_submit, no_watch)
    requests: asyncio.Queue[pb.ExchangeRequest | None] = asyncio.Queue()

    async def incoming() -> AsyncIterator[pb.ExchangeRequest]:
        while (request := await requests.get()) is not None:
            yield request

    keys = [str(n) for n in range(2, 52)] + ["bad"]
    requests.put_nowait(
        pb.ExchangeRequest(calls=[pb.ExchangeCall(id=n, submit=a_submit(key)) for n, key in enumerate(keys)])
    )
    responses = session.serve(incoming())
    pending = asyncio.ensure_future(anext(responses))
    await asyncio.sleep(0.05)
    assert not pending.done()  # nothing is answered before the submits finish
    gate.set()
    first = await asyncio.wait_for(pending, 5)
    assert len(first.replies) == len(keys)  # all fifty-one in one message
    by_id = {reply.id: reply for reply in first.replies}
    assert [by_id[n].submitted.sequence for n in range(50)] == list(range(2, 52))
    assert by_id[50].refused.code == FAILED_PRECONDITION
    requests.put_nowait(None)
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(responses), 5)
    assert (session.batches_in, session.batches_out) == (1, 1)


async def test_each_call_is_served_under_its_callers_request_id() -> None:
    """A call's task logs under the request id its caller sent (the gateway: the player's Play stream's),
    or the Exchange stream's own when it sent none; an INTERNAL refusal names it."""
    seen: dict[str, object] = {}

    def request_id() -> object:
        return structlog.contextvars.get_contextvars().get("request_id")

    async def submit(request: pb.SubmitActionRequest) -> int:
        seen[request.idempotency_key] = request_id()
        if request.idempotency_key == "broken":
            raise RuntimeError("a bug, not a refusal")
        return 2

    async def watch(request: pb.WatchRequest) -> AsyncIterator[pb.MatchUpdate]:
        seen["watch"] = request_id()
        yield pb.MatchUpdate(match_id=request.match_id, sequence=1)

    def call(call_id: int, key: str, caller: str = "") -> pb.ExchangeCall:
        request = a_submit(key)
        return pb.ExchangeCall(id=call_id, submit=request, request_id=caller)

    async def incoming() -> AsyncIterator[pb.ExchangeRequest]:
        yield pb.ExchangeRequest(
            calls=[
                call(1, "mine", "play-1"),
                call(2, "unnamed"),
                call(3, "broken", "play-3"),
                pb.ExchangeCall(
                    id=4, watch=pb.WatchRequest(match_id="chess.0.m", spectator=True), request_id="play-4"
                ),
            ]
        )

    structlog.contextvars.bind_contextvars(request_id="exchange-stream")  # as the interceptor binds it
    replies: dict[int, list[pb.ExchangeReply]] = {}
    async with asyncio.timeout(5):
        async for response in ExchangeSession(submit, watch).serve(incoming()):
            for reply in response.replies:
                replies.setdefault(reply.id, []).append(reply)
    assert seen == {"mine": "play-1", "unnamed": "exchange-stream", "broken": "play-3", "watch": "play-4"}
    assert replies[1][0].submitted.sequence == 2
    broken = replies[3][0].refused
    assert (broken.code, broken.message) == (INTERNAL, "internal error (request id play-3)")
    assert request_id() == "exchange-stream"  # each call bound its own in its own task


async def test_a_caller_that_does_not_read_is_cut_off() -> None:
    async def flood(request: pb.WatchRequest) -> AsyncIterator[pb.MatchUpdate]:
        for sequence in range(1, 1000):
            yield pb.MatchUpdate(sequence=sequence)

    async def unused(request: pb.SubmitActionRequest) -> int:
        raise AssertionError("no submits here")

    session = ExchangeSession(unused, flood, max_buffered=100)

    async def incoming() -> AsyncIterator[pb.ExchangeRequest]:
        yield pb.ExchangeRequest(
            calls=[
                pb.ExchangeCall(
                    id=1, watch=pb.WatchRequest(match_id=f"chess.0.{uuid.uuid4().hex}", spectator=True)
                )
            ]
        )
        await asyncio.Event().wait()

    async def read_slowly() -> None:
        async with asyncio.timeout(5):
            async for _ in session.serve(incoming()):
                await asyncio.sleep(0.01)  # a slow reader: the watch outruns it

    with pytest.raises(ResourceExhausted):
        await read_slowly()


async def test_a_submit_in_flight_completes_when_the_caller_goes_away() -> None:
    gate = asyncio.Event()
    applied: list[str] = []

    async def held_submit(request: pb.SubmitActionRequest) -> int:
        await gate.wait()
        applied.append(request.idempotency_key)
        return 2

    async def no_watch(request: pb.WatchRequest) -> AsyncIterator[pb.MatchUpdate]:
        yield pb.MatchUpdate()

    session = ExchangeSession(held_submit, no_watch)
    received = asyncio.Event()

    async def incoming() -> AsyncIterator[pb.ExchangeRequest]:
        call = pb.ExchangeCall(id=1, submit=a_submit("k"))
        yield pb.ExchangeRequest(calls=[call])
        received.set()
        await asyncio.Event().wait()

    responses = session.serve(incoming())
    reading = asyncio.ensure_future(anext(responses))
    await asyncio.wait_for(received.wait(), 5)
    reading.cancel()  # the caller went away with its submit in flight: the stream is cancelled
    with pytest.raises(asyncio.CancelledError):
        await reading
    gate.set()
    async with asyncio.timeout(5):
        while not applied:  # noqa: ASYNC110 - the submit task runs on its own
            await asyncio.sleep(0.01)
    assert applied == ["k"]


async def test_a_moves_answer_and_its_watchers_updates_leave_in_one_message(
    stub: Stub, exchange: Exchange
) -> None:
    """One move, both seats watching: the answer and the two updates are ready within a few turns of
    the event loop of each other, and go out as one message rather than two or three."""
    match_id = await create(stub)
    exchange.send(watch(1, match_id, 0), watch(2, match_id, 1))
    for call_id in (1, 2):
        await exchange.wait(call_id)
    for ply, (seat, san) in enumerate([(0, "e4"), (1, "e5"), (0, "Nf3"), (1, "Nc6")]):
        before = exchange.messages
        exchange.send(submit(10 + ply, move(match_id, seat, san)))
        await exchange.wait(10 + ply)
        for call_id in (1, 2):
            await exchange.wait(call_id, 2 + ply)
        assert exchange.messages == before + 1


# -- draining: a restart moves every stream at once ---------------------------------------------------------


async def test_draining_ends_every_watch_and_the_stream_at_once_and_refuses_new_streams(
    server: RunningServer, stub: Stub, exchange: Exchange
) -> None:
    """A graceful restart: every watch of the stream ends UNAVAILABLE at once, naming the shard, and so
    does the stream; a new stream is refused the same way (rather than held until the drain grace)."""
    match_id = await create(stub)
    exchange.send(watch(1, match_id, 0), watch(2, match_id, None))
    for call_id in (1, 2):
        await exchange.wait(call_id)
    service = server.service
    assert isinstance(service, RulesService)
    await service.drain()
    reason = "rules-chess shard 0 is restarting; reconnect from your last sequence"
    for call_id in (1, 2):
        _, end = await exchange.wait(call_id, 2)
        assert (end.WhichOneof("reply"), end.refused.code, end.refused.message) == (
            "refused",
            UNAVAILABLE,
            reason,
        )
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        await exchange.ended()
    assert (ended.value.code(), ended.value.details()) == (grpc.StatusCode.UNAVAILABLE, reason)
    late = Exchange(stub)
    late.send(watch(3, match_id, 0))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await late.ended()
    assert (refused.value.code(), refused.value.details()) == (grpc.StatusCode.UNAVAILABLE, reason)
    late.close()


async def test_draining_answers_the_submits_in_flight_before_the_stream_ends() -> None:
    gate = asyncio.Event()

    async def held_submit(request: pb.SubmitActionRequest) -> int:
        await gate.wait()
        return 7

    async def endless(request: pb.WatchRequest) -> AsyncIterator[pb.MatchUpdate]:
        yield pb.MatchUpdate(sequence=1)
        await asyncio.Event().wait()
        yield pb.MatchUpdate(sequence=2)  # pragma: no cover

    session = ExchangeSession(held_submit, endless)
    late = asyncio.Event()

    async def incoming() -> AsyncIterator[pb.ExchangeRequest]:
        yield pb.ExchangeRequest(
            calls=[
                pb.ExchangeCall(id=1, watch=pb.WatchRequest(match_id="chess.0.m", seat=0)),
                pb.ExchangeCall(id=2, submit=a_submit("k")),
            ]
        )
        await late.wait()
        yield pb.ExchangeRequest(
            calls=[pb.ExchangeCall(id=3, watch=pb.WatchRequest(match_id="chess.0.m", seat=1))]
        )
        await asyncio.Event().wait()

    replies: list[pb.ExchangeReply] = []

    async def read() -> None:
        async for response in session.serve(incoming()):
            replies.extend(response.replies)
            if any(r.id == 1 and r.HasField("update") for r in replies) and not late.is_set():
                session.drain("rules-chess shard 0 is restarting; reconnect from your last sequence")
                late.set()  # a call sent after the drain began is not taken
                await asyncio.sleep(0.05)
                gate.set()  # the submit in flight completes: it is still answered

    with pytest.raises(Unavailable, match="restarting"):
        await asyncio.wait_for(read(), 5)
    ends = [(r.id, r.WhichOneof("reply")) for r in replies]
    assert ends == [(1, "update"), (1, "refused"), (2, "submitted")], ends
    assert replies[1].refused.code == UNAVAILABLE
    assert replies[2].submitted.sequence == 7
