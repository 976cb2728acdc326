"""The recording players: pairs of bots that play match after match through the gateway and write down
what they were told, for the checks to hold against the database afterwards.

Each family has ``matches_per_family`` *lanes*; a lane is two players who open a private table, join it
and play the match to its end (WatchMatch for the updates, SubmitAction for the actions), then the next
one, until the run's time is up (then the player to move resigns). What is recorded:

- every action answered (acknowledged): match, seat, the sequence it was given, its idempotency key;
- every match stream the gRPC layer opened (each reconnection is a stream of its own): when it opened,
  every silence longer than a couple of seconds, how it ended (status code, the client closing it, or
  the player giving up on it after :data:`~tools.chaos.config.WATCHDOG_S` of silence);
- each match's final update as each seat saw it;
- every refusal, by call and status code.

A refused call is tried again (an action with the same idempotency key) while the refusal is one a
restart explains (``UNAVAILABLE``, ``DEADLINE_EXCEEDED``...); the refusals are counted all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
from skillclassics.gateway.v1 import gateway_pb2 as gw
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm
from skillclassics.rules.v1 import rules_pb2

from clients.families import FamilyClient, family, plies_played, resign_action
from clients.player import GatewayError, PlayerSession, RetryPolicy, development_token, is_over, new_key
from tools.chaos.config import WATCHDOG_S, FamilyPlan
from tools.chaos.controller import now_ms

_T = TypeVar("_T")

RIDE_OUT = RetryPolicy(
    unavailable_attempts=40,
    rate_limited_attempts=200,
    stream_attempts=40,
    first_delay_s=0.05,
    max_delay_s=0.25,
    call_timeout_s=5.0,
    creation_wait_s=20.0,
)
"""Players that ride out restarts: quick, many retries, with the same keys."""
RETRYABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
    }
)
"""Refusals a player tries again (those a restart or an outage explains; INTERNAL and UNKNOWN too, so
that play goes on, but they are counted and reported)."""
BUSY = frozenset({grpc.StatusCode.FAILED_PRECONDITION})
GIVE_UP_S = 90.0
"""How long one call is retried before the player gives up on it."""
SILENCE_NOTED_MS = 2_000
"""Silences of a stream longer than this are kept (the hung-stream check judges them)."""


@dataclass(frozen=True, slots=True)
class Ack:
    """An action the gateway acknowledged."""

    match_id: str
    player: str
    seat: int
    sequence: int
    key: str
    at_ms: int


@dataclass(slots=True)
class StreamLog:
    """One gRPC match stream a player opened."""

    match_id: str
    player: str
    opened_ms: int
    last_ms: int = 0
    messages: int = 0
    silences: list[tuple[int, int]] = field(default_factory=list)
    """(from, to) of every silence longer than :data:`SILENCE_NOTED_MS`, the one before the end included."""
    end: str | None = None
    """``OK``, a status code name, ``closed`` (by the client), ``abandoned`` (silent too long) or ``open``."""
    ended_ms: int | None = None

    def message(self, at_ms: int) -> None:
        self._silence(at_ms)
        self.messages += 1
        self.last_ms = at_ms

    def finish(self, end: str, at_ms: int) -> None:
        if self.end is not None:
            return
        self._silence(at_ms)
        self.end, self.ended_ms = end, at_ms

    def _silence(self, at_ms: int) -> None:
        since = self.last_ms or self.opened_ms
        if at_ms - since > SILENCE_NOTED_MS:
            self.silences.append((since, at_ms))


@dataclass(slots=True)
class MatchLog:
    """A match as its players saw it."""

    match_id: str
    family: str
    players: tuple[str, str]
    """By seat."""
    started_ms: int
    finals: dict[int, rules_pb2.MatchUpdate] = field(default_factory=dict)
    """The final update each seat saw."""
    problems: list[str] = field(default_factory=list)


class Recorder:
    """Everything the players wrote down."""

    def __init__(self) -> None:
        self.acks: list[Ack] = []
        self.streams: list[StreamLog] = []
        self.matches: dict[str, MatchLog] = {}
        self.refusals: Counter[tuple[str, str]] = Counter()
        self.failures: list[str] = []
        """Lanes or matches the players had to give up on, and why."""


class _RecordedCall:
    """A gRPC match stream call that reports what it delivers, and how it ended, to a :class:`StreamLog`."""

    def __init__(self, call: Any, log: StreamLog) -> None:
        self._call = call
        self.log = log

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._responses()

    async def _responses(self) -> AsyncIterator[Any]:
        try:
            async for response in self._call:
                self.log.message(now_ms())
                yield response
        except grpc.aio.AioRpcError as error:
            self.log.finish(error.code().name, now_ms())
            raise
        self.log.finish("OK", now_ms())

    def cancel(self) -> bool:
        self.log.finish("closed", now_ms())
        return bool(self._call.cancel())


class RecordingSession(PlayerSession):
    """A player's session whose match streams are recorded."""

    def __init__(self, address: str, token: str, player: str, recorder: Recorder) -> None:
        super().__init__(address, token, retry=RIDE_OUT)
        self.player = player
        self.recorder = recorder
        self.current: dict[str, StreamLog] = {}
        """The stream of each match opened last."""

    def _open_match_stream(self, match_id: str, spectator: bool, from_sequence: int) -> Any:
        log = StreamLog(match_id, self.player, now_ms())
        self.recorder.streams.append(log)
        self.current[match_id] = log
        return _RecordedCall(super()._open_match_stream(match_id, spectator, from_sequence), log)


class Players:
    """The lanes of a run: :meth:`run` plays until ``stopping`` is set, then plays out what is started."""

    def __init__(
        self,
        gateway: str,
        data_dir: Path,
        run_id: str,
        plans: tuple[FamilyPlan, ...],
        lanes_per_family: int,
        *,
        seed: int,
        move_delay_s: float,
        say: Callable[[str], None] = print,
    ) -> None:
        self.gateway = gateway
        self.env = {"DATA_DIR": str(data_dir)}
        self.run_id = run_id
        self.plans = plans
        self.lanes_per_family = lanes_per_family
        self.seed = seed
        self.move_delay_s = move_delay_s
        self.say = say
        self.recorder = Recorder()
        self.sessions: dict[str, RecordingSession] = {}
        self.stopping = asyncio.Event()

    def session(self, player: str) -> RecordingSession:
        found = self.sessions.get(player)
        if found is None:
            token = development_token(player, self.env, ttl_s=6 * 3600)
            found = self.sessions[player] = RecordingSession(self.gateway, token, player, self.recorder)
        return found

    async def close(self) -> None:
        for session in self.sessions.values():
            await session.close()

    def lanes(self) -> list[Coroutine[Any, Any, None]]:
        return [self._lane(plan, number) for plan in self.plans for number in range(self.lanes_per_family)]

    # -- calling, riding out outages ---------------------------------------------------------------------

    async def _retrying(
        self,
        operation: str,
        make: Callable[[], Awaitable[_T]],
        also: frozenset[grpc.StatusCode] = frozenset(),
    ) -> _T:
        """``make()`` until it is answered, while the refusal is retryable (or in ``also``)."""
        began = time.monotonic()
        while True:
            try:
                return await make()
            except GatewayError as error:
                self.recorder.refusals[(operation, error.code.name)] += 1
                retry = error.code in RETRYABLE or error.code in also
                if not retry or time.monotonic() - began > GIVE_UP_S:
                    raise
                await asyncio.sleep(0.25)

    # -- a lane --------------------------------------------------------------------------------------------

    async def _lane(self, plan: FamilyPlan, number: int) -> None:
        fam = family(plan.name)
        players = (f"{self.run_id}-{plan.name}-{number}-a", f"{self.run_id}-{plan.name}-{number}-b")
        host, guest = (self.session(p) for p in players)
        rng = random.Random(f"{self.seed}-{plan.name}-{number}")
        try:
            for who in (host, guest):
                await self._retrying("WhoAmI", who.whoami)
            while not self.stopping.is_set():
                match_id = await self._setup(plan, fam, host, guest)
                if match_id is None:
                    return
                log = MatchLog(match_id, plan.name, players, now_ms())
                self.recorder.matches[match_id] = log
                await asyncio.gather(
                    self._seat(plan, fam, host, match_id, log, random.Random(rng.random())),
                    self._seat(plan, fam, guest, match_id, log, random.Random(rng.random())),
                )
        except GatewayError as error:
            self.recorder.failures.append(f"{plan.name} lane {number}: {error}")
            self.say(f"chaos: {plan.name} lane {number} gave up: {error}")

    async def _setup(
        self, plan: FamilyPlan, fam: FamilyClient, host: RecordingSession, guest: RecordingSession
    ) -> str | None:
        """A private table of ``host``'s that ``guest`` joins: the match's id (``None`` once stopping)."""
        key = new_key()
        control = fam.time_control(plan.minutes)
        options = fam.options({})
        while not self.stopping.is_set():
            table = await self._retrying(
                "CreateTable",
                lambda: host.create_table(
                    plan.name,
                    options=options,
                    time_control=control,
                    visibility=mm.VISIBILITY_PRIVATE,
                    idempotency_key=key,
                ),
                also=BUSY,  # still seated in the last match until its result reaches matchmaking
            )
            if table.match_id:  # joined before (an answer lost in a restart)
                return table.match_id
            try:
                joined = await guest.join_table(table.table_id)
            except GatewayError as error:
                self.recorder.refusals[("JoinTable", error.code.name)] += 1
                if error.code not in RETRYABLE | {grpc.StatusCode.FAILED_PRECONDITION}:
                    raise
                await asyncio.sleep(0.5)
                found = await self._from_history(guest, table.table_id)
                if found:
                    return found
                continue  # the same table again (the same key): join it once more
            if joined.match_id:
                return joined.match_id
            found = await self._from_history(guest, table.table_id)
            if found:
                return found
        return None

    async def _from_history(self, session: RecordingSession, table_id: str) -> str | None:
        history = await self._retrying("GetMatchHistory", session.match_history)
        return next((m.match_id for m in history if m.table_id == table_id), None)

    async def _seat(
        self,
        plan: FamilyPlan,
        fam: FamilyClient,
        session: RecordingSession,
        match_id: str,
        log: MatchLog,
        rng: random.Random,
    ) -> None:
        """Play one seat of ``match_id`` to the end (resigning at the cap, or once the run stops)."""
        strategy = fam.strategy("random", rng)
        info: gw.GetMatchResponse = await self._retrying(
            "GetMatch", lambda: session.get_match(match_id, wait_s=RIDE_OUT.creation_wait_s)
        )
        seat = info.seat
        last = acted_at = counted = 0
        while True:
            stream = session.watch_match(match_id, from_sequence=last)
            updates = aiter(stream)
            try:
                while True:
                    try:
                        update = await asyncio.wait_for(anext(updates), WATCHDOG_S)
                    except StopAsyncIteration:
                        break
                    except TimeoutError:
                        current = session.current.get(match_id)
                        if current is not None:  # closed on the way out: say why
                            current.end = "abandoned"
                        break
                    last = update.sequence
                    if update.event.kind == "action":
                        counted += 1
                    if is_over(update):
                        log.finals[seat] = update
                        return
                    if update.sequence < acted_at or not update.legal_actions:
                        continue
                    plies = plies_played(update, fam, counted)
                    if self.stopping.is_set() or plies >= plan.max_plies:
                        action: rules_pb2.Action | None = resign_action()
                    else:
                        action = strategy(update, seat)
                    if action is None:
                        continue
                    if self.move_delay_s > 0:
                        await asyncio.sleep(self.move_delay_s)
                    sequence = await self._submit(session, match_id, seat, action)
                    if sequence is not None:
                        acted_at = sequence
            except GatewayError as error:
                self.recorder.refusals[("WatchMatch", error.code.name)] += 1
                if error.code not in RETRYABLE:
                    log.problems.append(f"{session.player}'s stream: {error}")
                    raise
                await asyncio.sleep(0.5)
            finally:
                stream.close()
                with contextlib.suppress(BaseException):
                    await updates.aclose()  # type: ignore[attr-defined]
            # The stream ended without the final update: is the match over?
            now: gw.GetMatchResponse = await self._retrying("GetMatch", lambda: session.get_match(match_id))
            if is_over(now.update):
                log.finals[seat] = now.update
                return

    async def _submit(
        self, session: RecordingSession, match_id: str, seat: int, action: rules_pb2.Action
    ) -> int | None:
        """Submit until answered (the same key each time): the sequence, or ``None`` when refused."""
        key = new_key()
        try:
            reply = await self._retrying(
                "SubmitAction", lambda: session.submit(match_id, action, idempotency_key=key)
            )
        except GatewayError as error:
            if error.code in RETRYABLE:
                raise
            return None  # the match moved on (ended, or the update was stale)
        self.recorder.acks.append(Ack(match_id, session.player, seat, reply.sequence, key, now_ms()))
        return reply.sequence
