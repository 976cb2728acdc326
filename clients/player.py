"""A player's session with the gateway: the one client library the command line, the bots, the demo
and load tests share.

``PlayerSession(address, token)`` holds one channel to the gateway and sends every call with the token
(``authorization: Bearer <token>``). It offers the lobby (tables, the queue, a lobby stream that waits
for ``MatchReady``) and play (actions with idempotency keys, match streams that reconnect on their own
from the last sequence seen, so every update arrives exactly once; or, the fast way, one play stream per
seated player that carries both the updates and the actions' answers)::

    async with PlayerSession("127.0.0.1:50050", token) as session:
        me = await session.whoami()
        async with session.lobby() as lobby:
            table = await session.create_table("chess", time_control=TimeControl(base_ms=180_000))
            ready = await lobby.match_ready(table_id=table.table_id)
        async for update in session.watch_match(ready.match_id):
            ...
        await session.submit(ready.match_id, action)
        async with session.play(ready.match_id) as stream:  # updates and answers on one stream
            async for update in stream:
                ...
                sequence = await stream.submit(action)

Failures are :class:`GatewayError` (the gRPC code and the gateway's reason). Calls refused by the
gateway's rate limit are retried after the wait it names; calls that are safe to repeat (reads, and
actions and table creation, whose idempotency key makes a retry return the original answer) are also
retried when the gateway or a service behind it is unavailable: after the wait the refusal asks for when
it gives one (``retry-after-ms``, a ``google.rpc.RetryInfo`` detail, or "retry in N ms" in its reason: a
database restarting behind the gateway) for up to :attr:`RetryPolicy.unavailable_wait_s` in all,
otherwise a few times with a growing delay (:attr:`RetryPolicy.unavailable_attempts`). Joining or
leaving a table and entering the queue are not repeated (a repeat is not known to be harmless).

A :class:`GatewayError` says what really failed: ``reached`` tells a gateway that answered (every answer
of the gateway carries its request id) from one that could not be reached ("cannot reach the gateway at
..."), and a gateway's ``UNAVAILABLE`` keeps its reason, which names the service behind it that is down
(``backend``: ``matchmaking``, ``fairness``, ``rules-chess shard 0``) and why.
"""

from __future__ import annotations

import asyncio
import contextlib
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

from clients.fairness import FairnessBook, FairnessCheck, MatchFairness, check_proof
from clients.families import UnknownFamily, family_of_match
from libs.engines.generals import formation_to_setup
from libs.fairness import Proof
from libs.runtime.errors import SERVICE_METADATA, Problem, Violation

__all__ = [
    "DEFAULT_GATEWAY",
    "DevKeyMissing",
    "GatewayError",
    "Lobby",
    "MatchStream",
    "PlayStream",
    "PlayerSession",
    "RetryPolicy",
    "development_token",
    "expires_at_ms",
    "is_over",
    "new_key",
]

DEFAULT_GATEWAY: Final = "127.0.0.1:50050"
"""Where ``make run`` serves the gateway."""

_T = TypeVar("_T")
_OVER = (rules_pb2.MATCH_STATUS_FINISHED, rules_pb2.MATCH_STATUS_ABORTED)


def new_key() -> str:
    """A fresh idempotency key."""
    return uuid.uuid4().hex


def is_over(update: rules_pb2.MatchUpdate) -> bool:
    """Whether ``update`` is a match's last (finished or aborted)."""
    return update.status in _OVER


def expires_at_ms(reply: gw.WhoAmIResponse) -> int:
    """When the token of a ``WhoAmI`` ``reply`` expires, in Unix milliseconds: ``expires_at_ms``, or the
    deprecated ``expires_at`` (seconds) from a gateway older than that field (which leaves it 0)."""
    return reply.expires_at_ms or reply.expires_at * 1000


class DevKeyMissing(Exception):
    """No development key to sign a token with (see :func:`development_token`)."""


def development_token(player_id: str, env: Mapping[str, str], ttl_s: int = 24 * 3600) -> str:
    """A development token for ``player_id``, signed with the development key the local stack's gateway
    trusts: the key file under ``DATA_DIR`` (default ``./data``) that ``make run`` wrote. Unlike the
    gateway this never generates a key (a fresh key's tokens would be refused): :class:`DevKeyMissing`
    when there is none. ``ValueError`` for a malformed key or player id, or in production."""
    from services.gateway import tokens  # minting is the gateway's own; only development uses it here

    data_dir = Path(env.get("DATA_DIR") or "data")
    key_file = data_dir / tokens.DEV_KEY_FILE
    if not key_file.exists():
        raise DevKeyMissing(
            f"no development key: {key_file} does not exist "
            "(start the stack with `make run` from this folder first, or set DATA_DIR)"
        )
    key = tokens.token_key(env, data_dir, create=False)
    return tokens.mint_token(key, player_id, ttl_s, int(time.time()))


class GatewayError(Exception):
    """A call the gateway (or a service behind it) refused or could not answer.

    Read from the refusal's details, never its words (docs/errors.md): ``reason`` is the catalogue's
    reason (``"NOT_YOUR_TURN"``; ``"UNSPECIFIED"`` when the refusal came from gRPC itself, such as a
    connection that broke), ``violations`` the invalid fields, ``metadata`` what the refusal concerns.
    ``reached``: whether the gateway answered (``False``: it could not be reached, or the connection to
    it broke). ``retry_after_s``: the wait the refusal asked for before a retry (``None``: it named
    none). ``backend``: the service behind the gateway that an ``UNAVAILABLE`` refusal says is down."""

    def __init__(
        self,
        code: grpc.StatusCode,
        details: str,
        *,
        retry_after_s: float | None = None,
        reached: bool = True,
        reason: str = "UNSPECIFIED",
        metadata: Mapping[str, str] | None = None,
        violations: tuple[Violation, ...] = (),
    ) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
        self.reached = reached
        self.retry_after_s = retry_after_s
        self.reason = reason
        self.metadata: Mapping[str, str] = dict(metadata or {})
        self.violations = violations
        backend = self.metadata.get(SERVICE_METADATA)
        self.backend: str | None = backend if code == grpc.StatusCode.UNAVAILABLE and reached else None

    def explained(self) -> str:
        """The refusal for a person: the code and reason, the message, each invalid field, the wait.
        ``INVALID_ARGUMENT (INVALID_FIELDS): ...; family: is required``."""
        reason = "" if self.reason == "UNSPECIFIED" else f" ({self.reason})"
        parts = [f"{self.code.name}{reason}: {self.details}"]
        parts += [f"{v.field}: {v.description}" for v in self.violations if v.description not in self.details]
        if self.retry_after_s is not None:
            parts.append(f"retry after {self.retry_after_s:g} s")
        return "; ".join(parts)

    @classmethod
    def from_problem(cls, problem: Problem, *, reached: bool = True) -> GatewayError:
        """The error a refusal's :class:`~libs.runtime.errors.Problem` describes."""
        wait = problem.retry_after_ms
        return cls(
            problem.code,
            problem.message or problem.code.name,
            retry_after_s=None if wait is None else wait / 1000,
            reached=reached,
            reason=problem.reason,
            metadata=problem.metadata,
            violations=problem.violations,
        )

    @classmethod
    def from_answer(cls, answer: gw.PlayAnswer) -> GatewayError:
        """The error of an action a Play stream refused (its answer's code, message and details)."""
        details = answer.details if answer.HasField("details") else None
        return cls.from_problem(Problem.from_answer(answer.code, answer.message, details))

    @classmethod
    def from_rpc(cls, error: grpc.aio.AioRpcError, address: str = "") -> GatewayError:
        code: grpc.StatusCode = error.code()
        details: str = error.details() or code.name
        trailers = _trailers(error)
        reached = REQUEST_ID_METADATA in trailers  # every answer of the gateway carries its request id
        where = f" at {address}" if address else ""
        if code == grpc.StatusCode.CANCELLED and not reached:
            # Not this side's cancellation (that raises asyncio.CancelledError, not an error with a
            # code) and not the gateway's answer (it has no request id): a gateway shutting down ends so
            # the calls it had received but not begun (grpc/grpc#41785). Nothing was done; as with a
            # lost connection, a call that is safe to repeat is tried again.
            code = grpc.StatusCode.UNAVAILABLE
            details = f"the gateway{where} ended the call without answering it (shutting down?); retry"
        elif code == grpc.StatusCode.UNAVAILABLE and not reached:
            if _unreachable(details):
                details = f"cannot reach the gateway{where} (is the stack running? `make run`)"
            else:
                details = f"lost the connection to the gateway{where} ({details})"
        elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
            details = f"the gateway did not answer in time ({details})"
        problem = Problem.of(code, details, trailers.items())
        return cls.from_problem(problem, reached=reached)


REQUEST_ID_METADATA: Final = "x-request-id"
"""The trailing metadata every answer of the gateway (and of every service) carries."""
_UNREACHABLE = (
    "failed to connect",
    "connection refused",
    "dns resolution failed",
    "name resolution",
    "no route to host",
    "network is unreachable",
    "connect failed",
)
"""What gRPC's own UNAVAILABLE says when no connection to the gateway could be made."""


def _unreachable(details: str) -> bool:
    lowered = details.lower()
    return any(words in lowered for words in _UNREACHABLE)


def _trailers(error: grpc.aio.AioRpcError) -> dict[str, str | bytes]:
    try:
        return {key: value for key, value in error.trailing_metadata() or ()}
    except Exception:  # an error made by hand (tests) or without metadata
        return {}


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard a session tries again."""

    unavailable_attempts: int = 4
    """Tries of a repeatable call while the gateway is unavailable without saying when to retry (it
    cannot be reached, or a service behind it is down)."""
    unavailable_wait_s: float = 30.0
    """How long in all a repeatable call waits, as the refusals ask ("retry in N ms"), while a service
    behind the gateway is unavailable for a while (its database restarting)."""
    rate_limited_attempts: int = 50
    """Tries of any call the rate limit refused (it names the wait)."""
    stream_attempts: int = 12
    """Reconnections of a stream in a row without an update in between, at least (see
    ``stream_outage_s``)."""
    stream_outage_s: float = 60.0
    """How long a broken match stream keeps being reopened without an update in between: longer than a
    rules shard's restart or a database restart, so a player rides one out instead of giving up."""
    stream_max_delay_s: float = 0.5
    """The longest wait between two reopenings of a match stream: the gateway reconnects to a restarted
    shard within half a second of its SERVING (docs/gateway.md), and a player waiting longer than that
    is charged for it (server downtime is credited; a client's own backoff is not)."""
    first_delay_s: float = 0.1
    max_delay_s: float = 2.0
    call_timeout_s: float = 10.0
    """Deadline of each unary call."""
    creation_wait_s: float = 10.0
    """How long a match stream waits for a match that does not exist yet (just paired, being created)."""

    def delay(self, attempt: int) -> float:
        return float(min(self.max_delay_s, self.first_delay_s * 2**attempt))


def _rate_limit_wait(error: grpc.aio.AioRpcError) -> float | None:
    """The wait the gateway asks for when it refused a call for the rate limit or at capacity, or an
    ``UNAVAILABLE`` refusal's retry guidance (a service behind the gateway restarting its database);
    ``None``: none. The machine-readable guidance (``retry-after-ms``, ``RetryInfo``) comes first, then
    the words of the reason; a ``RESOURCE_EXHAUSTED`` that names no wait at all is waited 0.2 s."""
    if error.code() == grpc.StatusCode.UNAVAILABLE:
        return GatewayError.from_rpc(error).retry_after_s
    if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    return exhausted_wait_s(GatewayError.from_rpc(error))


def exhausted_wait_s(error: GatewayError, default_s: float = 0.2) -> float:
    """The wait before retrying a ``RESOURCE_EXHAUSTED`` refusal: its retry guidance (the trailing
    metadata, else its words: :attr:`GatewayError.retry_after_s`), or ``default_s``."""
    guided = error.retry_after_s
    return guided if guided is not None else default_s


class _Attempts:
    """One call's refused tries: whether to try again and after how long (:meth:`wait_after`). The rate
    limit is waited out as its refusal says, up to the policy's number of tries. ``UNAVAILABLE`` is
    retried when the call is ``repeatable``: after the wait the refusal asks for, while the waits add up
    to at most the policy's ``unavailable_wait_s``; a refusal that asks for no wait, with a growing
    delay up to the policy's ``unavailable_attempts``."""

    def __init__(self, policy: RetryPolicy, *, repeatable: bool) -> None:
        self.policy = policy
        self.repeatable = repeatable
        self.rate_limited = 0
        self.unavailable = 0
        self.waited_s = 0.0
        """What the guided waits (``UNAVAILABLE`` with a wait named) added up to so far."""

    def wait_after(self, error: GatewayError) -> float | None:
        """The wait before trying again after ``error`` (``None``: give up)."""
        code = error.code
        if (
            code == grpc.StatusCode.RESOURCE_EXHAUSTED
            and self.rate_limited + 1 < self.policy.rate_limited_attempts
        ):
            self.rate_limited += 1
            return exhausted_wait_s(error)
        if not self.repeatable or code != grpc.StatusCode.UNAVAILABLE:
            return None
        guided = error.retry_after_s
        if guided is not None:
            if self.waited_s + guided > self.policy.unavailable_wait_s:
                return None
            self.waited_s += guided
            return guided
        if self.unavailable + 1 < self.policy.unavailable_attempts:
            self.unavailable += 1
            return self.policy.delay(self.unavailable - 1)
        return None


class _Reopening:
    """When a match stream (:class:`MatchStream`, :class:`PlayStream`) that broke is opened again.

    ``UNAVAILABLE`` (a gateway or rules shard going away) and ``RESOURCE_EXHAUSTED`` (the stream-open
    rate limit, a watcher that fell behind: after the wait it names) are retried up to the policy's
    ``stream_attempts`` in a row without progress; ``NOT_FOUND`` is waited out for up to
    ``creation_wait_s`` while the match was never seen (just paired, being created). Anything else raises
    :class:`GatewayError`."""

    def __init__(self, session: PlayerSession, *, seen: bool) -> None:
        self.policy = session.retry
        self.address = session.address
        self.failures = 0
        """Breaks in a row without progress."""
        self.broken_since: float | None = None
        """When the first of those breaks happened (monotonic)."""
        self.seen = seen
        """Whether the match is known to exist (then ``NOT_FOUND`` is final)."""
        self.started = time.monotonic()

    def progressed(self) -> None:
        """The stream brought something: the count of breaks in a row starts again."""
        self.failures = 0
        self.broken_since = None
        self.seen = True

    def _giving_up(self) -> bool:
        """Whether the breaks in a row have gone on too long: more than ``stream_attempts`` of them and
        for longer than ``stream_outage_s``."""
        if self.broken_since is None:
            self.broken_since = time.monotonic()
        too_many = self.failures + 1 >= self.policy.stream_attempts
        return too_many and time.monotonic() - self.broken_since >= self.policy.stream_outage_s

    async def after_error(self, error: grpc.aio.AioRpcError, *, broken: bool = False) -> None:
        """Wait before reopening a stream that ended with ``error``; :class:`GatewayError` when it is not
        to be reopened. ``broken``: the connection broke under the stream (retried as ``UNAVAILABLE``)."""
        policy = self.policy
        code = grpc.StatusCode.UNAVAILABLE if broken else error.code()
        waiting = (
            code == grpc.StatusCode.NOT_FOUND
            and not self.seen
            and time.monotonic() - self.started < policy.creation_wait_s
        )
        retry = code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED) or waiting
        if not retry or (not waiting and self._giving_up()):
            if broken:  # what broke was the connection (grpc words a failed write as INTERNAL): say so
                raise GatewayError(
                    grpc.StatusCode.UNAVAILABLE,
                    f"the connection to the gateway at {self.address} kept breaking under the stream "
                    f"({error.code().name}: {error.details()})",
                    reached=False,
                ) from None
            raise GatewayError.from_rpc(error, self.address) from None
        wait = _rate_limit_wait(error)
        backoff = min(policy.stream_max_delay_s, policy.delay(min(self.failures, 4)))
        await asyncio.sleep(wait if wait is not None else backoff)
        self.failures += 1

    async def after_early_end(self, what: str) -> None:
        """Wait before reopening a stream that ended cleanly before the match's final update (it should
        not); :class:`GatewayError` once that keeps happening."""
        self.failures += 1
        if self.failures >= self.policy.stream_attempts:
            raise GatewayError(grpc.StatusCode.UNAVAILABLE, f"the {what} keeps ending early")
        await asyncio.sleep(self.policy.delay(self.failures))


class PlayerSession:
    """One signed-in player's connection to the gateway (see the module docstring)."""

    def __init__(
        self,
        address: str,
        token: str,
        *,
        retry: RetryPolicy | None = None,
        channel: grpc.aio.Channel | None = None,
        fairness_book: FairnessBook | None = None,
    ) -> None:
        self.address = address
        self.retry = retry or RetryPolicy()
        self._own_channel = channel is None
        self._channel = channel if channel is not None else grpc.aio.insecure_channel(address)
        self._stub = gateway_pb2_grpc.GatewayServiceStub(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._seeded: set[str] = set()
        """Matches this session has contributed a client seed to."""
        self._fairness: dict[str, MatchFairness] = {}
        """What this session recorded about each match's fairness stream (matches with chance only)."""
        self.fairness_book = fairness_book
        """Where records are kept across sessions (per player: saved once :meth:`whoami` named them)."""
        self.fairness_save_error: OSError | None = None
        """The last failure to save a record to :attr:`fairness_book` (play goes on without it)."""
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
        attempts = _Attempts(self.retry, repeatable=repeatable)
        while True:
            try:
                return await method(request, metadata=self._metadata, timeout=self.retry.call_timeout_s)
            except grpc.aio.AioRpcError as error:
                refused = GatewayError.from_rpc(error, self.address)
                wait = attempts.wait_after(refused)
                if wait is None:
                    raise refused from None
                await asyncio.sleep(wait)

    # -- who ---------------------------------------------------------------------------------------------

    async def whoami(self) -> gw.WhoAmIResponse:
        """The signed-in player (also remembered as :attr:`player_id`)."""
        reply: gw.WhoAmIResponse = await self._call(self._stub.WhoAmI, gw.WhoAmIRequest(), repeatable=True)
        known = self.player_id == reply.player_id
        self.player_id = reply.player_id
        if not known and self.fairness_book is not None:
            for match_id, record in list(self._fairness.items()):  # recorded before we knew who we are
                earlier = self.fairness_book.load(reply.player_id, match_id)
                if earlier is not None:
                    record.merge(earlier)
                self._recorded(record)
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

    # -- formations (Game of the Generals) --------------------------------------------------------------

    async def save_formation(self, name: str, formation: str) -> tuple[mm.Formation, bool]:
        """Save ``formation`` (placements in the player's own orientation, ``a1=FLG b1=PVT ...``; see
        ``docs/generals.md``, "Formations") as ``name``, replacing the player's formation of that name:
        the formation as stored (its canonical text) and whether it replaced one. A formation that is not
        a legal complete setup is refused with ``INVALID_FORMATION``, each reason in
        :attr:`GatewayError.violations` (field ``formation``); a new name past the player's 50
        formations with ``FORMATION_LIMIT_REACHED``. Repeating a save is harmless, so it is retried."""
        reply: gw.SaveFormationResponse = await self._call(
            self._stub.SaveFormation,
            gw.SaveFormationRequest(name=name, formation=formation),
            repeatable=True,
        )
        return reply.formation, reply.replaced

    async def list_formations(self) -> list[mm.Formation]:
        """The player's saved formations, by name."""
        reply: gw.ListFormationsResponse = await self._call(
            self._stub.ListFormations, gw.ListFormationsRequest(), repeatable=True
        )
        return list(reply.formations)

    async def delete_formation(self, name: str) -> mm.Formation:
        """Delete the player's formation ``name`` (``FORMATION_NOT_FOUND`` when there is none); the
        formation as it was. Not repeated (a repeat of a delete that worked would be refused)."""
        reply: gw.DeleteFormationResponse = await self._call(
            self._stub.DeleteFormation, gw.DeleteFormationRequest(name=name), repeatable=False
        )
        return reply.formation

    async def formation_setup(self, name: str, seat: int) -> str:
        """The placements (board squares) the player's saved formation ``name`` gives ``seat`` (0 White,
        1 Black): the text to send after ``setup``, or to edit first. :class:`KeyError` when the player
        has no formation of that name."""
        for formation in await self.list_formations():
            if formation.name == name:
                return formation_to_setup(formation.formation, seat)
        raise KeyError(name)

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
        disconnect_policy: mm.DisconnectPolicy.ValueType = mm.DISCONNECT_POLICY_UNSPECIFIED,
    ) -> mm.Table:
        """Open a table (the creator takes seat 0); repeated with the same key, the same table. The
        disconnect policy: unspecified is the forfeit rule; ``DISCONNECT_POLICY_STAND_IN`` where the family
        has a stand-in (backgammon, gin)."""
        request = gw.CreateTableRequest(
            family=family,
            options=options,
            time_control=time_control,
            entry_fee_minor=entry_fee_minor,
            currency=currency,
            visibility=visibility,
            idempotency_key=idempotency_key or new_key(),
            disconnect_policy=disconnect_policy,
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
        disconnect_policy: mm.DisconnectPolicy.ValueType = mm.DISCONNECT_POLICY_UNSPECIFIED,
    ) -> gw.EnterQueueResponse:
        """Join the quick-match queue (watch the lobby for the pairing's ``MatchReady``); only players
        asking for the same disconnect policy are paired."""
        request = gw.EnterQueueRequest(
            family=family,
            options=options,
            time_control=time_control,
            entry_fee_minor=entry_fee_minor,
            currency=currency,
            disconnect_policy=disconnect_policy,
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
                self.observe(match_id, reply.update, seat=reply.seat if reply.HasField("seat") else None)
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
        match draws nothing. An accepted seed is recorded (:meth:`fairness`)."""
        seed = seed or secrets.token_bytes(32)
        try:
            await self._send_seed(match_id, seed)
        except GatewayError as error:
            if error.code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND):
                return False
            raise
        return True

    async def _send_seed(self, match_id: str, seed: bytes) -> gw.AddClientSeedResponse:
        """Send ``seed`` for the caller's seat and record it as accepted (its seat too)."""
        request = gw.AddClientSeedRequest(match_id=match_id, client_seed=seed)
        reply: gw.AddClientSeedResponse = await self._call(self._stub.AddClientSeed, request, repeatable=True)
        record = self._fairness_record(match_id)
        record.client_seed, record.seed_accepted, record.seed_problem = seed, True, ""
        record.note_seat(reply.seat)
        self._recorded(record)
        return reply

    def uses_chance(self, match_id: str) -> bool:
        """Whether ``match_id``'s family draws from a fairness stream (as far as the clients know)."""
        try:
            return family_of_match(match_id).uses_chance
        except UnknownFamily:
            return False

    async def seed_match(self, match_id: str, *, learn_commitment: bool = True) -> None:
        """Contribute a client seed once per match of a family that uses chance, and record it (best
        effort: a match whose seeds do not all arrive is dealt when its seed window ends, protected by
        the commitment).

        The seed is sent once the match's commitment is known (recorded from ``MatchReady`` or an
        update; otherwise asked with ``GetMatch`` first, unless ``learn_commitment`` is false), as the
        scheme wants (docs/fairness.md). It is recorded before it is sent, so that a later session sends
        the same seed again (accepted as a repeat) rather than a second one (refused); a seed the server
        accepted is not sent again. A refusal is recorded as the reason the seed is not in."""
        if match_id in self._seeded or not self.uses_chance(match_id):
            return
        self._seeded.add(match_id)
        record = self._fairness_record(match_id)
        if record.client_seed is not None and record.seed_accepted:
            return
        if not record.commitment and learn_commitment:
            with contextlib.suppress(GatewayError):
                await self.get_match(match_id)  # its update names the commitment (recorded on the way)
        if record.client_seed is None:
            record.client_seed = secrets.token_bytes(32)
            self._recorded(record)
        try:
            await self._send_seed(match_id, record.client_seed)
        except GatewayError as error:
            record.seed_problem = str(error)
            self._recorded(record)

    # -- fairness records --------------------------------------------------------------------------------

    def fairness(self, match_id: str) -> MatchFairness | None:
        """What this session (or, with a :attr:`fairness_book`, an earlier one of the same player)
        recorded about ``match_id``'s fairness stream: the commitment and format version announced
        before the first draw, the player's own client seed and the draws the match used. ``None`` when
        nothing was recorded (a match without chance)."""
        record = self._fairness.get(match_id)
        if record is None and self.fairness_book is not None and self.player_id is not None:
            record = self.fairness_book.load(self.player_id, match_id)
            if record is not None:
                self._fairness[match_id] = record
        return record

    def _fairness_record(self, match_id: str) -> MatchFairness:
        record = self.fairness(match_id)
        if record is None:
            record = self._fairness[match_id] = MatchFairness(match_id)
        return record

    def _recorded(self, record: MatchFairness) -> None:
        """``record`` changed: keep it in the book (once the player is known)."""
        if self.fairness_book is None or self.player_id is None:
            return
        try:
            self.fairness_book.save(self.player_id, record)
        except (OSError, ValueError) as error:
            self.fairness_save_error = error if isinstance(error, OSError) else OSError(str(error))

    def note_match_ready(self, ready: mm.MatchReady) -> None:
        """Record what a ``MatchReady`` announces: the match's commitment, its version and the seat."""
        if not ready.fairness_commitment:
            return
        record = self._fairness_record(ready.match_id)
        changed = record.note_commitment(ready.fairness_commitment, ready.fairness_version)
        if record.note_seat(ready.seat) or changed:
            self._recorded(record)

    def observe(self, match_id: str, update: rules_pb2.MatchUpdate, *, seat: int | None = None) -> None:
        """Record what an update of ``match_id`` tells about its fairness stream (the commitment, the draw
        it made); the match streams and :meth:`get_match` call it for every update they return."""
        drew = update.event.kind == "chance" and update.event.HasField("draw")
        if update.fairness_commitment or drew:
            record = self._fairness_record(match_id)
        elif seat is None or (found := self.fairness(match_id)) is None:
            return  # nothing about fairness (every update of a chess match)
        else:
            record = found
        changed = record.note_update(update)
        if seat is not None:
            changed = record.note_seat(seat) or changed
        if changed:
            self._recorded(record)

    async def fairness_proof(self, match_id: str, *, wait_s: float = 0.0) -> gw.GetFairnessProofResponse:
        """The match's fairness proof (``GetFairnessProof``). ``wait_s``: how long to keep asking while it
        is not revealed yet (``FAILED_PRECONDITION``: the match just ended and its stream is being
        finished)."""
        request = gw.GetFairnessProofRequest(match_id=match_id)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                reply: gw.GetFairnessProofResponse = await self._call(
                    self._stub.GetFairnessProof, request, repeatable=True
                )
                return reply
            except GatewayError as error:
                if error.code != grpc.StatusCode.FAILED_PRECONDITION or time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(0.25)

    async def check_fairness(self, match_id: str, *, wait_s: float = 10.0) -> FairnessCheck:
        """Fetch the match's proof and record and verify the proof against what was recorded here: the
        commitment announced before the match, the player's own client seed (for their seat) and every
        draw the match used. :class:`GatewayError` when the proof cannot be had;
        ``libs.fairness.ProofFormatError`` when it is malformed."""
        reply = await self.fairness_proof(match_id, wait_s=wait_s)
        proof = Proof.from_json(reply.proof_json)
        try:
            game_record = await self.get_record(match_id)
        except GatewayError as error:  # the draws the updates showed are checked all the same
            return check_proof(
                proof, self.fairness(match_id), None, proof_json=reply.proof_json, record_problem=str(error)
            )
        return check_proof(
            proof, self.fairness(match_id), game_record.fairness_draws, proof_json=reply.proof_json
        )

    def watch_match(self, match_id: str, *, spectator: bool = False, from_sequence: int = 0) -> MatchStream:
        """The match's updates after ``from_sequence``, reconnecting on its own (see :class:`MatchStream`)."""
        return MatchStream(self, match_id, spectator=spectator, from_sequence=from_sequence)

    def play(self, match_id: str, *, from_sequence: int = 0) -> PlayStream:
        """Play the match the caller is seated in over one stream: its updates after ``from_sequence``
        and the answers to the actions submitted on it, reconnecting on its own (see :class:`PlayStream`)."""
        return PlayStream(self, match_id, from_sequence=from_sequence)

    def _open_match_stream(self, match_id: str, spectator: bool, from_sequence: int) -> Any:
        request = gw.WatchMatchRequest(match_id=match_id, spectator=spectator, from_sequence=from_sequence)
        return self._stub.WatchMatch(request, metadata=self._metadata)

    def _open_play_stream(self) -> Any:
        return self._stub.Play(metadata=self._metadata)

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
        session = self.session
        # A seated player's client seed goes in before the first deal of a chance family, once the
        # commitment is known: now if it was recorded already (MatchReady, GetMatch), else as soon as
        # the stream's first update (which names it) arrives.
        seeding = not self.spectator and session.uses_chance(self.match_id)
        if seeding and _commitment_known(session, self.match_id):
            await session.seed_match(self.match_id)
            seeding = False
        reopening = _Reopening(session, seen=self.last_sequence > 0)
        while not self._closed:
            self._call = session._open_match_stream(self.match_id, self.spectator, self.last_sequence)
            try:
                async for response in self._call:
                    update: rules_pb2.MatchUpdate = response.update
                    session.observe(self.match_id, update)
                    if seeding:
                        seeding = False
                        await session.seed_match(self.match_id, learn_commitment=False)
                    if update.sequence <= self.last_sequence:
                        continue
                    self.last_sequence = update.sequence
                    reopening.progressed()
                    yield update
                    if is_over(update):
                        return
            except grpc.aio.AioRpcError as error:
                if self.closed:  # (a property: close() may have run while the stream was read)
                    return
                # Not closed here: a CANCELLED is the gateway's shutdown ending the call (grpc/grpc#41785),
                # a broken stream to reopen, not this side's close.
                await reopening.after_error(error, broken=error.code() == grpc.StatusCode.CANCELLED)
                self.reconnects += 1
                continue
            finally:
                self._call.cancel()
            # The stream ended cleanly without a final update (it should not): reopen it.
            await reopening.after_early_end("match stream")
            self.reconnects += 1

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Stop: the iteration ends."""
        self._closed = True
        if self._call is not None:
            self._call.cancel()


def _commitment_known(session: PlayerSession, match_id: str) -> bool:
    record = session.fairness(match_id)
    return record is not None and bool(record.commitment)


@dataclass(slots=True)
class _Unanswered:
    """An action sent on a play stream and not answered yet."""

    request: gw.PlayRequest
    answer: asyncio.Future[int]


class _Ended:
    """The end of a play stream's updates (``error``: why, when it did not end with the match)."""

    __slots__ = ("error",)

    def __init__(self, error: GatewayError | None) -> None:
        self.error = error


class PlayStream:
    """A seated player's match over one ``Play`` stream: the updates (each exactly once and in order,
    across reconnections) and the answers to the actions submitted on it.

    Iterate it (``async for update in stream``, or :meth:`updates`); it ends after the match's final
    update. :attr:`seat` is the caller's seat once the gateway opened the stream (:meth:`opened` waits for
    it). :meth:`submit` sends an action and returns the sequence it was given, or raises
    :class:`GatewayError` with the code and reason the gateway refused it for (a refused action does not
    end the stream); several may be in flight at once, each answer is matched by its idempotency key. A
    background task reads the stream, so answers arrive whether or not the updates are being read.

    Reconnection is :class:`MatchStream`'s: a stream that breaks with ``UNAVAILABLE`` or
    ``RESOURCE_EXHAUSTED`` is reopened from :attr:`last_sequence`, a match that does not exist yet (just
    paired) is waited for, other refusals end the stream with :class:`GatewayError` (raised by the
    iteration and by every unanswered :meth:`submit`). Actions sent but not answered when a stream broke
    are sent again on the next one with the same idempotency key, so each is applied and answered once
    (a repeat returns the original answer). When the match's final update arrives with actions still
    unanswered, the stream is told that no more come (the gateway then answers those in flight and ends
    it); any whose answer still did not come are asked once more through ``SubmitAction`` with their key.

    ``async with session.play(match_id) as stream`` closes it on the way out; otherwise call
    :meth:`close` (or ``await`` :meth:`aclose`)."""

    def __init__(self, session: PlayerSession, match_id: str, *, from_sequence: int = 0) -> None:
        self.session = session
        self.match_id = match_id
        self.last_sequence = from_sequence
        self.seat: int | None = None
        """The caller's seat, from the gateway's ``opened`` (``None`` until then)."""
        self.reconnects = 0
        """How many times the stream was reopened."""
        self._unanswered: dict[str, _Unanswered] = {}
        """By idempotency key, in the order they were submitted."""
        self._outbox: asyncio.Queue[gw.PlayRequest | None] | None = None
        """What the open stream is still to send (``None`` while none is open)."""
        self._updates: asyncio.Queue[rules_pb2.MatchUpdate | _Ended] = asyncio.Queue()
        self._opened = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._call: Any = None
        self._over = False
        """The match's final update arrived."""
        self._ended: _Ended | None = None
        self._closed = False
        self._seeding = session.uses_chance(match_id)
        """The client seed is still to be sent (a chance family): once the commitment is known."""

    async def __aenter__(self) -> Self:
        self._start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncIterator[rules_pb2.MatchUpdate]:
        return self.updates()

    async def updates(self) -> AsyncIterator[rules_pb2.MatchUpdate]:
        """The match's updates after :attr:`last_sequence` as the stream opened, to the final one."""
        self._start()
        while True:
            item = await self._updates.get()
            if isinstance(item, _Ended):
                self._updates.put_nowait(item)  # for any later reader
                if item.error is not None:
                    raise item.error
                return
            yield item
            if is_over(item):
                return

    async def opened(self) -> int:
        """The caller's seat, once the gateway opened the stream; :class:`GatewayError` if it could not."""
        self._start()
        await self._opened.wait()
        if self.seat is None:
            raise self._end_error()
        return self.seat

    async def submit(self, action: rules_pb2.Action, *, idempotency_key: str | None = None) -> int:
        """Play ``action`` for the caller's seat; the sequence it was given. The idempotency key (fresh
        unless given) makes repeats safe. A refusal is :class:`GatewayError`; the rate limit (and
        ``UNAVAILABLE``) are retried with the same key as the session's calls are."""
        key = idempotency_key or new_key()
        attempts = _Attempts(self.session.retry, repeatable=True)
        while True:
            try:
                return await self._send(key, action)
            except GatewayError as error:
                wait = None if self._ended is not None else attempts.wait_after(error)
                if wait is None:
                    raise
                await asyncio.sleep(wait)

    async def _send(self, key: str, action: rules_pb2.Action) -> int:
        self._start()
        if self._ended is not None or self._over:
            raise self._end_error()
        entry = self._unanswered.get(key)
        if entry is None:
            request = gw.PlayRequest(action=gw.PlayAction(idempotency_key=key, action=action))
            entry = _Unanswered(request, asyncio.get_running_loop().create_future())
            self._unanswered[key] = entry
            if self._outbox is not None:
                self._outbox.put_nowait(request)
        try:
            return await entry.answer
        finally:
            if self._unanswered.get(key) is entry:  # the caller gave up waiting (cancelled)
                del self._unanswered[key]

    def close(self) -> None:
        """Stop: the iteration ends, and actions still unanswered raise ``CANCELLED``."""
        if self._closed:
            return
        self._closed = True
        if self._call is not None:
            self._call.cancel()
        if self._task is not None:
            self._task.cancel()
        self._end(None)

    async def aclose(self) -> None:
        """:meth:`close`, then wait for the background task to stop."""
        self.close()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    # -- the background task -----------------------------------------------------------------------------

    def _start(self) -> None:
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._run(), name=f"play-{self.match_id}")

    async def _run(self) -> None:
        error: GatewayError | None = None
        try:
            if self._seeding and _commitment_known(self.session, self.match_id):
                # The seed goes in before the first deal of a chance family; with the commitment not
                # known yet, the stream's first update (which names it) sends it instead.
                self._seeding = False
                await self.session.seed_match(self.match_id)
            await self._play()
            await self._ask_again()
        except GatewayError as failure:
            error = failure
        finally:
            self._end(error)

    async def _play(self) -> None:
        """Open, read and reopen the stream until the match is over (and its actions answered, or the
        stream ended)."""
        reopening = _Reopening(self.session, seen=self.last_sequence > 0)
        policy = self.session.retry
        while not self._closed:
            outbox: asyncio.Queue[gw.PlayRequest | None] = asyncio.Queue()
            outbox.put_nowait(
                gw.PlayRequest(open=gw.PlayOpen(match_id=self.match_id, from_sequence=self.last_sequence))
            )
            for entry in self._unanswered.values():  # sent again with the same key: answered once
                outbox.put_nowait(entry.request)
            self._outbox = outbox
            self._call = call = self.session._open_play_stream()
            writer = _Writer(call, outbox, f"play-{self.match_id}-writer")
            try:
                async with asyncio.timeout(None) as answers_due:
                    async for response in call:
                        kind = response.WhichOneof("kind")
                        if kind == "update":
                            self.session.observe(self.match_id, response.update, seat=self.seat)
                            if self._seeding:
                                self._seeding = False
                                await self.session.seed_match(self.match_id, learn_commitment=False)
                            if self._take(response.update):
                                reopening.progressed()
                        elif kind == "answer":
                            reopening.progressed()
                            self._answered(response.answer)
                        elif kind == "opened":
                            reopening.seen = True
                            self.seat = response.opened.seat
                            self._opened.set()
                        if self._over:
                            if not self._unanswered:
                                return
                            if answers_due.when() is None:  # the gateway answers, then ends the stream
                                outbox.put_nowait(None)
                                answers_due.reschedule(
                                    asyncio.get_running_loop().time() + policy.call_timeout_s
                                )
            except TimeoutError:
                return
            except grpc.aio.AioRpcError as error:
                if self._closed or self._over:
                    return
                cut = error.code() == grpc.StatusCode.CANCELLED  # the gateway's shutdown, not our close
                await reopening.after_error(error, broken=cut or writer.broke(error))
                self.reconnects += 1
                continue
            finally:
                self._outbox = None
                call.cancel()
                await writer.stop()
            if self._over:
                return
            # The stream ended cleanly without a final update (it should not): reopen it.
            await reopening.after_early_end("play stream")
            self.reconnects += 1

    def _take(self, update: rules_pb2.MatchUpdate) -> bool:
        """Pass ``update`` on unless seen already; whether it was new."""
        if update.sequence <= self.last_sequence or self._over:
            return False
        self.last_sequence = update.sequence
        self._updates.put_nowait(update)
        if is_over(update):
            self._over = True
        return True

    def _answered(self, answer: gw.PlayAnswer) -> None:
        entry = self._unanswered.pop(answer.idempotency_key, None)
        if entry is None or entry.answer.done():
            return  # a repeat's answer, or one nobody waits for any more
        if answer.code == grpc.StatusCode.OK.value[0]:
            entry.answer.set_result(answer.sequence)
        else:
            entry.answer.set_exception(GatewayError.from_answer(answer))

    async def _ask_again(self) -> None:
        """The actions still unanswered when the match ended (their answers did not come before the
        stream did): ask ``SubmitAction`` with the same key, which returns the original answer."""

        async def ask(key: str, entry: _Unanswered) -> None:
            try:
                reply = await self.session.submit(
                    self.match_id, entry.request.action.action, idempotency_key=key
                )
            except GatewayError as error:
                if not entry.answer.done():
                    entry.answer.set_exception(error)
            else:
                if not entry.answer.done():
                    entry.answer.set_result(reply.sequence)
            self._unanswered.pop(key, None)

        if self._over and not self._closed:
            await asyncio.gather(*(ask(key, entry) for key, entry in list(self._unanswered.items())))

    def _end_error(self) -> GatewayError:
        if self._ended is not None and self._ended.error is not None:
            return self._ended.error
        if self._closed:
            return GatewayError(grpc.StatusCode.CANCELLED, "the play stream was closed")
        return GatewayError(grpc.StatusCode.FAILED_PRECONDITION, f"match {self.match_id} is over")

    def _end(self, error: GatewayError | None) -> None:
        """The stream is done: the iteration ends (with ``error``), unanswered actions fail."""
        if self._ended is not None:
            return
        self._ended = _Ended(error)
        self._updates.put_nowait(self._ended)
        self._opened.set()
        failure = self._end_error()
        for entry in self._unanswered.values():
            if not entry.answer.done():
                entry.answer.set_exception(failure)
                entry.answer.exception()  # retrieved here: its submit may be gone
        self._unanswered.clear()


class _Writer:
    """Sends one play stream's requests as they are queued (gRPC allows one write at a time); ``None``
    in the queue: no more (the gateway then answers the actions in flight and ends the stream)."""

    def __init__(self, call: Any, outbox: asyncio.Queue[gw.PlayRequest | None], name: str) -> None:
        self.call = call
        self.outbox = outbox
        self.writing = False
        """A write is under way (or failed): a stream that ended meanwhile may show the failed write's
        ``INTERNAL`` instead of the status the gateway ended it with."""
        self.task = asyncio.create_task(self._run(), name=name)

    async def _run(self) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            while (request := await self.outbox.get()) is not None:
                self.writing = True
                await self.call.write(request)
                self.writing = False
            await self.call.done_writing()

    def broke(self, error: grpc.aio.AioRpcError) -> bool:
        """Whether ``error`` is this side's write failing on a stream that was ending (the connection
        broke: reopen it), not a refusal of the gateway's."""
        return self.writing and error.code() == grpc.StatusCode.INTERNAL

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


class Lobby:
    """The player's lobby events, read in the background while open (``async with session.lobby()``).

    :meth:`match_ready` waits for the ``MatchReady`` of a table (or of a queue pairing). An event can be
    missed in the moment the stream is being (re)opened, so the player's match history is also checked
    as a fallback: :attr:`poll_s` seconds into the wait, then each time after twice as long as the last,
    up to :attr:`max_poll_s` (a busy lobby must not be asked for every waiting player's history every
    second: that load would slow the pairing it waits for).
    """

    EVENTS_KEPT: Final = 1000

    def __init__(self, session: PlayerSession, poll_s: float = 1.0, max_poll_s: float = 8.0) -> None:
        self.session = session
        self.poll_s = poll_s
        self.max_poll_s = max_poll_s
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
                    which = event.WhichOneof("event")
                    if which == "match_ready":
                        self.session.note_match_ready(event.match_ready)
                        self._ready.append(event.match_ready)
                        self._changed.set()
                    elif which == "subscribed":
                        for playing in event.subscribed.playing:
                            self.session.note_match_ready(playing)
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
                ready = mm.MatchReady(
                    match_id=played.match_id,
                    family=played.family,
                    seat=played.seat,
                    opponent_id=played.opponent_id,
                    table_id=played.table_id,
                    fairness_commitment=played.fairness_commitment,
                    fairness_version=played.fairness_version,
                )
                self.session.note_match_ready(ready)
                return ready
        return None

    async def match_ready(self, *, table_id: str | None = None) -> mm.MatchReady:
        """The match of table ``table_id`` (``None``: of a quick-match pairing made since the lobby
        opened) once it exists. Bound the wait with ``asyncio.timeout`` if needed."""
        poll_s = self.poll_s
        while True:
            found = self._find(table_id)
            if found is not None:
                return found
            if self._error is not None:
                raise self._error
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), poll_s)
                continue
            found = await self._from_history(table_id)
            if found is not None:
                return found
            poll_s = min(2 * poll_s, max(self.max_poll_s, self.poll_s))
