"""Per-player token buckets: how many calls and stream opens a player may make.

Each player has a bucket per kind that holds up to ``burst`` tokens and refills at ``rate`` per second;
a call takes one token, and a call that finds the bucket empty is ``RESOURCE_EXHAUSTED``. Buckets are
per gateway process (a player spread over replicas gets each replica's allowance). Full buckets are
forgotten from time to time, so memory follows the active players.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from libs.runtime.errors import ResourceExhausted

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
                f"retry in {wait_ms} ms"
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
