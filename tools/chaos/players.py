"""The recording players: pairs of bots that play match after match through the gateway and write down
what they were told, for the checks to hold against the database afterwards.

Each family has ``matches_per_family`` *lanes*; a lane is two players who open a private table, join it
and play the match to its end, then the next one, until the run's time is up (then the player to move
resigns). The gateway has two doors for play and every match uses both: one seat (drawn from the seed,
match by match) plays over the bidirectional ``Play`` stream (updates and actions on one stream,
:class:`clients.player.PlayStream`), the other over ``WatchMatch`` for the updates and ``SubmitAction``
for the actions (:data:`PLAY` and :data:`WATCH`). What is recorded, for both doors alike:

- every action answered (acknowledged): match, seat, the sequence it was given, its idempotency key,
  the door;
- every match stream the gRPC layer opened (a ``WatchMatch`` or a ``Play`` call; each reconnection is a
  stream of its own): when it opened, every silence longer than a couple of seconds, how it ended
  (status code, the client closing it, or the player giving up on it after
  :data:`~tools.chaos.config.WATCHDOG_S` of silence), the door;
- each match's final update as each seat saw it;
- every refusal, by call and status code.

A refused call is tried again (an action with the same idempotency key) while the refusal is one a
restart explains (``UNAVAILABLE``, ``DEADLINE_EXCEEDED``...); the refusals are counted all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

import grpc
from skillclassics.gateway.v1 import gateway_pb2 as gw
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm
from skillclassics.rules.v1 import rules_pb2

from clients.families import FamilyClient, family, plies_played, resign_action
from clients.player import (
    GatewayError,
    MatchStream,
    PlayerSession,
    PlayStream,
    RetryPolicy,
    development_token,
    is_over,
    new_key,
)
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
EXPLAINED = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.FAILED_PRECONDITION,
    }
)
"""Refusals that are only counted; any other is also listed, with its reason
(:attr:`Recorder.odd_refusals`)."""
EXPLAINED_ENDS = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
"""How a match stream may end when a service restarts; any other end is recorded with its details."""
GIVE_UP_S = 90.0
"""How long one call is retried before the player gives up on it."""
SILENCE_NOTED_MS = 2_000
"""Silences of a stream longer than this are kept (the hung-stream check judges them)."""
WATCH: Final = "watch"
"""The door of ``WatchMatch`` streams and ``SubmitAction`` calls."""
PLAY: Final = "play"
"""The door of the bidirectional ``Play`` stream (updates, actions and their answers on one stream)."""
DOORS: Final = (WATCH, PLAY)


@dataclass(frozen=True, slots=True)
class Ack:
    """An action the gateway acknowledged."""

    match_id: str
    player: str
    seat: int
    sequence: int
    key: str
    at_ms: int
    door: str = WATCH


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
    door: str = WATCH
    """:data:`WATCH` (a ``WatchMatch`` call) or :data:`PLAY` (a ``Play`` call)."""
    detail: str = ""
    """For an end a restart does not explain (``INTERNAL``, ``UNKNOWN``...): the status's details and grpc's
    debug string, to tell a server's refusal from the client library's own."""

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
        self.odd_refusals: list[str] = []
        """Refusals a restart does not explain (:data:`EXPLAINED` aside), with when, why and whether the
        gateway answered them."""
        self.failures: list[str] = []
        """Lanes or matches the players had to give up on, and why."""

    def refused(self, operation: str, error: GatewayError) -> None:
        """Count a refusal (and list it when a restart does not explain it)."""
        self.refusals[(operation, error.code.name)] += 1
        if error.code not in EXPLAINED:
            answered = "answered by the gateway" if error.reached else "no answer of the gateway's"
            self.odd_refusals.append(
                f"{now_ms()} {operation} {error.code.name}: {error.details} ({answered})"
            )


class _RecordedCall:
    """A gRPC match stream call (``WatchMatch`` or ``Play``) that reports what it delivers, and how it
    ended, to a :class:`StreamLog`. A ``Play`` call's writes go through untouched; every message it
    delivers (the ``opened``, each update, each answer) counts as one."""

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
            if error.code() not in EXPLAINED_ENDS:
                self.log.detail = f"{error.details()} ({error.debug_error_string()})"[:500]
            raise
        self.log.finish("OK", now_ms())

    def cancel(self) -> bool:
        self.log.finish("closed", now_ms())
        return bool(self._call.cancel())

    async def write(self, request: Any) -> None:
        await self._call.write(request)

    async def done_writing(self) -> None:
        await self._call.done_writing()


class _Stalled(Exception):
    """A play stream did not answer an action within :data:`~tools.chaos.config.WATCHDOG_S`: given up
    on, like a silent stream."""


_PLAYING: contextvars.ContextVar[str] = contextvars.ContextVar("chaos_playing", default="")
"""The match of the :class:`~clients.player.PlayStream` whose background task is running (its task, and
the tasks it starts, inherit it): which match a ``Play`` call opened there is for."""


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

    def play(self, match_id: str, *, from_sequence: int = 0) -> PlayStream:
        """The library's play stream, started at once with the match named for :meth:`_open_play_stream`
        (the stream opens its calls from a background task started here, which keeps the name)."""
        stream = super().play(match_id, from_sequence=from_sequence)
        named = _PLAYING.set(match_id)
        try:
            stream._start()
        finally:
            _PLAYING.reset(named)
        return stream

    def _open_play_stream(self) -> Any:
        match_id = _PLAYING.get()
        if not match_id:
            raise RuntimeError("a Play stream opened outside RecordingSession.play")
        log = StreamLog(match_id, self.player, now_ms(), door=PLAY)
        self.recorder.streams.append(log)
        self.current[match_id] = log
        return _RecordedCall(super()._open_play_stream(), log)


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
                self.recorder.refused(operation, error)
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
        doors = random.Random(f"{self.seed}-{plan.name}-{number}-doors")
        """Which seat of each match plays over ``Play`` (the other over WatchMatch and SubmitAction)."""
        try:
            for who in (host, guest):
                await self._retrying("WhoAmI", who.whoami)
            while not self.stopping.is_set():
                match_id = await self._setup(plan, fam, host, guest)
                if match_id is None:
                    return
                log = MatchLog(match_id, plan.name, players, now_ms())
                self.recorder.matches[match_id] = log
                playing = doors.randrange(2)  # the host's (0) or the guest's (1) seat plays over Play
                await asyncio.gather(
                    self._seat(
                        plan, fam, host, match_id, log, random.Random(rng.random()), DOORS[playing == 0]
                    ),
                    self._seat(
                        plan, fam, guest, match_id, log, random.Random(rng.random()), DOORS[playing == 1]
                    ),
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
                self.recorder.refused("JoinTable", error)
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
        door: str,
    ) -> None:
        """Play one seat of ``match_id`` to the end (resigning at the cap, or once the run stops) through
        ``door``: :data:`PLAY` (one ``Play`` stream for the updates and the actions) or :data:`WATCH`
        (``WatchMatch`` for the updates, ``SubmitAction`` for the actions)."""
        strategy = fam.strategy("random", rng)
        info: gw.GetMatchResponse = await self._retrying(
            "GetMatch", lambda: session.get_match(match_id, wait_s=RIDE_OUT.creation_wait_s)
        )
        seat = info.seat
        last = acted_at = counted = 0
        opening = "Play" if door == PLAY else "WatchMatch"
        while True:
            stream: MatchStream | PlayStream = (
                session.play(match_id, from_sequence=last)
                if door == PLAY
                else session.watch_match(match_id, from_sequence=last)
            )
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
                            current.finish("abandoned", now_ms())
                        break
                    last = update.sequence
                    if update.event.kind == "action":
                        counted += 1
                    if is_over(update):
                        log.finals[seat] = update
                        return
                    if update.sequence < acted_at or not fam.should_act(update, seat):
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
                    if isinstance(stream, PlayStream):
                        sequence = await self._play_action(session, stream, match_id, seat, action)
                    else:
                        sequence = await self._submit(session, match_id, seat, action)
                    if sequence is not None:
                        acted_at = sequence
            except _Stalled:
                pass  # given up on (recorded): reopened below
            except GatewayError as error:
                self.recorder.refused(opening, error)
                if error.code not in RETRYABLE:
                    log.problems.append(f"{session.player}'s {opening} stream: {error}")
                    raise
                await asyncio.sleep(0.5)
            finally:
                if isinstance(stream, PlayStream):
                    await stream.aclose()
                else:
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

    async def _play_action(
        self,
        session: RecordingSession,
        stream: PlayStream,
        match_id: str,
        seat: int,
        action: rules_pb2.Action,
    ) -> int | None:
        """Send ``action`` on the play stream: the sequence, or ``None`` when it was refused or the stream
        ended before its answer (:class:`_Stalled` when no answer came for
        :data:`~tools.chaos.config.WATCHDOG_S`: the stream is given up on). The stream itself sends an
        unanswered action again, with the same key, on each stream it reopens, and retries the rate
        limit and ``UNAVAILABLE``; an action whose stream ended is not answered here (the loop reads the
        stream's end, then the match, and goes on from its next update with a fresh action)."""
        key = new_key()
        try:
            sequence = await asyncio.wait_for(stream.submit(action, idempotency_key=key), WATCHDOG_S)
        except GatewayError as error:
            self.recorder.refused("Play action", error)
            return None
        except TimeoutError:
            current = session.current.get(match_id)
            if current is not None:
                current.finish("abandoned", now_ms())
            raise _Stalled from None
        self.recorder.acks.append(Ack(match_id, session.player, seat, sequence, key, now_ms(), door=PLAY))
        return sequence
