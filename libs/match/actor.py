"""One live match: the single writer of its log, its watchers and its wake-ups.

Actions on a match are applied one at a time under the match's lock; different matches run
concurrently (their commits share group transactions). The live path is: check what fell due (a move
after the flag loses even before the wake-up arrives), step the record (the engine validates), append
the event durably, and only then swap the record in, answer and broadcast.
"""

from __future__ import annotations

import asyncio
import json
from array import array
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from libs.engines.base import (
    GameOverError,
    IllegalActionError,
    MalformedActionError,
    NotYourTurnError,
    Outcome,
)
from libs.match.chance import ChanceSource, ChanceUnavailable, NoChance
from libs.match.deadlines import Deadlines
from libs.match.family import Family, PlaysForAbsentSeats
from libs.match.model import Due, EventKind, MatchEvent, MatchRecord, created, outcome_to_json, step
from libs.match.presence import DEFAULT_LEASE_MS, DIRECT, RECOVERED, SeatLeases
from libs.match.store import MatchStore, result_row
from libs.runtime.errors import (
    AlreadyExists,
    ErrorReason,
    FailedPrecondition,
    InvalidArgument,
    ResourceExhausted,
    invalid_field,
)
from libs.runtime.game_metrics import MatchMetrics
from libs.runtime.log import get_logger
from libs.runtime.timesource import ServiceTime

WATCHER_QUEUE_LIMIT = 1_000
"""A watcher this many updates behind is disconnected; it reconnects from its last sequence."""
CHANCE_RETRY_SECONDS = 1.0
"""How soon a draw the fairness service could not give is asked for again."""
SEED_POLL_SECONDS = 0.1
"""While a first draw waits for the players' seeds, how soon fairness is first asked again whether they
are in; each later ask waits twice as long, up to :data:`SEED_POLL_MAX_SECONDS` (many matches set up at
once must not flood fairness with asks ten times a second each)."""
SEED_POLL_MAX_SECONDS = 0.8
_log = get_logger(__name__)
_T = TypeVar("_T")


def replay(family: Family, events: Iterable[MatchEvent]) -> Iterable[MatchRecord]:
    """The record after each event of a log, in order."""
    record: MatchRecord | None = None
    for event in events:
        record = created(family, event) if record is None else step(family, record, event)
        yield record


def rebuild(family: Family, events: Iterable[MatchEvent]) -> MatchRecord:
    """The record at the end of a log."""
    last = deque(replay(family, events), maxlen=1)
    if not last:
        raise ValueError("an empty log")
    return last[0]


@dataclass(eq=False)
class _Watcher:
    """One open watch stream's queue of updates, ended by ``None`` (shutdown, or fell too far behind)."""

    queue: asyncio.Queue[MatchRecord | None] = field(default_factory=asyncio.Queue)
    overflowed: bool = False

    def offer(self, record: MatchRecord) -> None:
        """Queue ``record``; a watcher :data:`WATCHER_QUEUE_LIMIT` updates behind gets one ``None`` (it is
        cut off when it reads that far) and nothing more, so its queue never grows past the limit + 1."""
        if self.overflowed:
            return
        if self.queue.qsize() >= WATCHER_QUEUE_LIMIT:
            self.overflowed = True
            self.queue.put_nowait(None)
        else:
            self.queue.put_nowait(record)


class MatchClosed(Exception):
    """The service is shutting down; watchers reconnect."""


class MatchActor:
    """The runtime side of one match."""

    def __init__(
        self,
        family: Family,
        events: list[MatchEvent],
        store: MatchStore,
        deadlines: Deadlines,
        time: ServiceTime,
        on_finished: Callable[[], None] = lambda: None,
        chance: ChanceSource | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
        metrics: MatchMetrics | None = None,
    ) -> None:
        self.family = family
        self._metrics = metrics
        """The shard's metrics (docs/deployment.md, "Game metrics"), bound once; ``None``: none kept."""
        self._counted_live = False
        """Whether this match counts in ``skillclassics_matches_live`` now (:meth:`count_live`)."""
        self._lease_ms = lease_ms
        self._chance: ChanceSource = chance if chance is not None else NoChance()
        self._drawing = False
        self._seed_asks = 0
        self._chance_retry: asyncio.TimerHandle | None = None
        self._chance_task: asyncio.Task[None] | None = None
        self._on_finished = on_finished
        self.created_event = events[0]
        """The match's first event (what a retry of ``CreateMatch`` is compared with)."""
        self.record = rebuild(family, events)
        self._store = store
        self._deadlines = deadlines
        self._time = time
        self._lock = asyncio.Lock()
        self._watchers: set[_Watcher] = set()
        self._closed = False
        """Set by :meth:`close`: no watcher is added any more."""
        self._keys = array("q")
        """The hash of every idempotency key the match logged, 8 bytes each (docs/match-runtime.md,
        "Memory"): the log itself stays in the store, not in memory. A key whose hash is not here was
        never used; one whose hash is here is looked up in the store (two keys' hashes may be equal)."""
        for event in events:
            self._remember_key(event)
        self._armed_at: int | None = None
        """The wake-up instant wanted (``None``: none)."""
        self._sent_at: int | None = None
        """The wake-up instant the deadlines were last given."""
        self._deadline_task: asyncio.Task[None] | None = None
        self._running: set[asyncio.Future[Any]] = set()
        self.leases = SeatLeases(len(self.record.setup.players))
        """Who vouches for each seat's connection now (in memory; libs/match/presence.py)."""
        self._lease_timer: asyncio.TimerHandle | None = None
        self._lease_timer_at: int | None = None
        self._presence_task: asyncio.Future[None] | None = None
        self._presence_again = False

    @property
    def match_id(self) -> str:
        return self.record.match_id

    def now_ms(self) -> int:
        """The service's time, never before the last logged instant (a restart may step the clock)."""
        return max(self._time.now_ms(), self.record.last_at_ms)

    # -- the live path ---------------------------------------------------------------------------------

    async def submit(self, seat: int, key: str, kind: EventKind, payload: dict[str, Any]) -> MatchRecord:
        """Apply an action (or a resignation) for ``seat``; returns the record right after it."""
        if not 0 <= seat < len(self.record.setup.players):
            raise invalid_field("seat", f"must be 0-{len(self.record.setup.players) - 1}, got {seat}")
        fingerprint = {"seat": seat, "kind": kind.value, **payload}
        return await self._exclusive(lambda: self._submit(seat, key, kind, payload, fingerprint))

    async def _submit(
        self, seat: int, key: str, kind: EventKind, payload: dict[str, Any], fingerprint: dict[str, Any]
    ) -> MatchRecord:
        earlier = await self._logged_with_key(key)
        if earlier is not None:
            asked = {k: v for k, v in earlier.payload.items() if k != "description"}
            original = {"seat": earlier.seat, "kind": earlier.kind.value, **asked}
            if json.dumps(original, sort_keys=True) != json.dumps(fingerprint, sort_keys=True):
                raise AlreadyExists(
                    f"idempotency key {key!r} was used for a different action",
                    reason=ErrorReason.ERROR_REASON_IDEMPOTENCY_KEY_REUSED,
                )
            return await self.record_at(earlier.sequence)
        now = self.now_ms()
        self._refuse_if_over()
        overdue = self.record.overdue(self.family, now)
        if overdue is not None:
            await self._end(*overdue, now)
            self._refuse_if_over()
        event = MatchEvent(self.record.sequence + 1, kind, now, payload, seat, key)
        try:
            updated = step(self.family, self.record, event)
        except MalformedActionError as error:
            raise InvalidArgument(str(error), reason=ErrorReason.ERROR_REASON_MALFORMED_ACTION) from None
        except IllegalActionError as error:
            raise FailedPrecondition(str(error), reason=_illegal_reason(error)) from None
        if kind is EventKind.ACTION:
            # The action in the family's notation (SAN in chess), kept in the log for the record.
            action = self.family.action_from_json(payload["action"])
            described = {**payload, "description": self.family.describe(self.record.game, action)}
            updated = replace(updated, last_event=replace(event, payload=described))
        await self._commit(updated)
        return updated

    async def set_presence(self, seat: int, connected: bool) -> int:
        """Record that ``seat``'s connection opened or closed (``SetPresence``: a lease that never expires,
        taken or released); returns the sequence after it."""
        if not 0 <= seat < len(self.record.setup.players):
            raise invalid_field("seat", f"must be 0-{len(self.record.setup.players) - 1}, got {seat}")
        if not self.record.is_over:
            now = self.now_ms()
            if connected:
                self.leases.renew(seat, DIRECT, now, None)
            else:
                # "Gone" from this caller: the lease a restart gave in its name goes too.
                self.leases.release(seat, DIRECT, now)
                self.leases.release(seat, RECOVERED, now)
        await self._exclusive(self._settle_presence)
        return self.record.sequence

    # -- presence leases (libs/match/presence.py) ----------------------------------------------------------

    def seat_in_range(self, seat: int) -> bool:
        return 0 <= seat < len(self.record.setup.players)

    def renew_presence(
        self, seat: int, holder: str, lease_ms: int | None = None
    ) -> asyncio.Future[None] | None:
        """``holder`` (a gateway instance) vouches for ``seat`` for ``lease_ms`` more. Returns the task that
        logs a change of the seat's presence, or ``None`` when the log already says what the leases say
        (a renewal of a connected seat costs no lock and no write)."""
        self.leases.renew(seat, holder, self.now_ms(), self._lease_ms if lease_ms is None else lease_ms)
        self._arm_lease_timer()
        return self._settle_presence_soon()

    def release_presence(self, seat: int, holder: str) -> asyncio.Future[None] | None:
        """``holder``'s last stream of ``seat`` closed: its lease ends now."""
        self.leases.release(seat, holder, self.now_ms())
        return self._settle_presence_soon()

    async def expire_presence(self) -> None:
        """Drop the leases that have run out and log the seats they leave disconnected."""
        await self._exclusive(self._settle_presence)
        self._arm_lease_timer()

    def _settle_presence_soon(self) -> asyncio.Future[None] | None:
        if self._presence_task is not None and not self._presence_task.done():
            self._presence_again = True  # it may have looked at this seat already: once more after it
            return self._presence_task
        record = self.record
        leases = self.leases
        seats = enumerate(record.disconnected_since)
        if record.is_over or all(leases.connected(seat) == (since is None) for seat, since in seats):
            return None
        task = self._presence_task = asyncio.ensure_future(self._settle_presence_until_still())
        task.add_done_callback(_log_failure)
        return task

    async def _settle_presence_until_still(self) -> None:
        while True:
            self._presence_again = False
            await self._exclusive(self._settle_presence)
            if not self._presence_again:
                return

    async def _settle_presence(self) -> None:
        """Log every seat whose presence in the log differs from what its leases say (under the lock).

        A seat that lost its last lease is disconnected as of the last instant a lease vouched for it
        (its release, or the last renewal of a lease that expired), so a forfeit falls due at that
        instant + the forfeit time however late the expiry was noticed.
        """
        if self.record.is_over:
            return
        now = self.now_ms()
        self.leases.expire(now)
        if await self._end_if_overdue(now):
            return
        for seat, since in enumerate(self.record.disconnected_since):
            connected = self.leases.connected(seat)
            if connected == (since is None):
                continue
            payload: dict[str, Any] = {"connected": connected}
            if not connected:
                payload["since_ms"] = self.leases.since_ms(seat, now)
            event = MatchEvent(self.record.sequence + 1, EventKind.PRESENCE, now, payload, seat)
            await self._commit(step(self.family, self.record, event))
        await self._end_if_overdue(now)  # a lease that ran out long ago may make a forfeit due at once

    def _arm_lease_timer(self) -> None:
        """Keep a timer armed no later than the earliest lease expiry (an early one re-arms, as wake-ups)."""
        target = None if self.record.is_over else self.leases.next_expiry_ms()
        armed = self._lease_timer_at
        if target is not None and armed is not None and armed <= target:
            return
        if self._lease_timer is not None:
            self._lease_timer.cancel()
            self._lease_timer = self._lease_timer_at = None
        if target is None:
            return
        loop = asyncio.get_running_loop()
        self._lease_timer_at = target
        # A delay on the service's own time (a millisecond past the expiry, so that the expiry has come).
        delay_s = max(0, target - self.now_ms() + 1) / 1000
        self._lease_timer = loop.call_later(delay_s, self._lease_timer_fired)

    def _lease_timer_fired(self) -> None:
        self._lease_timer = self._lease_timer_at = None
        task = asyncio.ensure_future(self.expire_presence())
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        task.add_done_callback(_log_failure)

    async def wake(self) -> None:
        """A deadline may have passed: end the match if something fell due, then re-arm."""
        await self._exclusive(self._wake)

    async def _wake(self) -> None:
        self._armed_at = self._sent_at = None  # the wake-up that fired was the one armed
        if not await self._end_if_overdue(self.now_ms()):
            await self._sync_deadline()

    async def _exclusive(self, work: Callable[[], Awaitable[_T]]) -> _T:
        """Run ``work`` under the match's lock, to its end even if the caller goes away.

        A write that was cancelled half-way (a client that hung up while its action was being
        committed) could leave the log ahead of the record in memory: the next event would reuse a
        sequence number. So the work runs as its own task; a cancelled caller stops waiting for it,
        and the match still takes the committed event in.
        """

        async def locked() -> _T:
            async with self._lock:
                return await work()

        task = asyncio.ensure_future(locked())
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return await asyncio.shield(task)

    async def _end_if_overdue(self, now: int) -> bool:
        overdue = self.record.overdue(self.family, now)
        if overdue is None:
            return False
        await self._end(*overdue, now)
        return True

    async def _end(self, due: Due, outcome: Outcome | None, now: int) -> None:
        """Log what fell due: the end it brings, or (a timed phase's deadline: ``outcome`` None) a
        ``deadline`` event, after which the engine says whether and how the match goes on."""
        if due.kind == "stand_in":
            await self._stand_in(due.seat, now)
            return
        if outcome is None:
            payload: dict[str, Any] = {"due_at_ms": due.at_ms, "due": due.kind}
            event = MatchEvent(self.record.sequence + 1, EventKind.DEADLINE, now, payload, due.seat)
        else:
            payload = {"outcome": outcome_to_json(outcome), "ended_at_ms": due.at_ms, "due": due.kind}
            event = MatchEvent(self.record.sequence + 1, EventKind.END, now, payload, due.seat)
        await self._commit(step(self.family, self.record, event))

    async def _stand_in(self, seat: int, now: int) -> None:
        """The family's stand-in plays ``seat``'s turn (its player is away; docs/match-runtime.md,
        "Stand-ins"): logged as the seat's action, marked ``stand_in``, described like any other."""
        family = self.family
        assert isinstance(family, PlaysForAbsentSeats)  # (CreateMatch refuses the policy otherwise)
        action = family.stand_in(self.record.game, seat)
        if action is None:
            return
        payload = {"action": dict(family.action_to_json(action)), "stand_in": True}
        described = {**payload, "description": family.describe(self.record.game, action)}
        event = MatchEvent(self.record.sequence + 1, EventKind.ACTION, now, described, seat)
        await self._commit(step(family, self.record, event))

    def _refuse_if_over(self) -> None:
        outcome = self.record.outcome
        if outcome is not None:
            raise FailedPrecondition(
                f"the match is over: {outcome.detail or outcome.termination.value}",
                reason=ErrorReason.ERROR_REASON_MATCH_OVER,
            )

    async def _commit(self, updated: MatchRecord) -> None:
        previous = self.record.status.value
        result = None
        if updated.is_over:
            result = result_row(updated, self.family.export_record(updated), self.family.record_format)
        await self._store.append(updated, previous, result)
        if result is not None:
            self._on_finished()  # the result is in the outbox: the reporter delivers it
        metrics = self._metrics
        if metrics is not None:
            self._count(metrics, self.record, updated)
        self.record = updated
        self._remember_key(updated.last_event)
        for watcher in self._watchers:
            watcher.offer(updated)
        await self._sync_deadline()
        if not self._drawing:
            await self._settle_chance()

    def _count(self, metrics: MatchMetrics, before: MatchRecord, after: MatchRecord) -> None:
        """The metrics of the event just committed (``before`` to ``after``): no label lookup and no
        allocation for an ordinary action."""
        kind = after.last_event.kind
        if kind is EventKind.ACTION or kind is EventKind.RESIGN:
            metrics.actions.inc()
        if before.live_since_ms is None and after.live_since_ms is not None:
            metrics.first_move.observe((after.live_since_ms - after.setup.created_at_ms) / 1000)
        if after.outcome is not None and before.outcome is None:
            metrics.finished(after.outcome.termination.value)
            self._uncount_live()

    def count_live(self) -> None:
        """Count this match in ``skillclassics_matches_live`` if it is not over (its runtime holds it
        now); it leaves the count when its end is committed or it is closed."""
        if self._metrics is not None and not self._counted_live and not self.record.is_over:
            self._counted_live = True
            self._metrics.live.inc()

    def _uncount_live(self) -> None:
        if self._counted_live and self._metrics is not None:
            self._counted_live = False
            self._metrics.live.dec()

    async def _settle_chance(self) -> None:
        """Obtain, log and apply every draw the game waits for (under the lock).

        The action that led here is already durable and acknowledged; when the fairness service cannot
        give the draw now, the match waits (nobody can act) and the draw is asked for again shortly.
        """
        self._drawing = True
        try:
            while (request := self.record.chance_needed(self.family)) is not None:
                wait_s = await self._seed_wait_s()
                if wait_s > 0:
                    self._retry_chance_later(wait_s)
                    return
                try:
                    values = await self._chance.draw(self.match_id, request)
                except ChanceUnavailable as error:
                    _log.warning("match.chance_unavailable", match_id=self.match_id, reason=str(error))
                    self._retry_chance_later()
                    return
                payload: dict[str, Any] = {
                    "request": request.to_json(),
                    "values": list(values),
                    "description": f"{request.stream} #{request.index} drawn",
                }
                if self.record.live_since_ms is not None:
                    # Play has begun: the wait for this draw, from the event that made it needed, is
                    # charged to nobody (model.step).
                    payload["waited_from_ms"] = self.record.last_at_ms
                event = MatchEvent(self.record.sequence + 1, EventKind.CHANCE, self.now_ms(), payload)
                await self._commit(step(self.family, self.record, event))
        finally:
            self._drawing = False

    async def _seed_wait_s(self) -> float:
        """How long the first draw should still wait for the players' client seeds (0: draw now).

        Before the first draw of a match, the players may mix their own random seeds into its stream
        (docs/fairness.md): then the server could not have chosen its seed to suit anybody. The first
        draw waits for every seat's seed, up to the match's ``client_seed_window_ms``; after that, or
        once all are in, it is made (a player who sends none is protected by the commitment alone).
        """
        setup = self.record.setup
        if not setup.client_seed_window_ms or self.record.draws:
            return 0.0
        left_ms = setup.created_at_ms + setup.client_seed_window_ms - self.now_ms()
        if left_ms <= 0:
            return 0.0
        try:
            if await self._chance.seeds(self.match_id) >= len(setup.players):
                return 0.0
        except ChanceUnavailable:
            pass  # ask again shortly; the window still ends the wait
        backoff = min(SEED_POLL_SECONDS * (1 << min(self._seed_asks, 8)), SEED_POLL_MAX_SECONDS)
        self._seed_asks += 1
        return min(left_ms / 1000, backoff)

    def _retry_chance_later(self, delay_s: float = CHANCE_RETRY_SECONDS) -> None:
        if self._chance_retry is not None:
            return
        loop = asyncio.get_running_loop()
        self._chance_retry = loop.call_later(delay_s, self._retry_chance)

    def _retry_chance(self) -> None:
        self._chance_retry = None
        self._chance_task = asyncio.ensure_future(self._exclusive(self._settle_chance))

    async def _sync_deadline(self) -> None:
        """Make sure a wake-up is armed no later than the earliest due instant.

        An armed wake-up that is *earlier* than needed is kept: waking early is harmless (the actor
        re-checks and re-arms), and it spares the clock service a re-arm on almost every move. The call
        to the deadlines goes out in the background, off the answer path and outside the match lock:
        every action checks the clock itself, so a wake-up only matters for a match nobody touches.
        """
        due = self.record.due(self.family)
        target = due[0].at_ms if due else None
        armed = self._armed_at
        if target == armed or (target is not None and armed is not None and armed <= target):
            return
        self._armed_at = target
        if self._deadline_task is None or self._deadline_task.done():
            self._deadline_task = asyncio.ensure_future(self._send_deadline())

    async def _send_deadline(self) -> None:
        while self._sent_at != self._armed_at:
            target = self._armed_at
            if target is None:
                await self._deadlines.cancel(self.match_id)
            else:
                await self._deadlines.arm(self.match_id, target)
            self._sent_at = target

    async def deadline_sent(self) -> None:
        """Wait until the wake-up wanted now has been handed to the deadlines (tests, shutdown)."""
        while self._deadline_task is not None and not self._deadline_task.done():
            await asyncio.shield(self._deadline_task)

    async def start(self, down_from_ms: int | None = None) -> None:
        """After creation or recovery: end what fell due while nobody looked, and arm the next wake-up.

        ``down_from_ms``: the shard was down from then until now (a recovery). What fell due before it
        ends the match; otherwise a ``resumed`` event charges the outage to nobody (``model.resumed``).
        Every seat the log says is connected gets a fresh lease of one period: the gateways that hold
        it renew within it.
        """
        await self._exclusive(lambda: self._start(down_from_ms))
        now = self.now_ms()
        for seat, since in enumerate(self.record.disconnected_since):
            if since is None and not self.record.is_over and not self.leases.connected(seat):
                self.leases.renew(seat, RECOVERED, now, self._lease_ms)
        self._arm_lease_timer()

    async def _start(self, down_from_ms: int | None) -> None:
        now = self.now_ms()
        if down_from_ms is not None and not self.record.is_over:
            start = max(down_from_ms, self.record.last_at_ms)
            if start < now:
                overdue = self.record.overdue(self.family, start)
                if overdue is not None:
                    await self._end(*overdue, now)  # it fell due while the shard was up
                else:
                    down_s = (now - start) / 1000
                    payload = {
                        "down_from_ms": start,
                        "down_ms": now - start,
                        "description": f"play resumed: the server was down for {down_s:.1f} s, "
                        "charged to nobody",
                    }
                    event = MatchEvent(self.record.sequence + 1, EventKind.RESUMED, now, payload)
                    await self._commit(step(self.family, self.record, event))
        if not await self._end_if_overdue(now):
            await self._sync_deadline()
        await self._settle_chance()

    # -- reading -----------------------------------------------------------------------------------------

    async def record_at(self, sequence: int) -> MatchRecord:
        """The record as it was right after ``sequence`` (replayed from the log in the store)."""
        if sequence == self.record.sequence:
            return self.record
        if sequence == 1:
            return rebuild(self.family, [self.created_event])
        return rebuild(self.family, (await self.log())[:sequence])

    async def log(self) -> list[MatchEvent]:
        """The whole log as committed (every acknowledged event is in the store before its answer)."""
        return await self._store.load_log(self.match_id)

    def _remember_key(self, event: MatchEvent) -> None:
        if event.idempotency_key:
            self._keys.append(hash(event.idempotency_key))

    async def _logged_with_key(self, key: str) -> MatchEvent | None:
        """The event logged with idempotency key ``key``, if any (from the store: a retry is rare)."""
        if hash(key) not in self._keys:
            return None
        if key == self.created_event.idempotency_key:
            return self.created_event
        return await self._store.event_by_key(self.match_id, key)

    async def watch(self, from_sequence: int) -> AsyncIterator[MatchRecord]:
        """Every record after ``from_sequence``: the missed ones replayed, then each new one; ends with the
        match (after its final update)."""
        watcher = _Watcher()
        async with self._lock:
            if self._closed:
                # Closed (the shard is shutting down, or lost its ownership and reloads every match into
                # a new runtime): a watcher added now would never hear of the match again.
                raise MatchClosed
            current = self.record.sequence
            if from_sequence > current:
                raise InvalidArgument(
                    f"from_sequence {from_sequence} is ahead of the match (at {current})",
                    reason=ErrorReason.ERROR_REASON_SEQUENCE_AHEAD,
                )
            # The log up to now, read under the lock: every event to ``current`` is committed, none after.
            missed = (await self.log())[:current] if from_sequence < current else []
            self._watchers.add(watcher)
        try:
            last = from_sequence
            if from_sequence < current:
                for record in replay(self.family, missed):
                    if record.sequence > from_sequence:
                        last = record.sequence
                        yield record
            if self.record.is_over and last >= self.record.sequence:
                return
            while True:
                item = await watcher.queue.get()
                if item is None:
                    if watcher.overflowed:
                        raise ResourceExhausted(
                            "watcher fell behind; reconnect from your last sequence",
                            reason=ErrorReason.ERROR_REASON_FELL_BEHIND,
                        )
                    raise MatchClosed
                if item.sequence > last:
                    last = item.sequence
                    yield item
                    if item.is_over:
                        return
        finally:
            self._watchers.discard(watcher)

    def close(self) -> None:
        self._closed = True
        self._uncount_live()
        if self._lease_timer is not None:
            self._lease_timer.cancel()
            self._lease_timer = self._lease_timer_at = None
        if self._deadline_task is not None:
            self._deadline_task.cancel()
        if self._chance_retry is not None:
            self._chance_retry.cancel()
            self._chance_retry = None
        if self._chance_task is not None:
            self._chance_task.cancel()
        for watcher in self._watchers:
            watcher.queue.put_nowait(None)


def _log_failure(task: asyncio.Future[Any]) -> None:
    """Log what a background presence task failed with (the next renewal or expiry tries again)."""
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        _log.warning("match.presence_failed", error=f"{type(error).__name__}: {error}")


def _illegal_reason(error: IllegalActionError) -> ErrorReason.ValueType:
    """The catalogue's reason for an action the engine refused."""
    if isinstance(error, NotYourTurnError):
        return ErrorReason.ERROR_REASON_NOT_YOUR_TURN
    if isinstance(error, GameOverError):
        return ErrorReason.ERROR_REASON_MATCH_OVER
    return ErrorReason.ERROR_REASON_ILLEGAL_ACTION
