"""What full-stack tests share: the running platform, signed-in players, and reading streams."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from skillclassics.chess.v1 import chess_pb2
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm_pb
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc
from sqlalchemy import Select
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from clients.player import PlayerSession, RetryPolicy
from libs.launcher import Stack
from libs.runtime.config import sqlite_url
from services.gateway.tokens import SigningKey, mint_token, token_key

MINUTE = 60_000
READ_TIMEOUT = 15.0
"""How long a test waits for an update or a lobby event (generous: a loaded 2-core machine)."""
Metadata = tuple[tuple[str, str], ...]
OUTAGE_TOLERANT = RetryPolicy(unavailable_attempts=30, max_delay_s=1.0)
"""A client that rides out a shard's restart (a few seconds): its calls retried with the same keys."""


@dataclass(frozen=True)
class Player:
    """A player signed in with a token the gateway accepts."""

    id: str
    metadata: Metadata


@dataclass
class Platform:
    """The running stack as a test sees it."""

    stack: Stack
    backend: str
    """``sqlite`` or ``postgresql``."""
    shared_database_url: str
    """The one database every service uses on PostgreSQL; empty on SQLite (a file per service)."""
    gateway: gateway_pb2_grpc.GatewayServiceStub
    rules: rules_pb2_grpc.RulesServiceStub
    """rules-chess itself, for what no client can do: creating a match with a short disconnect window."""
    _names: set[str] = field(default_factory=set)

    def player(self, name: str, *, ttl: int = 3600) -> Player:
        """A new player (a unique id starting with ``name``) and their token."""
        player_id = f"{name}-{uuid.uuid4().hex[:10]}"
        self._names.add(player_id)
        token = mint_token(self.signing_key, player_id, ttl, int(time.time()))
        return Player(player_id, (("authorization", f"Bearer {token}"),))

    @property
    def signing_key(self) -> SigningKey:
        """The development signing key the stack's gateway generated into its data folder (and trusts)."""
        return token_key({}, self.stack.data_dir, production=False, create=False)

    def database_url(self, service: str) -> str:
        """The database ``service`` of the stack writes to."""
        return self.shared_database_url or sqlite_url(self.stack.data_dir / f"{service}.db")

    async def rows(self, service: str, statement: Select[Any]) -> list[dict[str, Any]]:
        """Read ``service``'s database (what the stack has durably recorded)."""
        engine = create_async_engine(self.database_url(service), poolclass=NullPool)
        try:
            async with engine.connect() as conn:
                return [dict(row._mapping) for row in await conn.execute(statement)]
        finally:
            await engine.dispose()


# -- requests --------------------------------------------------------------------------------------------


def chess_options() -> rules_pb2.MatchOptions:
    return rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions(ruleset=chess_pb2.RULESET_CONTEST))


def table_request(
    *, minutes: int = 5, fee: int = 500, visibility: int = mm_pb.VISIBILITY_PUBLIC
) -> pb.CreateTableRequest:
    return pb.CreateTableRequest(
        family="chess",
        options=chess_options(),
        time_control=rules_pb2.TimeControl(base_ms=minutes * MINUTE),
        entry_fee_minor=fee,
        currency="USD",
        visibility=visibility,  # type: ignore[arg-type]
        idempotency_key=uuid.uuid4().hex,
    )


def move(match_id: str, san: str, *, key: str | None = None) -> pb.SubmitActionRequest:
    return pb.SubmitActionRequest(
        match_id=match_id,
        idempotency_key=key or uuid.uuid4().hex,
        action=rules_pb2.Action(chess=chess_pb2.ChessAction(move=san)),
    )


def resign(match_id: str) -> pb.SubmitActionRequest:
    return pb.SubmitActionRequest(
        match_id=match_id,
        idempotency_key=uuid.uuid4().hex,
        action=rules_pb2.Action(resign=rules_pb2.Resign()),
    )


async def table_match(platform: Platform, host: Player, guest: Player, *, minutes: int = 5) -> str:
    """A match made the way players make one: ``host`` opens a table, ``guest`` joins it (through the
    gateway); the host is seat 0 (White). Returns the match id."""
    gw = platform.gateway
    table = (await gw.CreateTable(table_request(minutes=minutes), metadata=host.metadata)).table
    joined = (await gw.JoinTable(pb.JoinTableRequest(table_id=table.table_id), metadata=guest.metadata)).table
    assert joined.match_id, joined
    return str(joined.match_id)


async def direct_match(
    platform: Platform, white: Player, black: Player, *, disconnect_forfeit_ms: int
) -> str:
    """A match created on rules-chess directly (as matchmaking does), with a disconnect window the lobby
    does not offer."""
    match_id = f"chess.0.{uuid.uuid4().hex}"
    await platform.rules.CreateMatch(
        rules_pb2.CreateMatchRequest(
            match_id=match_id,
            seats=[
                rules_pb2.SeatAssignment(seat=0, player_id=white.id),
                rules_pb2.SeatAssignment(seat=1, player_id=black.id),
            ],
            options=chess_options(),
            time_control=rules_pb2.TimeControl(base_ms=5 * MINUTE),
            idempotency_key=match_id,
            disconnect_forfeit_ms=disconnect_forfeit_ms,
        ),
        timeout=10,
    )
    return match_id


# -- answers and streams ---------------------------------------------------------------------------------


async def refused(call: Any, code: grpc.StatusCode, reason: str = "") -> str:
    """Await ``call`` (a unary call or a stream's ``read()``), which must fail with ``code``; its reason."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    details = caught.value.details() or ""
    assert caught.value.code() == code, f"{caught.value.code()}: {details}"
    assert reason in details, details
    return details


class Stream:
    """A server stream read by a background task into a queue.

    Waiting with a timeout on the queue leaves the call alone (cancelling a pending ``read()`` of a
    grpc.aio call cancels the call), so a test can wait for "nothing happens" and go on reading.
    """

    def __init__(self, call: Any) -> None:
        self.call = call
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._pump())

    async def _pump(self) -> None:
        try:
            while (message := await self.call.read()) is not grpc.aio.EOF:
                self._queue.put_nowait(message)
            self._queue.put_nowait(grpc.aio.EOF)
        except grpc.aio.AioRpcError as error:
            self._queue.put_nowait(error)

    async def next(self, within: float = READ_TIMEOUT) -> Any:
        """The next message; ``grpc.aio.EOF`` once the stream ended; raises the call's error if it failed."""
        async with asyncio.timeout(within):
            message = await self._queue.get()
        if isinstance(message, grpc.aio.AioRpcError):
            self._queue.put_nowait(message)
            raise message
        if message is grpc.aio.EOF:
            self._queue.put_nowait(message)
        return message

    def received(self) -> list[Any]:
        """The messages that arrived and were not read yet (without waiting)."""
        taken: list[Any] = []
        while not self._queue.empty():
            message = self._queue.get_nowait()
            if isinstance(message, grpc.aio.AioRpcError) or message is grpc.aio.EOF:
                self._queue.put_nowait(message)
                break
            taken.append(message)
        return taken

    async def cancel(self) -> None:
        """Drop the stream (as a client that goes away does)."""
        self.call.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


class MatchStream(Stream):
    """A ``WatchMatch`` stream: its messages are match updates."""

    async def update(self, within: float = READ_TIMEOUT) -> rules_pb2.MatchUpdate:
        message = await self.next(within)
        assert message is not grpc.aio.EOF, "the match stream ended"
        update: rules_pb2.MatchUpdate = message.update
        return update

    async def until(
        self, done: Callable[[rules_pb2.MatchUpdate], bool], within: float = READ_TIMEOUT
    ) -> list[rules_pb2.MatchUpdate]:
        """The updates up to and including the first for which ``done`` is true."""
        seen: list[rules_pb2.MatchUpdate] = []
        async with asyncio.timeout(within):
            while not seen or not done(seen[-1]):
                seen.append(await self.update())
        return seen

    async def to_the_end(self, within: float = READ_TIMEOUT) -> list[rules_pb2.MatchUpdate]:
        """Every update until the stream ends (a match stream ends after the final update)."""
        seen: list[rules_pb2.MatchUpdate] = []
        async with asyncio.timeout(within):
            while (message := await self.next()) is not grpc.aio.EOF:
                seen.append(message.update)
        return seen


def watch(platform: Platform, player: Player, match_id: str, from_sequence: int = 0) -> MatchStream:
    """``player``'s ``WatchMatch`` stream as their seat."""
    request = pb.WatchMatchRequest(match_id=match_id, from_sequence=from_sequence)
    return MatchStream(platform.gateway.WatchMatch(request, metadata=player.metadata))


def moves(update: rules_pb2.MatchUpdate) -> list[str]:
    return list(update.view.chess.moves_san)


def has_moves(*expected: str) -> Callable[[rules_pb2.MatchUpdate], bool]:
    return lambda update: moves(update) == list(expected)


def connected(*seats: int) -> Callable[[rules_pb2.MatchUpdate], bool]:
    return lambda update: list(update.connected_seats) == list(seats)


def is_final(update: rules_pb2.MatchUpdate) -> bool:
    return update.result.termination != rules_pb2.TERMINATION_UNSPECIFIED


def assert_every_update_once(updates: list[rules_pb2.MatchUpdate], first: int = 1) -> None:
    """The sequences are ``first``, ``first + 1``, ... with no gap and no repeat."""
    sequences = [u.sequence for u in updates]
    assert sequences == list(range(first, first + len(sequences))), sequences


async def next_lobby(stream: Stream, kind: str, within: float = READ_TIMEOUT) -> pb.WatchLobbyResponse:
    """The next lobby event of ``kind`` (``match_ready``, ``rating_changed``, ``table_updated``)."""
    async with asyncio.timeout(within):
        while True:
            event = await stream.next()
            assert event is not grpc.aio.EOF, "the lobby stream ended"
            if event.WhichOneof("event") == kind:
                return event  # type: ignore[no-any-return]


async def lobby_probe(platform: Platform, player: Player, stream: Stream) -> list[pb.WatchLobbyResponse]:
    """The events ``stream`` received before a probe: ``player`` opens a table and leaves it, and the
    table's "cancelled" update comes after everything matchmaking told them before (streams keep order).
    Raises :class:`TimeoutError` when the probe's update does not arrive within a second."""
    gw = platform.gateway
    probe = (await gw.CreateTable(table_request(), metadata=player.metadata)).table
    await gw.LeaveTable(pb.LeaveTableRequest(table_id=probe.table_id), metadata=player.metadata)
    before: list[pb.WatchLobbyResponse] = []
    while True:
        event = await stream.next(within=1.0)
        assert event is not grpc.aio.EOF, "the lobby stream ended"
        table = event.table_updated
        if table.table_id == probe.table_id and table.status == mm_pb.TABLE_STATUS_CANCELLED:
            return before
        before.append(event)


async def live_lobby(platform: Platform, player: Player) -> Stream:
    """``player``'s ``WatchLobby`` stream, once it is certainly subscribed: its first event,
    ``subscribed``, says that from then on no event for the player is missed."""
    stream = Stream(platform.gateway.WatchLobby(pb.WatchLobbyRequest(), metadata=player.metadata))
    first = await stream.next(within=READ_TIMEOUT * 2)
    assert first is not grpc.aio.EOF, "the lobby stream ended before it was subscribed"
    assert first.WhichOneof("event") == "subscribed", first
    return stream


def session(platform: Platform, player: Player) -> PlayerSession:
    """A ``clients.player`` session of ``player`` on the platform's gateway that rides out restarts."""
    token = dict(player.metadata)["authorization"].removeprefix("Bearer ")
    return PlayerSession(platform.stack.address("gateway"), token, retry=OUTAGE_TOLERANT)


async def played_match(player_session: PlayerSession, family: str, match_id: str) -> mm_pb.PlayedMatch:
    """``match_id`` in the player's match history once its result is there: the rules shard reports a
    result to matchmaking from its outbox after the match ended, so the history may show the match still
    unfinished for a moment after both players saw the end (up to :data:`READ_TIMEOUT`)."""
    deadline = time.monotonic() + READ_TIMEOUT
    while True:
        [played] = [m for m in await player_session.match_history(family) if m.match_id == match_id]
        if played.result.termination or time.monotonic() > deadline:
            return played
        await asyncio.sleep(0.1)
