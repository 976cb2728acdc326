"""The gateway's limits: per-player token buckets, and the gateway-wide capacity (:class:`Admission`).

Per-player token buckets say how many calls and stream opens a player may make.

Each player has a bucket per kind that holds up to ``burst`` tokens and refills at ``rate`` per second;
a call takes one token, and a call that finds the bucket empty is ``RESOURCE_EXHAUSTED``, with the wait
until its next token as retry guidance (``retry-after-ms`` and a ``google.rpc.RetryInfo``, and "retry in
N ms" in its reason). Buckets are per gateway process (a player spread over replicas gets each
replica's allowance). Full buckets are forgotten from time to time, so memory follows the active players.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import NoReturn

from prometheus_client import Counter, Gauge

from libs.runtime.errors import ErrorReason, ResourceExhausted

PRUNE_EVERY = 4096
"""A sweep for full buckets runs after this many new buckets."""


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class TokenBuckets:
    """One token bucket per player for one kind of call."""

    def __init__(
        self, what: str, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a rate limit needs a positive rate and a burst of at least 1")
        self.what = what
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._new = 0

    def take(self, player: str) -> None:
        """Take one token for ``player``, or raise :class:`ResourceExhausted`."""
        now = self._clock()
        bucket = self._buckets.get(player)
        if bucket is None:
            bucket = self._buckets[player] = _Bucket(float(self.burst), now)
            self._new += 1
            if self._new >= PRUNE_EVERY:
                self._prune(now)
        else:
            bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) * self.rate)
            bucket.at = now
        if bucket.tokens < 1.0:
            wait_ms = int((1.0 - bucket.tokens) / self.rate * 1000) + 1
            raise ResourceExhausted(
                f"too many {self.what}: at most {self.rate:g}/s (bursts of {self.burst}); "
                f"retry in {wait_ms} ms",
                retry_after_ms=wait_ms,
                reason=ErrorReason.ERROR_REASON_RATE_LIMITED,
            )
        bucket.tokens -= 1.0

    def _prune(self, now: float) -> None:
        self._new = 0
        full = [
            player
            for player, bucket in self._buckets.items()
            if bucket.tokens + (now - bucket.at) * self.rate >= self.burst
        ]
        for player in full:
            del self._buckets[player]

    def __len__(self) -> int:
        return len(self._buckets)


class Priority(IntEnum):
    """What a call is for, when the gateway has to choose."""

    PLAY = 0
    """A match in progress (actions, its state and record, its stream) or a call that sheds work
    (leaving a table or the queue): admitted up to the full capacity."""
    NEW_WORK = 1
    """Everything that starts or looks for new work (tables, the queue, lobby reads): refused first."""


NEW_WORK_SHARE = 0.75
"""New work is admitted only while fewer than this share of the capacity is in use, so that at capacity
the matches already being played keep a quarter of it to themselves."""

SHED_RETRY_AFTER_MS = {Priority.PLAY: 50, Priority.NEW_WORK: 200}
"""The wait a refusal at capacity asks for, by priority (in its reason and as retry guidance)."""

SHED = Counter(
    "skillclassics_gateway_shed_total",
    "Calls and stream opens the gateway refused because it was at capacity, by priority.",
    ["priority", "kind"],
)
IN_FLIGHT = Gauge(
    "skillclassics_gateway_in_flight", "Unary calls and open streams being served now.", ["kind"]
)


class Admission:
    """The gateway-wide capacity: unary calls in flight and streams open, with play before new work.

    Past capacity a call is refused at once with ``RESOURCE_EXHAUSTED`` (never queued), so the gateway
    stays responsive and its memory bounded however hard it is pushed; the latency of the calls it
    admits stays that of a gateway at capacity, not of an ever longer queue.
    """

    def __init__(self, max_calls: int, max_streams: int) -> None:
        if max_calls < 1 or max_streams < 1:
            raise ValueError("capacities must be at least 1")
        self._calls = _Pool("calls", max_calls)
        self._streams = _Pool("streams", max_streams)

    @property
    def max_calls(self) -> int:
        return self._calls.capacity

    @property
    def calls(self) -> int:
        """Unary calls being served now."""
        return self._calls.used

    @property
    def streams(self) -> int:
        """Streams open now."""
        return self._streams.used

    def call(self, priority: Priority) -> contextlib.AbstractContextManager[None]:
        return self._calls.hold(priority)

    def stream(self, priority: Priority) -> contextlib.AbstractContextManager[None]:
        return self._streams.hold(priority)


class _Pool:
    """One kind of capacity (calls or streams), with its limits and gauge worked out once."""

    def __init__(self, kind: str, capacity: int) -> None:
        self.kind = kind
        self.capacity = capacity
        self.new_work_limit = max(1, int(capacity * NEW_WORK_SHARE))
        self.used = 0
        self._gauge = IN_FLIGHT.labels(kind)

    @contextlib.contextmanager
    def hold(self, priority: Priority) -> Iterator[None]:
        limit = self.capacity if priority is Priority.PLAY else self.new_work_limit
        if self.used >= limit:
            _refuse(self.kind, self.used, self.capacity, priority)
        self.used += 1
        self._gauge.inc()
        try:
            yield
        finally:
            self.used -= 1
            self._gauge.dec()


def _refuse(kind: str, used: int, capacity: int, priority: Priority) -> NoReturn:
    SHED.labels(priority.name.lower(), kind).inc()
    wait_ms = SHED_RETRY_AFTER_MS[priority]
    if priority is Priority.PLAY:
        reason = f"the gateway is at capacity ({capacity} {kind}); retry in {wait_ms} ms"
    else:
        reason = (
            f"the gateway is near capacity ({used} of {capacity} {kind}): matches in progress come "
            f"first, new work is refused for now; retry in {wait_ms} ms"
        )
    raise ResourceExhausted(reason, retry_after_ms=wait_ms, reason=ErrorReason.ERROR_REASON_OVERLOADED)
