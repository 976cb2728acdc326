"""A player's session with the gateway: the one client library the command line, the bots, the demo
and load tests share.

``PlayerSession(address, token)`` holds one channel to the gateway and sends every call with the token
(``authorization: Bearer <token>``). It offers the lobby (tables, the queue, a lobby stream that waits
for ``MatchReady``) and play (actions with idempotency keys, match streams that reconnect on their own
from the last sequence seen, so every update arrives exactly once)::

    async with PlayerSession("127.0.0.1:50050", token) as session:
        me = await session.whoami()
        async with session.lobby() as lobby:
            table = await session.create_table("chess", time_control=TimeControl(base_ms=180_000))
            ready = await lobby.match_ready(table_id=table.table_id)
        async for update in session.watch_match(ready.match_id):
            ...
        await session.submit(ready.match_id, action)

Failures are :class:`GatewayError` (the gRPC code and the gateway's reason). Calls refused by the
gateway's rate limit are retried after the wait it names; calls that are safe to repeat (reads, and
actions, whose idempotency key makes a retry return the original answer) are also retried briefly when
the gateway is unavailable.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self, TypeVar

import grpc
from skillclassics.gateway.v1 import gateway_pb2 as gw
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm
from skillclassics.rules.v1 import rules_pb2

from clients.families import UnknownFamily, family_of_match

__all__ = [
    "DEFAULT_GATEWAY",
    "DevKeyMissing",
    "GatewayError",
    "Lobby",
    "MatchStream",
    "PlayerSession",
    "RetryPolicy",
    "development_token",
    "is_over",
    "new_key",
]

DEFAULT_GATEWAY: Final = "127.0.0.1:50050"
"""Where ``make run`` serves the gateway."""

_T = TypeVar("_T")
_RETRY_IN = re.compile(r"retry in (\d+) ms")
_OVER = (rules_pb2.MATCH_STATUS_FINISHED, rules_pb2.MATCH_STATUS_ABORTED)


def new_key() -> str:
    """A fresh idempotency key."""
    return uuid.uuid4().hex


def is_over(update: rules_pb2.MatchUpdate) -> bool:
    """Whether ``update`` is a match's last (finished or aborted)."""
    return update.status in _OVER


class DevKeyMissing(Exception):
    """No development key to sign a token with (see :func:`development_token`)."""


def development_token(player_id: str, env: Mapping[str, str], ttl_s: int = 24 * 3600) -> str:
    """A development token for ``player_id``, signed with the key the local stack's gateway uses:
    ``GATEWAY_TOKEN_KEY``, or the key file under ``DATA_DIR`` (default ``./data``) that ``make run``
    wrote. Unlike the gateway this never generates a key (a fresh key's tokens would be refused):
    :class:`DevKeyMissing` when there is none. ``ValueError`` for a malformed key or player id."""
    from services.gateway import tokens  # minting is the gateway's own; only development uses it here

    data_dir = Path(env.get("DATA_DIR") or "data")
    key_file = data_dir / tokens.DEV_KEY_FILE
    if not env.get(tokens.KEY_VARIABLE, "").strip() and not key_file.exists():
        raise DevKeyMissing(
            f"no development key: {tokens.KEY_VARIABLE} is not set and {key_file} does not exist "
            "(start the stack with `make run` from this folder first, or set DATA_DIR)"
        )
    key = tokens.token_key(env, data_dir)
    return tokens.mint_token(key, player_id, ttl_s, int(time.time()))


class GatewayError(Exception):
    """A call the gateway (or a service behind it) refused or could not answer: the code and reason."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details

    @classmethod
    def from_rpc(cls, error: grpc.aio.AioRpcError, address: str = "") -> GatewayError:
        code: grpc.StatusCode = error.code()
        details: str = error.details() or code.name
        if code == grpc.StatusCode.UNAVAILABLE and "failed to connect" in details.lower():
            where = f" at {address}" if address else ""
            details = f"cannot reach the gateway{where} (is the stack running? `make run`)"
        elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
            details = f"the gateway did not answer in time ({details})"
        return cls(code, details)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard a session tries again."""

    unavailable_attempts: int = 4
    """Tries of a repeatable call while the gateway is unavailable."""
    rate_limited_attempts: int = 50
    """Tries of any call the rate limit refused (it names the wait)."""
    stream_attempts: int = 12
    """Reconnections of a stream in a row without an update in between."""
    first_delay_s: float = 0.1
    max_delay_s: float = 2.0
    call_timeout_s: float = 10.0
    """Deadline of each unary call."""
    creation_wait_s: float = 10.0
    """How long a match stream waits for a match that does not exist yet (just paired, being created)."""

    def delay(self, attempt: int) -> float:
        return float(min(self.max_delay_s, self.first_delay_s * 2**attempt))


def retry_wait_s(details: str, default_s: float = 0.2) -> float:
    """The wait a ``RESOURCE_EXHAUSTED`` refusal asks for ("retry in N ms"), in seconds."""
    found = _RETRY_IN.search(details)
    return int(found[1]) / 1000 if found else default_s


def _rate_limit_wait(error: grpc.aio.AioRpcError) -> float | None:
    """The wait the gateway asks for when it refused a call for the rate limit."""
    if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    return retry_wait_s(error.details() or "")


class PlayerSession:
    """One signed-in player's connection to the gateway (see the module docstring)."""

    def __init__(
        self,
        address: str,
        token: str,
        *,
        retry: RetryPolicy | None = None,
        channel: grpc.aio.Channel | None = None,
    ) -> None:
        self.address = address
        self.retry = retry or RetryPolicy()
        self._own_channel = channel is None
        self._channel = channel if channel is not None else grpc.aio.insecure_channel(address)
        self._stub = gateway_pb2_grpc.GatewayServiceStub(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._seeded: set[str] = set()
        """Matches this session has contributed a client seed to."""
        self.player_id: str | None = None
        """Set by :meth:`whoami`."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own_channel:
            await self._channel.close()

    # -- calling -----------------------------------------------------------------------------------------

    async def _call(self, method: Callable[..., Awaitable[_T]], request: Any, *, repeatable: bool) -> _T:
        """Call ``method`` with the token; retry on the rate limit, and on unavailability if
        ``repeatable``; raise :class:`GatewayError`."""
        unavailable = rate_limited = 0
        while True:
            try:
                return await method(request, metadata=self._metadata, timeout=self.retry.call_timeout_s)
            except grpc.aio.AioRpcError as error:
                wait = _rate_limit_wait(error)
                if wait is not None and rate_limited + 1 < self.retry.rate_limited_attempts:
                    rate_limited += 1
                    await asyncio.sleep(wait)
                    continue
                code = error.code()
                if (
                    repeatable
                    and code == grpc.StatusCode.UNAVAILABLE
                    and unavailable + 1 < self.retry.unavailable_attempts
                ):
                    await asyncio.sleep(self.retry.delay(unavailable))
                    unavailable += 1
                    continue
                raise GatewayError.from_rpc(error, self.address) from None

    # -- who ---------------------------------------------------------------------------------------------

    async def whoami(self) -> gw.WhoAmIResponse:
        """The signed-in player (also remembered as :attr:`player_id`)."""
        reply: gw.WhoAmIResponse = await self._call(self._stub.WhoAmI, gw.WhoAmIRequest(), repeatable=True)
        self.player_id = reply.player_id
        return reply

    async def ratings(self) -> gw.GetRatingsResponse:
        reply: gw.GetRatingsResponse = await self._call(
            self._stub.GetRatings, gw.GetRatingsRequest(), repeatable=True
        )
        return reply

    async def match_history(self, family: str = "") -> list[mm.PlayedMatch]:
        """The player's matches, newest first (unfinished ones too)."""
        reply: gw.GetMatchHistoryResponse = await self._call(
            self._stub.GetMatchHistory, gw.GetMatchHistoryRequest(family=family), repeatable=True
        )
        return list(reply.matches)

    # -- tables and the queue ----------------------------------------------------------------------------

    async def create_table(
        self,
        family: str,
        *,
        time_control: rules_pb2.TimeControl,
        options: rules_pb2.MatchOptions | None = None,
        entry_fee_minor: int = 0,
        currency: str = "USD",
        visibility: mm.Visibility.ValueType = mm.VISIBILITY_PUBLIC,
        idempotency_key: str | None = None,
    ) -> mm.Table:
        """Open a table (the creator takes seat 0); repeated with the same key, the same table."""
        request = gw.CreateTableRequest(
            family=family,
            options=options,
            time_control=time_control,
            entry_fee_minor=entry_fee_minor,
            currency=currency,
            visibility=visibility,
            idempotency_key=idempotency_key or new_key(),
        )
        reply: gw.CreateTableResponse = await self._call(self._stub.CreateTable, request, repeatable=True)
        return reply.table

    async def list_tables(
        self,
        family: str,
        *,
        max_entry_fee_minor: int = 0,
        currency: str = "",
        base_ms: int = 0,
        limit: int = 0,
    ) -> list[mm.Table]:
        """Open public tables of ``family``, oldest first."""
        request = gw.ListTablesRequest(
            family=family,
            max_entry_fee_minor=max_entry_fee_minor,
            currency=currency,
            base_ms=base_ms,
            limit=limit,
        )
        reply: gw.ListTablesResponse = await self._call(self._stub.ListTables, request, repeatable=True)
        return list(reply.tables)

    async def join_table(self, table_id: str) -> mm.Table:
        """Take the free seat; the answer's ``match_id`` is the match (``status`` PLAYING once it exists
        on the rules shard, STARTING while matchmaking is still creating it)."""
        reply: gw.JoinTableResponse = await self._call(
            self._stub.JoinTable, gw.JoinTableRequest(table_id=table_id), repeatable=False
        )
        return reply.table

    async def leave_table(self, table_id: str) -> mm.Table:
        """Cancel one's own open table."""
        reply: gw.LeaveTableResponse = await self._call(
            self._stub.LeaveTable, gw.LeaveTableRequest(table_id=table_id), repeatable=False
        )
        return reply.table

    async def enter_queue(
        self,
        family: str,
        *,
        time_control: rules_pb2.TimeControl,
        options: rules_pb2.MatchOptions | None = None,
        entry_fee_minor: int = 0,
        currency: str = "USD",
    ) -> gw.EnterQueueResponse:
        """Join the quick-match queue (watch the lobby for the pairing's ``MatchReady``)."""
        request = gw.EnterQueueRequest(
            family=family,
            options=options,
            time_control=time_control,
            entry_fee_minor=entry_fee_minor,
            currency=currency,
        )
        reply: gw.EnterQueueResponse = await self._call(self._stub.EnterQueue, request, repeatable=False)
        return reply

    async def leave_queue(self) -> bool:
        """Leave the queue; ``False`` when not queued (perhaps paired already)."""
        reply: gw.LeaveQueueResponse = await self._call(
            self._stub.LeaveQueue, gw.LeaveQueueRequest(), repeatable=True
        )
        return reply.left

    def lobby(self) -> Lobby:
        """The player's lobby stream (``async with``): open it *before* creating a table or queueing."""
        return Lobby(self)

    # -- play --------------------------------------------------------------------------------------------

    async def get_match(
        self, match_id: str, *, spectator: bool = False, wait_s: float = 0.0
    ) -> gw.GetMatchResponse:
        """The match now: the update as the caller's seat (or a spectator) sees it, the seats, options.

        ``wait_s``: how long to keep asking while the match is NOT_FOUND (just paired, being created)."""
        request = gw.GetMatchRequest(match_id=match_id, spectator=spectator)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                reply: gw.GetMatchResponse = await self._call(self._stub.GetMatch, request, repeatable=True)
                return reply
            except GatewayError as error:
                if error.code != grpc.StatusCode.NOT_FOUND or time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(0.2)

    async def get_record(self, match_id: str) -> gw.GetRecordResponse:
        """A finished match's result and record (PGN for chess)."""
        reply: gw.GetRecordResponse = await self._call(
            self._stub.GetRecord, gw.GetRecordRequest(match_id=match_id), repeatable=True
        )
        return reply

    async def submit(
        self, match_id: str, action: rules_pb2.Action, *, idempotency_key: str | None = None
    ) -> gw.SubmitActionResponse:
        """Play ``action`` for the caller's seat. The idempotency key (fresh unless given) makes retries
        safe: a repeat returns the original answer."""
        request = gw.SubmitActionRequest(
            match_id=match_id, idempotency_key=idempotency_key or new_key(), action=action
        )
        reply: gw.SubmitActionResponse = await self._call(self._stub.SubmitAction, request, repeatable=True)
        return reply

    async def resign(self, match_id: str) -> gw.SubmitActionResponse:
        return await self.submit(match_id, rules_pb2.Action(resign=rules_pb2.Resign()))

    async def add_client_seed(self, match_id: str, seed: bytes | None = None) -> bool:
        """Mix this player's own random seed (32 fresh random bytes unless given) into the match's
        fairness stream, so that the server could not have chosen the shuffles or dice to suit anybody
        (docs/fairness.md). Only before the match's first draw: False when it came too late or the
        match draws nothing."""
        request = gw.AddClientSeedRequest(match_id=match_id, client_seed=seed or secrets.token_bytes(32))
        try:
            await self._call(self._stub.AddClientSeed, request, repeatable=True)
        except GatewayError as error:
            if error.code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND):
                return False
            raise
        return True

    async def seed_match(self, match_id: str) -> None:
        """Contribute a client seed once per match of a family that uses chance (best effort: a match
        whose seeds do not all arrive is dealt when its seed window ends, protected by the commitment)."""
        if match_id in self._seeded:
            return
        try:
            chance = family_of_match(match_id).uses_chance
        except UnknownFamily:
            chance = False
        if not chance:
            return
        self._seeded.add(match_id)
        with contextlib.suppress(GatewayError):
            await self.add_client_seed(match_id)

    def watch_match(self, match_id: str, *, spectator: bool = False, from_sequence: int = 0) -> MatchStream:
        """The match's updates after ``from_sequence``, reconnecting on its own (see :class:`MatchStream`)."""
        return MatchStream(self, match_id, spectator=spectator, from_sequence=from_sequence)

    def _open_match_stream(self, match_id: str, spectator: bool, from_sequence: int) -> Any:
        request = gw.WatchMatchRequest(match_id=match_id, spectator=spectator, from_sequence=from_sequence)
        return self._stub.WatchMatch(request, metadata=self._metadata)

    def _open_lobby_stream(self) -> Any:
        return self._stub.WatchLobby(gw.WatchLobbyRequest(), metadata=self._metadata)


class MatchStream:
    """A match's updates, each exactly once and in order, across reconnections.

    Iterate it (``async for update in stream``); it ends after the match's final update. A stream that
    breaks with ``UNAVAILABLE`` (a gateway or rules shard going away) or ``RESOURCE_EXHAUSTED`` (the
    stream-open rate limit, a watcher that fell behind) is reopened from :attr:`last_sequence`; a match
    that does not exist yet (just paired) is waited for. Other refusals raise :class:`GatewayError`.
    """

    def __init__(self, session: PlayerSession, match_id: str, *, spectator: bool, from_sequence: int) -> None:
        self.session = session
        self.match_id = match_id
        self.spectator = spectator
        self.last_sequence = from_sequence
        self.reconnects = 0
        """How many times the stream was reopened."""
        self._call: Any = None
        self._closed = False

    def __aiter__(self) -> AsyncIterator[rules_pb2.MatchUpdate]:
        return self._updates()

    async def _updates(self) -> AsyncIterator[rules_pb2.MatchUpdate]:
        if not self.spectator:
            await self.session.seed_match(self.match_id)  # before the first deal, for chance families
        policy = self.session.retry
        failures = 0
        seen_any = self.last_sequence > 0
        started = time.monotonic()
        while not self._closed:
            self._call = self.session._open_match_stream(self.match_id, self.spectator, self.last_sequence)
            try:
                async for response in self._call:
                    update: rules_pb2.MatchUpdate = response.update
                    if update.sequence <= self.last_sequence:
                        continue
                    self.last_sequence = update.sequence
                    seen_any = True
                    failures = 0
                    yield update
                    if is_over(update):
                        return
            except grpc.aio.AioRpcError as error:
                code = error.code()
                if self._closed or code == grpc.StatusCode.CANCELLED:
                    return
                waiting = (
                    code == grpc.StatusCode.NOT_FOUND
                    and not seen_any
                    and time.monotonic() - started < policy.creation_wait_s
                )
                retry = code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED) or waiting
                if not retry or (failures + 1 >= policy.stream_attempts and not waiting):
                    raise GatewayError.from_rpc(error, self.session.address) from None
                wait = _rate_limit_wait(error)
                await asyncio.sleep(wait if wait is not None else policy.delay(min(failures, 4)))
                failures += 1
                self.reconnects += 1
                continue
            finally:
                self._call.cancel()
            # The stream ended cleanly without a final update (it should not): reopen it.
            failures += 1
            if failures >= policy.stream_attempts:
                raise GatewayError(grpc.StatusCode.UNAVAILABLE, "the match stream keeps ending early")
            self.reconnects += 1
            await asyncio.sleep(policy.delay(failures))

    def close(self) -> None:
        """Stop: the iteration ends."""
        self._closed = True
        if self._call is not None:
            self._call.cancel()


class Lobby:
    """The player's lobby events, read in the background while open (``async with session.lobby()``).

    :meth:`match_ready` waits for the ``MatchReady`` of a table (or of a queue pairing). An event can be
    missed in the moment the stream is being (re)opened, so the player's match history is also checked
    every :attr:`poll_s` seconds as a fallback.
    """

    EVENTS_KEPT: Final = 1000

    def __init__(self, session: PlayerSession, poll_s: float = 1.0) -> None:
        self.session = session
        self.poll_s = poll_s
        self.events: asyncio.Queue[gw.WatchLobbyResponse] = asyncio.Queue(self.EVENTS_KEPT)
        """Every lobby event, for callers that want them (the oldest are dropped past 1,000 unread)."""
        self._ready: list[mm.MatchReady] = []
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._error: GatewayError | None = None
        self.opened_at_ms = 0

    async def __aenter__(self) -> Self:
        self.opened_at_ms = int(time.time() * 1000)
        self._task = asyncio.create_task(self._read(), name="lobby")
        await asyncio.sleep(0)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _read(self) -> None:
        policy = self.session.retry
        failures = 0
        while True:
            call = self.session._open_lobby_stream()
            try:
                async for event in call:
                    failures = 0
                    if self.events.full():
                        self.events.get_nowait()
                    self.events.put_nowait(event)
                    if event.WhichOneof("event") == "match_ready":
                        self._ready.append(event.match_ready)
                        self._changed.set()
            except grpc.aio.AioRpcError as error:
                code = error.code()
                if code == grpc.StatusCode.CANCELLED:
                    return
                retry = code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)
                if not retry or failures + 1 >= policy.stream_attempts:
                    self._error = GatewayError.from_rpc(error, self.session.address)
                    self._changed.set()
                    return
                wait = _rate_limit_wait(error)
                await asyncio.sleep(wait if wait is not None else policy.delay(failures))
                failures += 1
                continue
            finally:
                call.cancel()
            await asyncio.sleep(policy.delay(failures))
            failures += 1

    def _find(self, table_id: str | None) -> mm.MatchReady | None:
        for ready in self._ready:
            if table_id is None or ready.table_id == table_id:
                return ready
        return None

    async def _from_history(self, table_id: str | None) -> mm.MatchReady | None:
        for played in await self.session.match_history():
            if table_id is not None:
                found = played.table_id == table_id
            else:
                found = not played.table_id and played.created_at_ms >= self.opened_at_ms - 1000
            if found and not played.HasField("result"):
                return mm.MatchReady(
                    match_id=played.match_id,
                    family=played.family,
                    seat=played.seat,
                    opponent_id=played.opponent_id,
                    table_id=played.table_id,
                )
        return None

    async def match_ready(self, *, table_id: str | None = None) -> mm.MatchReady:
        """The match of table ``table_id`` (``None``: of a quick-match pairing made since the lobby
        opened) once it exists. Bound the wait with ``asyncio.timeout`` if needed."""
        while True:
            found = self._find(table_id)
            if found is not None:
                return found
            if self._error is not None:
                raise self._error
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), self.poll_s)
                continue
            found = await self._from_history(table_id)
            if found is not None:
                return found
