"""One ``RulesService.Exchange`` stream: many players' submits and watches over a single stream, in batches.

The gateway keeps one Exchange stream per rules shard instead of a unary call per action and a server
stream per watcher (docs/performance.md): on this hot path gRPC's fixed cost per call and per message
outweighs the work, and batching lets one message carry whatever is ready. Each call is served exactly
as its own RPC would be (the servicer's submit and watch), and each refusal carries the code and reason
that RPC would have ended with; one call's refusal never ends the stream.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import structlog
from skillclassics.rules.v1 import rules_pb2

from libs.match.actor import MatchClosed
from libs.runtime import validation
from libs.runtime.errors import (
    ErrorReason,
    InvalidArgument,
    ResourceExhausted,
    ServiceError,
    Unavailable,
    code_number,
    details_message,
    error_for,
    internal_error_reason,
    status_code,
    translated,
)
from libs.runtime.log import bind_request_id, current_request_id
from libs.runtime.metrics import StreamCallMetrics

MAX_BUFFERED_REPLIES = 100_000
"""Replies waiting for the caller to read them; past this the caller is not reading and the stream ends
(RESOURCE_EXHAUSTED) rather than the shard's memory growing without bound."""
GATHER_TURNS = 4
"""At most this many turns of the event loop are spent letting more replies join a batch (it stops at
the first turn that adds none)."""
SHUTTING_DOWN = "the rules service is shutting down; reconnect from your last sequence"

Submit = Callable[[rules_pb2.SubmitActionRequest], Awaitable[int]]
Watch = Callable[[rules_pb2.WatchRequest], AsyncIterator[rules_pb2.MatchUpdate]]

_log = structlog.get_logger(__name__)
_SUBMITS = StreamCallMetrics("skillclassics.rules.v1.RulesService", "Exchange", "submit")


def refusal(error: BaseException) -> rules_pb2.Refusal:
    """The status ``error`` would have ended its own RPC with, as a reply (never leaking internals): an
    unreachable database too is ``UNAVAILABLE`` with "retry in N ms" in its reason, as the interceptor
    answers it (:func:`~libs.runtime.errors.translated`)."""
    refused = translated(error)
    if refused is not None:
        return refusal_of(refused)
    if isinstance(error, MatchClosed):
        return refusal_of(Unavailable(SHUTTING_DOWN, reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN))
    _log.error("exchange.internal_error", exc_info=error)
    message = internal_error_reason(current_request_id())
    return refusal_of(error_for(grpc.StatusCode.INTERNAL, message, ErrorReason.ERROR_REASON_INTERNAL))


def refusal_of(error: ServiceError) -> rules_pb2.Refusal:
    """``error`` as a reply: its code, message and details."""
    return rules_pb2.Refusal(
        code=code_number(error.code), message=error.message, details=details_message(error)
    )


class ExchangeSession:
    """Serves one Exchange stream: reads batches of calls, runs each as its own task, and writes whatever
    replies are ready as one batch per message."""

    def __init__(self, submit: Submit, watch: Watch, max_buffered: int = MAX_BUFFERED_REPLIES) -> None:
        self._submit = submit
        self._watch = watch
        self._max_buffered = max_buffered
        self._replies: list[rules_pb2.ExchangeReply] = []
        self._wake = asyncio.Event()
        self._watches: dict[int, asyncio.Task[None]] = {}
        self._submits: set[asyncio.Task[None]] = set()
        self._reader: asyncio.Task[None] | None = None
        self._draining: str | None = None
        """Why the stream is ending because the service is (see :meth:`drain`)."""
        self.batches_in = 0
        """Request messages read (each a batch of calls)."""
        self.batches_out = 0
        """Response messages written (each a batch of replies)."""

    async def serve(
        self, requests: AsyncIterator[rules_pb2.ExchangeRequest]
    ) -> AsyncIterator[rules_pb2.ExchangeResponse]:
        """The stream's responses. When the caller half-closes, watches end and the submits already
        received are answered before the stream ends; when the caller goes away, watches end and those
        submits still complete (an accepted action is applied whether or not its answer is read). When
        the service drains (:meth:`drain`), the stream ends ``UNAVAILABLE`` once the submits already
        received are answered (at once when it drained before the stream began)."""
        reader = self._reader = asyncio.create_task(self._read(requests))
        try:
            while True:
                if not self._replies:
                    if self._draining is not None:
                        if not self._submits:
                            raise Unavailable(self._draining, reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN)
                    elif reader.done():
                        reader.result()  # the caller's stream failed: end ours the same way
                        for task in self._watches.values():
                            task.cancel()
                        if not self._submits:
                            return
                    self._wake.clear()
                    await self._wake.wait()  # a reply, a finished submit, or the reader's end
                    continue
                await self._gather()
                if len(self._replies) > self._max_buffered:
                    raise ResourceExhausted(
                        f"more than {self._max_buffered} replies unread: the caller fell behind",
                        reason=ErrorReason.ERROR_REASON_FELL_BEHIND,
                    )
                batch, self._replies = self._replies, []
                self.batches_out += 1
                yield rules_pb2.ExchangeResponse(replies=batch)
        finally:
            reader.cancel()
            for task in self._watches.values():
                task.cancel()

    def drain(self, reason: str) -> None:
        """The service is shutting down (a restart): take no more calls, end every watch at once with
        ``UNAVAILABLE`` and ``reason``, answer the submits already received, then end the stream the
        same way. The caller (the gateway) then ends its players' streams at once, and they reconnect
        (to this shard once it is back) instead of waiting out the drain grace on a stream that carries
        nothing more."""
        if self._draining is not None:
            return
        self._draining = reason
        if self._reader is not None:
            self._reader.cancel()  # calls not read yet fail with the stream; the caller retries them
        watches, self._watches = self._watches, {}
        for call_id, task in watches.items():
            task.cancel()
            self._refuse(call_id, Unavailable(reason, reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN))
        self._wake.set()

    async def _gather(self) -> None:
        """Let replies that are a turn or two of the event loop away join the batch: a move's answer and
        its watchers' updates are made in different tasks, within a few turns of each other, and would
        otherwise leave as two or three messages (each a fixed cost on both ends) instead of one."""
        for _ in range(GATHER_TURNS):
            count = len(self._replies)
            await asyncio.sleep(0)
            if len(self._replies) == count:
                return

    def _reply(self, reply: rules_pb2.ExchangeReply) -> None:
        self._replies.append(reply)
        self._wake.set()

    async def _read(self, requests: AsyncIterator[rules_pb2.ExchangeRequest]) -> None:
        try:
            async for request in requests:
                self.batches_in += 1
                for call in request.calls:
                    self._start(call)
        finally:
            self._wake.set()  # however the caller's side ended, the writer looks at why

    def _start(self, call: rules_pb2.ExchangeCall) -> None:
        try:
            # Each call keeps its contract's rules, as its own RPC's request would (the interceptor
            # leaves the calls to this, so that one bad call is refused alone, not the whole stream).
            validation.check(call, "Exchange")
        except InvalidArgument as error:
            self._refuse(call.id, error)
            return
        which = call.WhichOneof("call")
        if which == "unwatch":
            task = self._watches.pop(call.unwatch.watch_id, None)
            if task is not None:
                task.cancel()
            return
        if which == "watch":
            if call.id in self._watches:
                self._refuse(
                    call.id,
                    InvalidArgument(
                        f"call id {call.id} is a watch in progress",
                        reason=ErrorReason.ERROR_REASON_INVALID_REQUEST,
                    ),
                )
                return
            self._watches[call.id] = asyncio.create_task(
                self._run_watch(call.id, call.watch, call.request_id)
            )
            return
        task = asyncio.create_task(self._run_submit(call.id, call.submit, call.request_id))
        self._submits.add(task)
        task.add_done_callback(self._submit_done)

    def _submit_done(self, task: asyncio.Task[None]) -> None:
        self._submits.discard(task)
        self._wake.set()

    def _refuse(self, call_id: int, error: BaseException) -> None:
        self._reply(rules_pb2.ExchangeReply(id=call_id, refused=refusal(error)))

    async def _run_submit(
        self, call_id: int, request: rules_pb2.SubmitActionRequest, request_id: str
    ) -> None:
        bind_request_id(request_id)
        began = time.perf_counter()
        try:
            sequence = await self._submit(request)
        except Exception as error:  # every refusal becomes this call's reply; the stream goes on
            refused = refusal(error)
            self._reply(rules_pb2.ExchangeReply(id=call_id, refused=refused))
            _SUBMITS.observe(time.perf_counter() - began, status_code(refused.code).name)
            return
        self._reply(rules_pb2.ExchangeReply(id=call_id, submitted=rules_pb2.Submitted(sequence=sequence)))
        _SUBMITS.observe(time.perf_counter() - began, "OK")

    async def _run_watch(self, call_id: int, request: rules_pb2.WatchRequest, request_id: str) -> None:
        bind_request_id(request_id)
        try:
            async for update in self._watch(request):
                self._reply(rules_pb2.ExchangeReply(id=call_id, update=update))
        except asyncio.CancelledError:
            raise  # unwatched, or the stream ended: nobody to tell
        except Exception as error:
            self._refuse(call_id, error)
        else:  # the match is over and its final update was sent
            self._reply(rules_pb2.ExchangeReply(id=call_id, refused=rules_pb2.Refusal(code=0, message="")))
        finally:
            if self._watches.get(call_id) is asyncio.current_task():
                del self._watches[call_id]
