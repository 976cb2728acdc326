"""The gRPC face of the gateway: authenticate, rate-limit, derive the seat, forward, pass errors through.

Nothing here holds match state: every call is answered by matchmaking or by the rules shard the match id
names. The only memory is the stream counts for presence, the rate-limit buckets and a bounded cache of
seat assignments (which never change once a match exists).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import grpc
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm_pb
from skillclassics.matchmaking.v1 import matchmaking_pb2_grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.match.ids import MatchId, MatchIdError
from libs.match.routing import RulesChannels, ShardDirectory, address_variable
from libs.runtime import validation
from libs.runtime.errors import (
    SERVICE_METADATA,
    ErrorReason,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    ServiceError,
    Unauthenticated,
    Unavailable,
    code_number,
    details_message,
    error_from_status,
    invalid_field,
    retry_after_ms,
)
from libs.runtime.interceptor import REQUEST_ID_METADATA
from libs.runtime.log import current_request_id
from libs.runtime.metrics import StreamCallMetrics
from services.gateway.limits import Admission, Priority, TokenBuckets
from services.gateway.presence import DEFAULT_LEASE_MS, DEFAULT_RENEW_MS, PresenceTracker
from services.gateway.shard_link import ShardLink, ShardLinks, refusal_error
from services.gateway.tokens import Claims, TokenError, TokenExpiredError, TokenVerifier

SEAT_CACHE_SIZE = 10_000
_PLAY_ACTIONS = StreamCallMetrics("skillclassics.gateway.v1.GatewayService", "Play", "action")
_T = TypeVar("_T")
_UNREACHABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


class Backends:
    """Where the gateway forwards: matchmaking, and each family's rules shards."""

    def __init__(
        self,
        matchmaking: matchmaking_pb2_grpc.MatchmakingServiceStub | None,
        shards: dict[str, list[str]],
        channels: RulesChannels,
        timeout_s: float,
        fairness: fairness_pb2_grpc.FairnessServiceStub | None = None,
        links: ShardLinks | None = None,
    ) -> None:
        self.matchmaking = matchmaking
        self.fairness = fairness
        self.shards = shards
        self.channels = channels
        self.timeout_s = timeout_s
        self.links = links if links is not None else ShardLinks(channels)

    def route(self, match_id: str) -> tuple[str, rules_pb2_grpc.RulesServiceStub]:
        """The rules shard serving ``match_id``: its name for messages and its stub."""
        name, address, family = self._shard(match_id)
        return name, self.channels.stub(address, family)

    def link(self, match_id: str) -> ShardLink:
        """The ``Exchange`` link to the rules shard serving ``match_id``."""
        name, address, family = self._shard(match_id)
        return self.links.link(address, name, family)

    def _shard(self, match_id: str) -> tuple[str, str, str]:
        """The rules shard serving ``match_id``: its name for messages, its address and its family."""
        try:
            parsed = MatchId.parse(match_id)
        except MatchIdError as error:
            raise invalid_field("match_id", str(error)) from None
        addresses = self.shards.get(parsed.family)
        if not addresses:
            raise NotFound(
                f"no {parsed.family} rules service is configured here ({address_variable(parsed.family)})",
                reason=ErrorReason.ERROR_REASON_FAMILY_NOT_SERVED,
            )
        if parsed.shard >= len(addresses) and isinstance(self.shards, ShardDirectory):
            # Perhaps a shard just added, which matchmaking read from the shards file and placed a match on
            # before this gateway's next periodic read: read it now (a stat() when it has not changed).
            self.shards.refresh()
            addresses = self.shards.get(parsed.family, addresses)
        if parsed.shard >= len(addresses):
            raise NotFound(
                f"no match {match_id}: {parsed.family} has shards 0-{len(addresses) - 1}",
                reason=ErrorReason.ERROR_REASON_MATCH_NOT_FOUND,
            )
        return f"rules-{parsed.family} shard {parsed.shard}", addresses[parsed.shard], parsed.family

    def stub(self, match_id: str) -> rules_pb2_grpc.RulesServiceStub:
        return self.route(match_id)[1]

    def lobby(self) -> matchmaking_pb2_grpc.MatchmakingServiceStub:
        if self.matchmaking is None:
            raise Unavailable(
                "matchmaking is not configured (MATCHMAKING_ADDRESS)",
                reason=ErrorReason.ERROR_REASON_NOT_CONFIGURED,
                metadata={SERVICE_METADATA: "matchmaking"},
            )
        return self.matchmaking

    def proofs(self) -> fairness_pb2_grpc.FairnessServiceStub:
        if self.fairness is None:
            raise Unavailable(
                "fairness is not configured (FAIRNESS_ADDRESS)",
                reason=ErrorReason.ERROR_REASON_NOT_CONFIGURED,
                metadata={SERVICE_METADATA: "fairness"},
            )
        return self.fairness


def _metadata() -> tuple[tuple[str, str], ...]:
    request_id = current_request_id()
    return ((REQUEST_ID_METADATA, request_id),) if request_id else ()


async def _refuse(backend: str, error: grpc.aio.AioRpcError, context: grpc.aio.ServicerContext) -> NoReturn:
    """Answer the caller with a backend's refusal: its code and reason, or UNAVAILABLE naming it (the
    backend down, slow, or cutting the call short)."""
    code = error.code()
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        raise Unavailable(
            f"{backend} did not answer in time",
            reason=ErrorReason.ERROR_REASON_BACKEND_UNAVAILABLE,
            metadata={SERVICE_METADATA: backend},
        ) from None
    if code == grpc.StatusCode.CANCELLED:
        # Not the caller's cancellation (that cancels this handler's task, not the backend's answer): the
        # backend cut the call short, as a server shutting down does to the calls it had received but
        # not begun (grpc/grpc#41785). Passed on, CANCELLED would not be retried; the call is safe to
        # repeat (idempotency keys, or a read).
        raise Unavailable(
            f"{backend} is unavailable: it cut the call short ({error.details()}); retry",
            reason=ErrorReason.ERROR_REASON_BACKEND_UNAVAILABLE,
            metadata={SERVICE_METADATA: backend},
        ) from None
    if code == grpc.StatusCode.UNAVAILABLE:
        # The backend's retry guidance (its database is down: "retry in N ms") goes on to the caller.
        wait = retry_after_ms(error.trailing_metadata())
        raise Unavailable(
            f"{backend} is unavailable: {error.details()}",
            retry_after_ms=wait,
            reason=ErrorReason.ERROR_REASON_BACKEND_UNAVAILABLE,
            metadata={SERVICE_METADATA: backend},
        ) from None
    # Any other refusal goes on whole: its code, message and details (reason, metadata, fields, retry).
    raise error_from_status(code, error.details() or code.name, error.trailing_metadata())


_SHUTTING_DOWN = "the gateway is shutting down; reconnect from your last sequence"
_SHUTTING_DOWN_RETRY = "the gateway is shutting down; retry"
"""A unary call the gateway cut short because it is shutting down (safe to repeat: actions and new
tables carry idempotency keys, the other calls are reads)."""
SHUTDOWN_ANSWER_MARGIN_S = 0.5
"""How long before the end of the shutdown grace the gateway cuts the unary calls still waiting for a
backend, so that each ends with its own ``UNAVAILABLE`` (:data:`_SHUTTING_DOWN_RETRY`, the request id)
rather than with grpc cancelling every call when the grace ends (at most half the grace)."""
_EXPIRED = "your token expired: sign in again and reconnect from your last sequence"
"""The fairness specification's limit on a client seed (docs/fairness.md, section 3)."""
DEFAULT_MAX_CALLS = 2048
"""Unary calls in flight one gateway process serves at once (``GATEWAY_MAX_CALLS``)."""
DEFAULT_MAX_STREAMS = 20_000
"""Streams one gateway process keeps open at once (``GATEWAY_MAX_STREAMS``)."""
FIRST_MESSAGE_GRACE_S = 1.0
"""How long a Play stream refused on its metadata may take to send its first message before the refusal
(so that the client sees the refusal, not a failed write)."""
PLAY_BACKLOG = 1024
"""Messages a Play stream may have waiting for its client. A client that stops reading is cut off past
it (``RESOURCE_EXHAUSTED``) instead of growing the gateway's memory; it reconnects from its last
sequence."""
WRITE_GRACE_S = 1.0
"""How long an ending Play stream waits for the write under way to finish before its status is sent
(a write only takes longer for a client that stopped reading)."""
_FELL_BEHIND = (
    f"you fell behind: more than {PLAY_BACKLOG} messages were waiting for you; "
    "reconnect from your last sequence"
)

_Unary = TypeVar("_Unary", bound=Callable[..., Awaitable[Any]])
_Streaming = TypeVar("_Streaming", bound=Callable[..., AsyncIterator[Any]])
_Writing = TypeVar("_Writing", bound=Callable[..., Awaitable[None]])


def _admitted(priority: Priority) -> Callable[[_Unary], _Unary]:
    """A unary handler served only within the gateway's capacity (``RESOURCE_EXHAUSTED`` past it)."""

    def wrap(method: _Unary) -> _Unary:
        @functools.wraps(method)
        async def handler(self: GatewayServicer, request: Any, context: grpc.aio.ServicerContext) -> Any:
            with self.admission.call(priority):
                return await method(self, request, context)

        return handler  # type: ignore[return-value]

    return wrap


def _admitted_stream(priority: Priority) -> Callable[[_Streaming], _Streaming]:
    """A streaming handler open only within the gateway's stream capacity."""

    def wrap(method: _Streaming) -> _Streaming:
        @functools.wraps(method)
        async def handler(self: GatewayServicer, request: Any, context: grpc.aio.ServicerContext) -> Any:
            with self.admission.stream(priority):
                async for item in method(self, request, context):
                    yield item

        return handler  # type: ignore[return-value]

    return wrap


def _admitted_writer(priority: Priority) -> Callable[[_Writing], _Writing]:
    """A streaming handler that writes with ``context.write`` (a coroutine, not a generator), open only
    within the gateway's stream capacity."""

    def wrap(method: _Writing) -> _Writing:
        @functools.wraps(method)
        async def handler(self: GatewayServicer, requests: Any, context: grpc.aio.ServicerContext) -> None:
            with self.admission.stream(priority):
                await method(self, requests, context)

        return handler  # type: ignore[return-value]

    return wrap


class _PlayOutbox:
    """What one Play stream has to write to its client, bounded; its actions in flight; how it ends.

    Updates, answers and the end come from other tasks (the shard link's receiver, the actions in flight,
    the token's timer, ``drain()``); one writer task writes the messages in order. An error ends the
    stream at once, apart from the messages, so that it takes effect even while the writer is stuck on a
    client that stopped reading (a write waits for the client's flow-control window). A stream that is
    over without an error (the match ended, or the client is done sending) ends OK once every action in
    flight is answered and every message written.

    The writer stops between two messages once the stream has ended (see :func:`_stop_writer`): it is not
    cancelled in the middle of ``context.write``, which is what once kept statuses from clients.
    """

    __slots__ = ("_closing", "_ended", "_limit", "_messages", "_more", "actions", "error")

    def __init__(self, limit: int) -> None:
        self._messages: collections.deque[pb.PlayResponse | None] = collections.deque()
        self._limit = limit
        self._more = asyncio.Event()
        self._ended = asyncio.Event()
        self._closing = False
        self.actions: set[asyncio.Task[None]] = set()
        """Actions in flight: each waits for its answer from the shard."""
        self.error: BaseException | None = None

    def put(self, message: pb.PlayResponse) -> None:
        if self._ended.is_set():
            return
        if len(self._messages) >= self._limit:
            self.end(ResourceExhausted(_FELL_BEHIND, reason=ErrorReason.ERROR_REASON_FELL_BEHIND))
            return
        self._messages.append(message)
        self._more.set()

    def relay(self, item: rules_pb2.MatchUpdate | rules_pb2.Refusal) -> None:
        """The shard link's subscriber: an update of the watch, or the refusal that ended it (OK: the
        match is over and its final update was sent)."""
        if isinstance(item, rules_pb2.MatchUpdate):
            self.put(pb.PlayResponse(update=item))
        elif item.code == code_number(grpc.StatusCode.OK):
            self.close()
        else:
            self.end(refusal_error(item))

    def track(self, action: asyncio.Task[None]) -> None:
        self.actions.add(action)
        action.add_done_callback(self._answered)

    def _answered(self, action: asyncio.Task[None]) -> None:
        self.actions.discard(action)
        if self._closing and not self.actions:
            self._finish()

    def close(self) -> None:
        """End the stream OK once every action in flight is answered and everything before is written."""
        self._closing = True
        if not self.actions:
            self._finish()

    def _finish(self) -> None:
        self._messages.append(None)
        self._more.set()

    def end(self, error: BaseException | None) -> None:
        """End the stream now, with ``error``'s status, dropping what was not written yet."""
        if not self._ended.is_set():
            self.error = error
            self._ended.set()
            self._more.set()  # a writer waiting for a message stops

    def end_on_failure(self, task: asyncio.Task[None]) -> None:
        """A done-callback: a helper task that failed ends the stream with its error."""
        if not task.cancelled() and task.exception() is not None:
            self.end(task.exception())

    async def ended(self) -> BaseException | None:
        await self._ended.wait()
        return self.error

    async def write(self, write: Callable[[pb.PlayResponse], Awaitable[None]]) -> None:
        """Write the messages in order until the end of the stream; once it has ended, return between
        two writes (the write under way finishes, nothing more is written)."""
        while not self._ended.is_set():
            if not self._messages:
                self._more.clear()
                await self._more.wait()
                continue
            message = self._messages.popleft()
            if message is None:
                self.end(None)
                return
            await write(message)


class GatewayServicer(gateway_pb2_grpc.GatewayServiceServicer):
    """Implements ``skillclassics.gateway.v1.GatewayService``."""

    def __init__(
        self,
        tokens: TokenVerifier,
        backends: Backends,
        calls: TokenBuckets,
        streams: TokenBuckets,
        clock: Callable[[], float] = time.time,
        admission: Admission | None = None,
        presence: tuple[int, int] = (DEFAULT_RENEW_MS, DEFAULT_LEASE_MS),
    ) -> None:
        """``presence``: the renewal interval and the lease of the presence leases, in ms
        (:func:`~services.gateway.presence.presence_settings`)."""
        self.admission = (
            admission if admission is not None else Admission(DEFAULT_MAX_CALLS, DEFAULT_MAX_STREAMS)
        )
        self._tokens = tokens
        self._backends = backends
        self._calls = calls
        self._streams = streams
        self._clock = clock
        renew_ms, lease_ms = presence
        self.presence = PresenceTracker(
            backends.stub, backends.timeout_s, renew_ms=renew_ms, lease_ms=lease_ms
        )
        self._seats: collections.OrderedDict[str, tuple[str, ...]] = collections.OrderedDict()
        self._open_calls: set[Any] = set()
        self._plays: set[_PlayOutbox] = set()
        self._draining = False
        self._unary_calls: set[Any] = set()
        """The backend calls of unary calls in flight (cut short near the end of the shutdown grace)."""
        self._cutting = False
        """The shutdown grace is nearly over: unary calls are answered at once (UNAVAILABLE, retry)."""
        self._cut_timer: asyncio.TimerHandle | None = None

    # -- the caller ----------------------------------------------------------------------------------------

    def _claims(self, context: grpc.aio.ServicerContext) -> Claims:
        """The caller's verified token (``UNAUTHENTICATED`` with the reason for anything else)."""
        headers = [value for key, value in context.invocation_metadata() or () if key == "authorization"]
        if len(headers) > 1:
            raise Unauthenticated(
                "send one authorization header, not several", reason=ErrorReason.ERROR_REASON_TOKEN_MISSING
            )
        header = headers[0] if headers else None
        if not isinstance(header, str) or not header:
            raise Unauthenticated(
                "no token: send the metadata 'authorization: Bearer <token>'",
                reason=ErrorReason.ERROR_REASON_TOKEN_MISSING,
            )
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated(
                "the authorization metadata must be 'Bearer <token>'",
                reason=ErrorReason.ERROR_REASON_TOKEN_MISSING,
            )
        try:
            return self._tokens.verify(token.strip(), int(self._clock()))
        except TokenError as error:
            expired = isinstance(error, TokenExpiredError)
            reason = (
                ErrorReason.ERROR_REASON_TOKEN_EXPIRED if expired else ErrorReason.ERROR_REASON_TOKEN_INVALID
            )
            raise Unauthenticated(str(error), reason=reason) from None

    def _player(self, context: grpc.aio.ServicerContext) -> str:
        """The signed-in caller, who has a call left in their allowance."""
        player = self._claims(context).player_id
        self._calls.take(player)
        return player

    # -- forwarding ----------------------------------------------------------------------------------------

    async def _unary(
        self,
        backend: str,
        method: Callable[..., Awaitable[_T]],
        request: Any,
        context: grpc.aio.ServicerContext,
    ) -> _T:
        """``method``'s answer to ``request``; its refusal is the caller's (:func:`_refuse`). A call the
        gateway cuts short because it is shutting down (:meth:`drain`) is ``UNAVAILABLE``, retry."""
        if self._cutting:
            raise Unavailable(_SHUTTING_DOWN_RETRY, reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN)
        call: Any = method(request, timeout=self._backends.timeout_s, metadata=_metadata())
        self._unary_calls.add(call)
        try:
            answer: _T = await call
            return answer
        except grpc.aio.AioRpcError as error:
            if self._cut_short() and error.code() == grpc.StatusCode.CANCELLED:
                raise Unavailable(
                    _SHUTTING_DOWN_RETRY, reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN
                ) from None
            await _refuse(backend, error, context)
        except asyncio.CancelledError:
            # The backend call was cancelled by drain() (this task itself was not cancelled): tell the
            # caller, who may retry, instead of letting the cancellation end the call CANCELLED.
            task = asyncio.current_task()
            if self._cut_short() and task is not None and task.cancelling() == 0:
                raise Unavailable(
                    _SHUTTING_DOWN_RETRY, reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN
                ) from None
            raise
        finally:
            self._unary_calls.discard(call)

    async def _lobby(self, name: str, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._unary("matchmaking", getattr(self._backends.lobby(), name), request, context)

    async def _seats_of(self, match_id: str, context: grpc.aio.ServicerContext) -> tuple[str, ...]:
        """Who sits in each seat of ``match_id`` (asked of its rules shard once, then remembered)."""
        seats = self._seats.get(match_id)
        if seats is not None:
            self._seats.move_to_end(match_id)
            return seats
        backend, stub = self._backends.route(match_id)
        reply = await self._unary(
            backend, stub.GetMatch, rules_pb2.GetMatchRequest(match_id=match_id, spectator=True), context
        )
        seats = tuple(s.player_id for s in sorted(reply.seats, key=lambda s: s.seat))
        self._seats[match_id] = seats
        if len(self._seats) > SEAT_CACHE_SIZE:
            self._seats.popitem(last=False)
        return seats

    async def _seat(self, match_id: str, player: str, context: grpc.aio.ServicerContext) -> int | None:
        seats = await self._seats_of(match_id, context)
        return seats.index(player) if player in seats else None

    # -- lobby ---------------------------------------------------------------------------------------------

    @_admitted(Priority.NEW_WORK)
    async def WhoAmI(self, request: pb.WhoAmIRequest, context: grpc.aio.ServicerContext) -> pb.WhoAmIResponse:
        claims = self._claims(context)
        # expires_at (seconds) is deprecated but still filled for v1's older callers.
        return pb.WhoAmIResponse(
            player_id=claims.player_id,
            expires_at=claims.expires_at,
            expires_at_ms=claims.expires_at * 1000,
        )

    @_admitted(Priority.NEW_WORK)
    async def CreateTable(
        self, request: pb.CreateTableRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateTableResponse:
        forwarded = mm_pb.CreateTableRequest(
            player_id=self._player(context),
            family=request.family,
            options=request.options,
            time_control=request.time_control,
            entry_fee_minor=request.entry_fee_minor,
            currency=request.currency,
            visibility=request.visibility,
            idempotency_key=request.idempotency_key,
            disconnect_policy=request.disconnect_policy,
        )
        reply = await self._lobby("CreateTable", forwarded, context)
        return pb.CreateTableResponse(table=reply.table)

    @_admitted(Priority.NEW_WORK)
    async def ListTables(
        self, request: pb.ListTablesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListTablesResponse:
        self._player(context)
        forwarded = mm_pb.ListTablesRequest(
            family=request.family,
            max_entry_fee_minor=request.max_entry_fee_minor,
            currency=request.currency,
            base_ms=request.base_ms,
            limit=request.limit,
            free_only=request.free_only,
            disconnect_policy=request.disconnect_policy,
        )
        reply = await self._lobby("ListTables", forwarded, context)
        return pb.ListTablesResponse(tables=reply.tables)

    @_admitted(Priority.NEW_WORK)
    async def JoinTable(
        self, request: pb.JoinTableRequest, context: grpc.aio.ServicerContext
    ) -> pb.JoinTableResponse:
        forwarded = mm_pb.JoinTableRequest(player_id=self._player(context), table_id=request.table_id)
        reply = await self._lobby("JoinTable", forwarded, context)
        return pb.JoinTableResponse(table=reply.table)

    @_admitted(Priority.PLAY)
    async def LeaveTable(
        self, request: pb.LeaveTableRequest, context: grpc.aio.ServicerContext
    ) -> pb.LeaveTableResponse:
        forwarded = mm_pb.LeaveTableRequest(player_id=self._player(context), table_id=request.table_id)
        reply = await self._lobby("LeaveTable", forwarded, context)
        return pb.LeaveTableResponse(table=reply.table)

    @_admitted(Priority.NEW_WORK)
    async def EnterQueue(
        self, request: pb.EnterQueueRequest, context: grpc.aio.ServicerContext
    ) -> pb.EnterQueueResponse:
        forwarded = mm_pb.EnterQueueRequest(
            player_id=self._player(context),
            family=request.family,
            options=request.options,
            time_control=request.time_control,
            entry_fee_minor=request.entry_fee_minor,
            currency=request.currency,
            disconnect_policy=request.disconnect_policy,
        )
        reply = await self._lobby("EnterQueue", forwarded, context)
        return pb.EnterQueueResponse(pool=reply.pool, rating=reply.rating, entered_at_ms=reply.entered_at_ms)

    @_admitted(Priority.PLAY)
    async def LeaveQueue(
        self, request: pb.LeaveQueueRequest, context: grpc.aio.ServicerContext
    ) -> pb.LeaveQueueResponse:
        forwarded = mm_pb.LeaveQueueRequest(player_id=self._player(context))
        reply = await self._lobby("LeaveQueue", forwarded, context)
        return pb.LeaveQueueResponse(left=reply.left)

    @_admitted_stream(Priority.NEW_WORK)
    async def WatchLobby(
        self, request: pb.WatchLobbyRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WatchLobbyResponse]:
        claims = self._claims(context)
        player = claims.player_id
        self._streams.take(player)
        call = self._backends.lobby().WatchLobby(
            mm_pb.WatchLobbyRequest(player_id=player), metadata=_metadata()
        )
        async for event in self._relay("matchmaking", call, context, claims.expires_at):
            reply = pb.WatchLobbyResponse(at_ms=event.at_ms)
            which = event.WhichOneof("event")
            if which is not None:
                getattr(reply, which).CopyFrom(getattr(event, which))
            yield reply

    @_admitted(Priority.NEW_WORK)
    async def GetRatings(
        self, request: pb.GetRatingsRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetRatingsResponse:
        forwarded = mm_pb.GetRatingsRequest(player_id=self._player(context))
        reply = await self._lobby("GetRatings", forwarded, context)
        return pb.GetRatingsResponse(ratings=reply.ratings, history=reply.history)

    @_admitted(Priority.NEW_WORK)
    async def GetMatchHistory(
        self, request: pb.GetMatchHistoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetMatchHistoryResponse:
        forwarded = mm_pb.GetMatchHistoryRequest(player_id=self._player(context), family=request.family)
        reply = await self._lobby("GetMatchHistory", forwarded, context)
        return pb.GetMatchHistoryResponse(matches=reply.matches)

    @_admitted(Priority.NEW_WORK)
    async def SaveFormation(
        self, request: pb.SaveFormationRequest, context: grpc.aio.ServicerContext
    ) -> pb.SaveFormationResponse:
        forwarded = mm_pb.SaveFormationRequest(
            player_id=self._player(context), name=request.name, formation=request.formation
        )
        reply = await self._lobby("SaveFormation", forwarded, context)
        return pb.SaveFormationResponse(formation=reply.formation, replaced=reply.replaced)

    @_admitted(Priority.PLAY)  # read to set up a match being played (the setup phase has a deadline)
    async def ListFormations(
        self, request: pb.ListFormationsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListFormationsResponse:
        forwarded = mm_pb.ListFormationsRequest(player_id=self._player(context))
        reply = await self._lobby("ListFormations", forwarded, context)
        return pb.ListFormationsResponse(formations=reply.formations)

    @_admitted(Priority.NEW_WORK)
    async def DeleteFormation(
        self, request: pb.DeleteFormationRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteFormationResponse:
        forwarded = mm_pb.DeleteFormationRequest(player_id=self._player(context), name=request.name)
        reply = await self._lobby("DeleteFormation", forwarded, context)
        return pb.DeleteFormationResponse(formation=reply.formation)

    # -- play ----------------------------------------------------------------------------------------------

    @_admitted(Priority.PLAY)
    async def SubmitAction(
        self, request: pb.SubmitActionRequest, context: grpc.aio.ServicerContext
    ) -> pb.SubmitActionResponse:
        player = self._player(context)
        backend, stub = self._backends.route(request.match_id)
        seat = await self._seat(request.match_id, player, context)
        if seat is None:
            raise PermissionDenied(
                f"you are not seated in match {request.match_id}", reason=ErrorReason.ERROR_REASON_NOT_SEATED
            )
        forwarded = rules_pb2.SubmitActionRequest(
            match_id=request.match_id,
            seat=seat,
            idempotency_key=request.idempotency_key,
            action=request.action,
        )
        reply = await self._unary(backend, stub.SubmitAction, forwarded, context)
        return pb.SubmitActionResponse(sequence=reply.sequence, update=reply.update, seat=seat)

    @_admitted(Priority.PLAY)
    async def GetMatch(
        self, request: pb.GetMatchRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetMatchResponse:
        player = self._player(context)
        backend, stub = self._backends.route(request.match_id)
        seat = await self._seat(request.match_id, player, context)
        forwarded = rules_pb2.GetMatchRequest(match_id=request.match_id)
        if request.spectator:
            forwarded.spectator = True
        elif seat is None:
            raise PermissionDenied(
                f"you are not seated in match {request.match_id}; ask with spectator set for the public view",
                reason=ErrorReason.ERROR_REASON_NOT_SEATED,
            )
        else:
            forwarded.seat = seat
        reply = await self._unary(backend, stub.GetMatch, forwarded, context)
        answer = pb.GetMatchResponse(
            update=reply.update,
            seats=reply.seats,
            options=reply.options,
            time_control=reply.time_control,
            stand_in_after_ms=reply.stand_in_after_ms,
        )
        if seat is not None:
            answer.seat = seat
        return answer

    @_admitted(Priority.NEW_WORK)
    async def GetRecord(
        self, request: pb.GetRecordRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetRecordResponse:
        self._player(context)
        backend, stub = self._backends.route(request.match_id)
        reply = await self._unary(
            backend, stub.GetRecord, rules_pb2.GetRecordRequest(match_id=request.match_id), context
        )
        return pb.GetRecordResponse(
            match_id=reply.match_id,
            result=reply.result,
            record=reply.record,
            record_format=reply.record_format,
            fairness_commitment=reply.fairness_commitment,
            fairness_version=reply.fairness_version,
            fairness_draws=reply.fairness_draws,
        )

    @_admitted(Priority.NEW_WORK)
    async def GetFairnessProof(
        self, request: pb.GetFairnessProofRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetFairnessProofResponse:
        self._player(context)
        self._backends.route(request.match_id)  # a well-formed id of a family served here
        reply = await self._unary(
            "fairness",
            self._backends.proofs().Reveal,
            fairness_pb2.RevealRequest(match_id=request.match_id),
            context,
        )
        return pb.GetFairnessProofResponse(
            match_id=reply.match_id, commitment=reply.commitment, proof_json=reply.proof_json
        )

    @_admitted(Priority.PLAY)
    async def AddClientSeed(
        self, request: pb.AddClientSeedRequest, context: grpc.aio.ServicerContext
    ) -> pb.AddClientSeedResponse:
        player = self._player(context)
        # The seed's length (1-64 bytes) is the contract's rule.
        seat = await self._seat(request.match_id, player, context)
        if seat is None:
            raise PermissionDenied(
                f"you are not seated in match {request.match_id}", reason=ErrorReason.ERROR_REASON_NOT_SEATED
            )
        reply = await self._unary(
            "fairness",
            self._backends.proofs().AddClientSeed,
            fairness_pb2.AddClientSeedRequest(
                match_id=request.match_id, seat=seat, client_seed=request.client_seed
            ),
            context,
        )
        return pb.AddClientSeedResponse(seat=seat, seeds=len(reply.client_seeds))

    @_admitted_stream(Priority.PLAY)
    async def WatchMatch(
        self, request: pb.WatchMatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WatchMatchResponse]:
        claims = self._claims(context)
        player = claims.player_id
        self._streams.take(player)
        backend, stub = self._backends.route(request.match_id)
        forwarded = rules_pb2.WatchRequest(match_id=request.match_id, from_sequence=request.from_sequence)
        seat: int | None = None
        if request.spectator:
            forwarded.spectator = True
        else:
            seat = await self._seat(request.match_id, player, context)
            if seat is None:
                raise PermissionDenied(
                    f"you are not seated in match {request.match_id}; watch with spectator set instead",
                    reason=ErrorReason.ERROR_REASON_NOT_SEATED,
                )
            forwarded.seat = seat
        call = stub.Watch(forwarded, metadata=_metadata())
        if seat is not None:
            self.presence.opened(request.match_id, seat)
        try:
            async for response in self._relay(backend, call, context, claims.expires_at):
                yield pb.WatchMatchResponse(update=response.update)
        finally:
            if seat is not None:
                self.presence.closed(request.match_id, seat)

    async def _relay(
        self, backend: str, call: Any, context: grpc.aio.ServicerContext, expires_at: int
    ) -> AsyncIterator[Any]:
        """The messages of a backend stream; its end or refusal is the caller's. The stream ends with
        ``UNAUTHENTICATED`` when the caller's token expires (a token is checked when a stream opens, and
        a stream must not outlive it)."""
        self._open_calls.add(call)
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            call.cancel()

        loop = asyncio.get_running_loop()
        expiry = loop.call_later(max(0.0, expires_at - self._clock()), expire)
        try:
            if self._draining:
                raise Unavailable(
                    "the gateway is shutting down; reconnect", reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN
                )
            async for message in call:
                yield message
        except grpc.aio.AioRpcError as error:
            if expired:
                raise Unauthenticated(_EXPIRED, reason=ErrorReason.ERROR_REASON_TOKEN_EXPIRED) from None
            if self._draining:
                raise Unavailable(_SHUTTING_DOWN, reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN) from None
            await _refuse(backend, error, context)
        except asyncio.CancelledError:
            # drain() or the token's expiry cancelled the backend call (this task itself was not
            # cancelled): tell the caller.
            task = asyncio.current_task()
            if task is not None and task.cancelling() == 0:
                if expired:
                    raise Unauthenticated(_EXPIRED, reason=ErrorReason.ERROR_REASON_TOKEN_EXPIRED) from None
                if self._draining:
                    raise Unavailable(_SHUTTING_DOWN, reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN) from None
            raise
        finally:
            expiry.cancel()
            self._open_calls.discard(call)
            call.cancel()

    @_admitted_writer(Priority.PLAY)
    async def Play(  # type: ignore[override]  # a coroutine writing with context.write, not a generator
        self, requests: AsyncIterator[pb.PlayRequest], context: grpc.aio.ServicerContext
    ) -> None:
        """A seated player's updates and actions over one stream, carried to the shard by its link.

        Written with ``context.write`` by a task of its own rather than yielded, so that the stream can
        end at once (token expiry, shutdown, a client that fell behind) even while a write waits for a
        client that stopped reading.
        """
        requests = aiter(requests)
        try:
            claims = self._claims(context)
            player = claims.player_id
            self._streams.take(player)
        except ServiceError:
            await _read_first(requests)
            raise
        try:
            first = await anext(requests)
        except StopAsyncIteration:
            first = pb.PlayRequest()
        if first.WhichOneof("kind") != "open":
            raise InvalidArgument(
                "the first message of a Play stream must be open (the match id and your last sequence)",
                reason=ErrorReason.ERROR_REASON_INVALID_REQUEST,
            )
        match_id = first.open.match_id
        link = self._backends.link(match_id)
        seat = await self._seat(match_id, player, context)
        if seat is None:
            raise PermissionDenied(
                f"you are not seated in match {match_id}: Play is for seated players; "
                "spectators use WatchMatch",
                reason=ErrorReason.ERROR_REASON_NOT_SEATED,
            )
        if self._draining:
            raise Unavailable(_SHUTTING_DOWN, reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN)
        # The response headers go out now, on their own. Otherwise they would go with the first write
        # (``opened``), and grpc counts them as sent only once that write has completed: a stream ended
        # meanwhile (the shard link failing at once, as it does while a shard is down) would then try to
        # send them again with its status, which grpc refuses (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS), and
        # the client would never get a status at all.
        await context.send_initial_metadata(())
        outbox = _PlayOutbox(PLAY_BACKLOG)
        outbox.put(pb.PlayResponse(opened=pb.PlayOpened(match_id=match_id, seat=seat)))
        watch = link.watch(
            rules_pb2.WatchRequest(match_id=match_id, seat=seat, from_sequence=first.open.from_sequence),
            outbox.relay,
        )
        self.presence.opened(match_id, seat)
        self._plays.add(outbox)
        loop = asyncio.get_running_loop()
        expiry = loop.call_later(
            max(0.0, claims.expires_at - self._clock()),
            outbox.end,
            Unauthenticated(_EXPIRED, reason=ErrorReason.ERROR_REASON_TOKEN_EXPIRED),
        )
        writer = loop.create_task(outbox.write(context.write))
        reader = loop.create_task(self._play_actions(requests, player, link, match_id, seat, outbox))
        for task in (writer, reader):
            task.add_done_callback(outbox.end_on_failure)
        try:
            error = await outbox.ended()
        finally:
            expiry.cancel()
            watch.close()
            self.presence.closed(match_id, seat)
            self._plays.discard(outbox)
            reader.cancel()
            for action in list(outbox.actions):
                action.cancel()
            outbox.end(None)  # (when this task was cancelled: the client went away) the writer stops too
            await _stop_writer(writer)
        if error is not None:
            raise error

    async def _play_actions(
        self,
        requests: AsyncIterator[pb.PlayRequest],
        player: str,
        link: ShardLink,
        match_id: str,
        seat: int,
        outbox: _PlayOutbox,
    ) -> None:
        """Submit each action of a Play stream as it comes (several may be in flight at once), for the
        stream's match and the caller's own seat; when the client is done sending, close the stream."""
        loop = asyncio.get_running_loop()
        async for message in requests:
            if message.WhichOneof("kind") != "action":
                outbox.end(
                    InvalidArgument(
                        "a Play stream is opened once: every later message must be an action",
                        reason=ErrorReason.ERROR_REASON_INVALID_REQUEST,
                    )
                )
                return
            key = message.action.idempotency_key
            try:
                self._calls.take(player)
            except ResourceExhausted as error:
                outbox.put(_answer(key, error))
                _PLAY_ACTIONS.observe(0.0, error.code.name)
                continue
            try:
                # An action keeps the contract's rules (the key, the action's kind); a bad one is refused
                # in its answer, and the stream goes on.
                validation.check(message.action, "Play")
            except InvalidArgument as error:
                outbox.put(_answer(key, error))
                _PLAY_ACTIONS.observe(0.0, error.code.name)
                continue
            forwarded = rules_pb2.SubmitActionRequest(
                match_id=match_id, seat=seat, idempotency_key=key, action=message.action.action
            )
            outbox.track(loop.create_task(self._play_action(link, forwarded, outbox)))
        outbox.close()

    async def _play_action(
        self, link: ShardLink, request: rules_pb2.SubmitActionRequest, outbox: _PlayOutbox
    ) -> None:
        key = request.idempotency_key
        began = time.perf_counter()
        try:
            with self.admission.call(Priority.PLAY):
                sequence = await link.submit(request, self._backends.timeout_s)
        except ServiceError as error:
            outbox.put(_answer(key, error))
            _PLAY_ACTIONS.observe(time.perf_counter() - began, error.code.name)
        else:
            outbox.put(pb.PlayResponse(answer=pb.PlayAnswer(idempotency_key=key, sequence=sequence)))
            _PLAY_ACTIONS.observe(time.perf_counter() - began, "OK")

    def drain(self, grace_s: float | None = None) -> None:
        """Shutdown began: end every relayed stream and Play stream (callers get UNAVAILABLE and
        reconnect elsewhere). Unary calls in flight may finish within the shutdown's ``grace_s``; those
        still waiting for a backend :data:`SHUTDOWN_ANSWER_MARGIN_S` before it ends are cut short and
        answered ``UNAVAILABLE`` "the gateway is shutting down; retry", as is any unary call after that
        (``None``: no grace, at once)."""
        self._draining = True
        for call in list(self._open_calls):
            call.cancel()
        for outbox in list(self._plays):
            outbox.end(Unavailable(_SHUTTING_DOWN, reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN))
        if self._cut_timer is None and not self._cutting:
            delay = 0.0 if grace_s is None else grace_s - min(SHUTDOWN_ANSWER_MARGIN_S, grace_s / 2)
            self._cut_timer = asyncio.get_running_loop().call_later(delay, self._cut_unary_calls)

    def _cut_short(self) -> bool:
        """Whether the unary calls in flight were cut short (the shutdown grace is nearly over); a method,
        so that it is read again after an await (a plain read there is narrowed away by mypy)."""
        return self._cutting

    def _cut_unary_calls(self) -> None:
        """The shutdown grace is nearly over: cut short the unary calls still waiting for a backend."""
        self._cutting = True
        for call in list(self._unary_calls):
            call.cancel()


async def _stop_writer(writer: asyncio.Task[None]) -> None:
    """Let a Play stream's writer finish the write it is in, for at most :data:`WRITE_GRACE_S`, before
    the stream's status is sent.

    The writer returns by itself between two writes once the stream has ended. A write that does not
    finish in time waits for a client that stopped reading; only then is the writer cancelled. That is
    safe because the response headers were sent on their own when the stream opened: grpc then queues
    the status behind the message under way, and the client gets it once it reads again (or the
    connection ends)."""
    if writer.done():
        return
    try:
        await asyncio.wait({writer}, timeout=WRITE_GRACE_S)
    finally:
        writer.cancel()


async def _read_first(requests: AsyncIterator[pb.PlayRequest]) -> None:
    """Before refusing a Play stream on its metadata (token, stream rate), read its first message, for at
    most :data:`FIRST_MESSAGE_GRACE_S`: a client writes its ``open`` at once, and a refusal that overtakes
    that write makes the write fail on the client's side, which grpc then reports to the client as
    ``INTERNAL`` ("Internal error from Core") instead of the refusal's status and reason."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(FIRST_MESSAGE_GRACE_S):
            await anext(requests)


def _answer(key: str, error: ServiceError) -> pb.PlayResponse:
    """A refused action's answer: the refusal's code and reason; the stream goes on."""
    return pb.PlayResponse(
        answer=pb.PlayAnswer(
            idempotency_key=key,
            code=code_number(error.code),
            message=error.message,
            details=details_message(error),
        )
    )
