"""One ``RulesService.Exchange`` stream per rules shard, shared by every Play stream of the gateway.

A unary call per action and a server stream per watcher cost a gRPC call's fixed price each time
(docs/performance.md, "The ceiling"). A :class:`ShardLink` carries all of that over one long-lived
stream instead: every call gets an id, calls queued while a message is being written go out together
in the next ``ExchangeRequest``, and every ``ExchangeResponse`` may answer many calls at once. So under
load the per-message cost is shared by a whole batch of players.

A link opens its stream on first use. When the stream fails or ends (the shard restarted, is down, or
refused the stream), everything waiting on it is told at once (submits fail ``UNAVAILABLE`` naming the
shard; watches end ``UNAVAILABLE`` asking the client to reconnect from its last sequence) and the next
use opens a new stream. Retrying is safe: submits carry the client's idempotency key, and watches
resume from the client's last sequence. Nothing waits for a shard that is down: the channel is not
``wait_for_ready``, so a shard that cannot be reached is ``UNAVAILABLE`` at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
from collections.abc import Callable

import grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.match.routing import RulesChannels
from libs.runtime.errors import (
    SERVICE_METADATA,
    ErrorReason,
    ServiceError,
    Unavailable,
    code_number,
    error_from_refusal,
)
from libs.runtime.log import current_request_id, get_logger

_log = get_logger(__name__)

MAX_BATCH = 1000
"""Calls per ``ExchangeRequest`` at most, so that a burst (every client of a restarted gateway
reopening its stream at once) stays far below the 4 MiB message limit; the rest go in the next one."""

Subscriber = Callable[[rules_pb2.MatchUpdate | rules_pb2.Refusal], None]
"""Receives a watch's updates, then at most one ``Refusal`` that ends it (code OK: the match is over and
its final update was sent). It is called by the link's receiving task and must not block (nor raise):
one slow subscriber would hold up every other match of the shard."""


def refusal_error(refusal: rules_pb2.Refusal) -> ServiceError:
    """The :class:`ServiceError` a refusal carried inside a stream stands for: its code, message and
    details."""
    return error_from_refusal(
        refusal.code, refusal.message, refusal.details if refusal.HasField("details") else None
    )


# -- the link ------------------------------------------------------------------------------------------


class Watch:
    """A watch opened on a link; :meth:`close` ends it (an ``Unwatch`` to the shard)."""

    __slots__ = ("_stream", "id")

    def __init__(self, stream: _Stream, watch_id: int) -> None:
        self._stream: _Stream | None = stream
        self.id = watch_id

    def close(self) -> None:
        """End the watch. Idempotent; nothing is sent when the watch already ended (refused, or its
        stream failed)."""
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.unwatch(self.id)


class ShardLink:
    """One shard's ``Exchange`` stream, opened on first use and again after it failed."""

    def __init__(self, name: str, stub: rules_pb2_grpc.RulesServiceStub) -> None:
        self.name = name
        """The shard as messages name it (``rules-chess shard 0``)."""
        self._stub = stub
        self._ids = itertools.count(1)
        self._stream: _Stream | None = None
        self._closed = False
        self.streams_opened = 0
        """Exchange streams opened so far (one, unless a stream failed)."""
        self.requests_sent = 0
        """``ExchangeRequest`` messages written so far: each one a batch of calls."""
        self.calls_sent = 0
        """Calls written so far (submits, watches, unwatches)."""

    @property
    def pending(self) -> int:
        """Submits waiting for their answer and watches open, on the current stream."""
        stream = self._stream
        return 0 if stream is None else len(stream.submits) + len(stream.watches)

    def _current(self) -> _Stream:
        stream = self._stream
        if stream is None or not stream.open:
            if self._closed:
                raise Unavailable(
                    f"{self.name}: the gateway is shutting down",
                    reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN,
                )
            stream = self._stream = _Stream(self, self._stub.Exchange())
            self.streams_opened += 1
        return stream

    async def submit(self, request: rules_pb2.SubmitActionRequest, timeout_s: float) -> int:
        """Submit an action: its sequence, or the shard's refusal as a :class:`ServiceError` with the
        shard's code and reason. ``Unavailable`` when the shard does not answer within ``timeout_s`` or
        its stream fails meanwhile: the action may or may not have been applied, so the client retries
        with the same idempotency key."""
        stream = self._current()
        call_id = next(self._ids)
        answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        stream.submits[call_id] = answer
        stream.send(rules_pb2.ExchangeCall(id=call_id, submit=request, request_id=current_request_id()))
        try:
            async with asyncio.timeout(timeout_s):
                return await answer
        except TimeoutError:
            raise Unavailable(
                f"{self.name} did not answer in time",
                reason=ErrorReason.ERROR_REASON_BACKEND_UNAVAILABLE,
                metadata={SERVICE_METADATA: self.name},
            ) from None
        finally:
            stream.submits.pop(call_id, None)

    def watch(self, request: rules_pb2.WatchRequest, subscriber: Subscriber) -> Watch:
        """Watch a match: ``subscriber`` gets its updates, then a refusal when the watch ends (the match
        is over, the shard refused it, or the stream failed). Close the returned handle when done."""
        stream = self._current()
        watch_id = next(self._ids)
        stream.watches[watch_id] = subscriber
        stream.send(rules_pb2.ExchangeCall(id=watch_id, watch=request, request_id=current_request_id()))
        return Watch(stream, watch_id)

    def next_id(self) -> int:
        return next(self._ids)

    def forget(self, stream: _Stream) -> None:
        """``stream`` failed: the next use opens a new one."""
        if self._stream is stream:
            self._stream = None

    async def close(self) -> None:
        """End the stream (everything waiting on it is told ``UNAVAILABLE``); later uses are refused."""
        self._closed = True
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.fail(f"{self.name}: the gateway is shutting down")
            await stream.stopped()


class _Stream:
    """One ``Exchange`` call of a link: its calls in flight, and the tasks that write and read it."""

    def __init__(self, link: ShardLink, call: grpc.aio.StreamStreamCall) -> None:
        self.link = link
        self.call = call
        self.open = True
        self.submits: dict[int, asyncio.Future[int]] = {}
        self.watches: dict[int, Subscriber] = {}
        self._queued: list[rules_pb2.ExchangeCall] = []
        self._wake = asyncio.Event()
        # The stream serves every caller: its tasks must not carry (nor log with) the request id of the
        # call that happened to open it.
        loop = asyncio.get_running_loop()
        self._sender = loop.create_task(self._send(), context=contextvars.Context())
        self._receiver = loop.create_task(self._receive(), context=contextvars.Context())

    def send(self, call: rules_pb2.ExchangeCall) -> None:
        self._queued.append(call)
        self._wake.set()

    def unwatch(self, watch_id: int) -> None:
        if self.watches.pop(watch_id, None) is not None and self.open:
            self.send(
                rules_pb2.ExchangeCall(id=self.link.next_id(), unwatch=rules_pb2.Unwatch(watch_id=watch_id))
            )

    async def _send(self) -> None:
        """Write the queued calls: wait for the first, then take everything queued by then (no await in
        between) as one message. Calls queued while a message is being written make the next batch, so
        the busier the shard, the bigger the batches."""
        try:
            while True:
                await self._wake.wait()
                batch = self._queued[:MAX_BATCH]
                del self._queued[:MAX_BATCH]
                if not self._queued:
                    self._wake.clear()
                await self.call.write(rules_pb2.ExchangeRequest(calls=batch))
                self.link.requests_sent += 1
                self.link.calls_sent += len(batch)
        except grpc.aio.AioRpcError as error:
            self.fail(_ended(self.link.name, error))
        except asyncio.InvalidStateError:  # the call is over: the receiver says why
            self.fail(f"{self.link.name} ended its play stream")

    async def _receive(self) -> None:
        try:
            while True:
                response = await self.call.read()
                if response is grpc.aio.EOF:
                    self.fail(f"{self.link.name} ended its play stream")
                    return
                for reply in response.replies:
                    self._dispatch(reply)
        except grpc.aio.AioRpcError as error:
            self.fail(_ended(self.link.name, error))

    def _dispatch(self, reply: rules_pb2.ExchangeReply) -> None:
        """Hand one reply to whoever waits for it; a reply for an id nobody waits for (a submit that
        timed out, a watch just closed) is dropped."""
        which = reply.WhichOneof("reply")
        if which == "update":
            subscriber = self.watches.get(reply.id)
            if subscriber is not None:
                _tell(subscriber, reply.update)
        elif which == "submitted":
            answer = self.submits.pop(reply.id, None)
            if answer is not None and not answer.done():
                answer.set_result(reply.submitted.sequence)
        elif which == "refused":
            answer = self.submits.pop(reply.id, None)
            if answer is not None:
                if not answer.done():
                    answer.set_exception(refusal_error(reply.refused))
                return
            subscriber = self.watches.pop(reply.id, None)
            if subscriber is not None:
                _tell(subscriber, reply.refused)

    def fail(self, message: str) -> None:
        """The stream is over (``message`` says why, naming the shard): fail every submit waiting on it,
        end every watch, and let the next use open a new stream."""
        if not self.open:
            return
        self.open = False
        self.link.forget(self)
        self.call.cancel()
        current = asyncio.current_task()
        for task in (self._sender, self._receiver):
            if task is not current:
                task.cancel()
        submits, self.submits = self.submits, {}
        for answer in submits.values():
            if not answer.done():
                answer.set_exception(
                    Unavailable(
                        message,
                        reason=ErrorReason.ERROR_REASON_BACKEND_UNAVAILABLE,
                        metadata={SERVICE_METADATA: self.link.name},
                    )
                )
        watches, self.watches = self.watches, {}
        if watches:
            _log.info("shard_link.failed", shard=self.link.name, reason=message, watches=len(watches))
        ended = rules_pb2.Refusal(
            code=code_number(grpc.StatusCode.UNAVAILABLE),
            message=f"{message}; reconnect from your last sequence",
        )
        for subscriber in watches.values():
            _tell(subscriber, ended)
        self._queued.clear()

    async def stopped(self) -> None:
        await asyncio.gather(self._sender, self._receiver, return_exceptions=True)


def _ended(name: str, error: grpc.aio.AioRpcError) -> str:
    """Why a shard's stream failed, for people."""
    code = error.code()
    details = error.details() or code.name
    if code == grpc.StatusCode.UNAVAILABLE:
        return f"{name} is unavailable: {details}"
    return f"{name} ended its play stream ({code.name}: {details})"


def _tell(subscriber: Subscriber, item: rules_pb2.MatchUpdate | rules_pb2.Refusal) -> None:
    try:
        subscriber(item)
    except Exception:  # a bug in one subscriber must not stop the link for every other match
        _log.exception("shard_link.subscriber_failed")


class ShardLinks:
    """One :class:`ShardLink` per shard address, made on first use, all closed at shutdown."""

    def __init__(self, channels: RulesChannels) -> None:
        self._channels = channels
        self._links: dict[str, ShardLink] = {}
        self._closed = False

    def link(self, address: str, name: str, family: str) -> ShardLink:
        link = self._links.get(address)
        if link is None:
            if self._closed:
                raise Unavailable(
                    f"{name}: the gateway is shutting down", reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN
                )
            link = self._links[address] = ShardLink(name, self._channels.stub(address, family))
        return link

    async def close(self) -> None:
        self._closed = True
        for link in self._links.values():
            await link.close()
