"""The in-memory side of the clock: a heap of deadlines, one event-loop timer, and the owners' watchers.

There is exactly one ``loop.call_at`` handle, set for the earliest deadline: the scheduler never polls
and never wakes once per timer per millisecond. Arming, cancelling and acknowledging are O(log n)
(cancelled and replaced entries are dropped lazily when they reach the top of the heap, and the heap is
rebuilt when they outnumber the live ones). Time is Unix milliseconds derived from the monotonic clock
at a fixed offset taken when the scheduler starts, so a wall-clock jump cannot fire timers early or
late.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

from libs.runtime.game_metrics import CLOCK_EXPIRY_LATENESS_SECONDS, CLOCK_TIMERS_ARMED, ScrapedSum
from libs.runtime.timesource import ServiceTime

LATE_AFTER_MS = 1_000
"""An expiration delivered more than this after its deadline is marked late."""
COMPACT_ABOVE = 1024
"""The heap is never rebuilt while it holds at most this many entries."""
WATCHER_QUEUE_LIMIT = 100_000
"""A watcher that falls this far behind is disconnected (it reconnects and gets what is pending)."""


@dataclass(slots=True)
class TimerEntry:
    """One armed timer, as stored."""

    owner: str
    timer_id: str
    arm_id: int
    deadline_ms: int
    payload: bytes
    armed_at_ms: int
    fired_at_ms: int | None = None
    """Set once the deadline passed; the entry then waits for its acknowledgement."""


@dataclass(frozen=True, slots=True)
class Expiry:
    """A fired timer, as delivered."""

    timer: TimerEntry
    fired_at_ms: int
    lateness_ms: int
    late: bool


class WatcherOverflow(Exception):
    """The watcher fell too far behind and was disconnected."""


class SchedulerClosed(Exception):
    """The scheduler is shutting down."""


@dataclass(eq=False)
class Watcher:
    """One open WatchExpirations stream: a queue the scheduler fills."""

    owner: str
    queue: asyncio.Queue[Expiry | None] = field(default_factory=asyncio.Queue)
    overflowed: bool = False

    def offer(self, expiry: Expiry) -> None:
        if self.queue.qsize() >= WATCHER_QUEUE_LIMIT:
            self.overflowed = True
            self.queue.put_nowait(None)
            return
        self.queue.put_nowait(expiry)


_ARMED = ScrapedSum(CLOCK_TIMERS_ARMED, lambda scheduler: scheduler.armed_count)
"""``skillclassics_clock_timers_armed``: the timers of every scheduler not closed, read when scraped."""


class Scheduler:
    """Timers by (owner, timer id), the heap of deadlines, and the watchers per owner."""

    def __init__(self, clock: ServiceTime | None = None) -> None:
        self.clock = clock or ServiceTime()
        self._timers: dict[tuple[str, str], TimerEntry] = {}
        self._by_owner: dict[str, dict[str, TimerEntry]] = {}
        self._heap: list[tuple[int, int, str, str]] = []
        self._handle: asyncio.TimerHandle | None = None
        self._handle_deadline_ms: int | None = None
        self._watchers: dict[str, set[Watcher]] = {}
        self._closed = False
        self.fired_total = 0
        _ARMED.add(self)

    # -- timers ----------------------------------------------------------------------------------------

    def load(self, entries: Iterable[TimerEntry]) -> None:
        """Schedule the timers read from the database at start (deadlines already passed fire at once)."""
        for entry in entries:
            self._put(entry)
            if entry.fired_at_ms is None:
                self._heap.append((entry.deadline_ms, entry.arm_id, entry.owner, entry.timer_id))
        heapq.heapify(self._heap)  # once, after all the appends
        self._reschedule()

    def arm(self, entry: TimerEntry) -> None:
        """Schedule ``entry``, replacing any timer with the same owner and id."""
        self._put(entry)
        heapq.heappush(self._heap, (entry.deadline_ms, entry.arm_id, entry.owner, entry.timer_id))
        self._compact_if_stale()  # a re-arm leaves the replaced entry behind
        if self._handle_deadline_ms is None or entry.deadline_ms < self._handle_deadline_ms:
            self._reschedule()

    def get(self, owner: str, timer_id: str) -> TimerEntry | None:
        return self._timers.get((owner, timer_id))

    def remove(self, owner: str, timer_id: str, arm_id: int | None = None) -> TimerEntry | None:
        """Forget a timer (cancelled, or acknowledged when ``arm_id`` matches); returns what was removed."""
        entry = self._timers.get((owner, timer_id))
        if entry is None or (arm_id is not None and entry.arm_id != arm_id):
            return None
        del self._timers[(owner, timer_id)]
        owned = self._by_owner[owner]
        del owned[timer_id]
        if not owned:
            del self._by_owner[owner]
        self._compact_if_stale()
        return entry

    @property
    def armed_count(self) -> int:
        """Timers held: armed, or fired and waiting for their acknowledgement."""
        return len(self._timers)

    @property
    def heap_size(self) -> int:
        """Entries in the heap, stale ones (cancelled, replaced, acknowledged) included."""
        return len(self._heap)

    def _put(self, entry: TimerEntry) -> None:
        """Record ``entry`` as the owner's timer of that id (the heap is the caller's business: an append
        here would break the heap's order for :meth:`arm`, which pushes)."""
        self._timers[(entry.owner, entry.timer_id)] = entry
        self._by_owner.setdefault(entry.owner, {})[entry.timer_id] = entry

    def _compact_if_stale(self) -> None:
        """Rebuild the heap once stale entries outnumber the timers (amortised O(1) per call: after a
        rebuild the heap must double again before the next one)."""
        if len(self._heap) > COMPACT_ABOVE and len(self._heap) > 2 * len(self._timers):
            self._compact()

    def _compact(self) -> None:
        self._heap = [
            (e.deadline_ms, e.arm_id, e.owner, e.timer_id)
            for e in self._timers.values()
            if e.fired_at_ms is None
        ]
        heapq.heapify(self._heap)

    def _is_live(self, item: tuple[int, int, str, str]) -> bool:
        entry = self._timers.get((item[2], item[3]))
        return entry is not None and entry.arm_id == item[1] and entry.fired_at_ms is None

    def _reschedule(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
            self._handle_deadline_ms = None
        while self._heap and not self._is_live(self._heap[0]):
            heapq.heappop(self._heap)
        if not self._heap or self._closed:
            return
        deadline_ms = self._heap[0][0]
        loop = asyncio.get_running_loop()
        self._handle = loop.call_at(self.clock.loop_time_for(deadline_ms), self._fire_due)
        self._handle_deadline_ms = deadline_ms

    def _fire_due(self) -> None:
        self._handle = None
        self._handle_deadline_ms = None
        now_ms = self.clock.now_ms()
        while self._heap and self._heap[0][0] <= now_ms:
            item = heapq.heappop(self._heap)
            if not self._is_live(item):
                continue
            entry = self._timers[(item[2], item[3])]
            entry.fired_at_ms = now_ms
            self.fired_total += 1
            CLOCK_EXPIRY_LATENESS_SECONDS.observe(max(0, now_ms - entry.deadline_ms) / 1000)
            self._deliver(self._expiry(entry))
        self._reschedule()

    def _expiry(self, entry: TimerEntry) -> Expiry:
        fired_at_ms = entry.fired_at_ms if entry.fired_at_ms is not None else self.clock.now_ms()
        lateness = max(0, fired_at_ms - entry.deadline_ms)
        late = lateness > LATE_AFTER_MS or entry.deadline_ms < self.clock.started_ms
        return Expiry(entry, fired_at_ms, lateness, late)

    # -- watchers --------------------------------------------------------------------------------------

    def _deliver(self, expiry: Expiry) -> None:
        for watcher in self._watchers.get(expiry.timer.owner, ()):
            watcher.offer(expiry)

    async def watch(self, owner: str) -> AsyncIterator[Expiry]:
        """Every pending expiration of ``owner`` (oldest deadline first), then each new one as it fires."""
        if self._closed:
            raise SchedulerClosed
        watcher = Watcher(owner)
        self._watchers.setdefault(owner, set()).add(watcher)
        try:
            pending = sorted(
                (e for e in self._by_owner.get(owner, {}).values() if e.fired_at_ms is not None),
                key=lambda e: (e.deadline_ms, e.arm_id),
            )
            for entry in pending:
                watcher.offer(self._expiry(entry))
            while True:
                expiry = await watcher.queue.get()
                if expiry is None:
                    if watcher.overflowed:
                        raise WatcherOverflow
                    raise SchedulerClosed
                current = self._timers.get((owner, expiry.timer.timer_id))
                if current is not None and current.arm_id == expiry.timer.arm_id:
                    yield expiry  # skip expirations cancelled or acknowledged while queued
        finally:
            watchers = self._watchers.get(owner)
            if watchers is not None:
                watchers.discard(watcher)
                if not watchers:
                    del self._watchers[owner]

    def close(self) -> None:
        """Stop firing and end every watch stream."""
        self._closed = True
        _ARMED.discard(self)
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.queue.put_nowait(None)
