"""The service's time: Unix milliseconds read through the monotonic clock.

Services (never engines) read time here. The offset between the wall clock and the monotonic clock is
taken once, when the process starts, so a wall-clock step (NTP, an operator) cannot make a clock jump
inside a running service, while instants stay Unix milliseconds that mean the same across processes
and restarts (the clock service's deadlines, the match log's timestamps).
"""

from __future__ import annotations

import time


class ServiceTime:
    """Unix milliseconds from the monotonic clock, and the event-loop instant of a Unix deadline."""

    def __init__(self) -> None:
        self._wall_at_start_ms = time.time_ns() // 1_000_000
        self._monotonic_at_start_ns = time.monotonic_ns()
        self.started_ms = self._wall_at_start_ms
        """When this time source was made, Unix ms."""

    def now_ms(self) -> int:
        return self._wall_at_start_ms + (time.monotonic_ns() - self._monotonic_at_start_ns) // 1_000_000

    def loop_time_for(self, deadline_ms: int) -> float:
        """The ``loop.time()`` (monotonic seconds) just after ``deadline_ms`` begins.

        The 50 µs margin keeps float rounding from waking the loop a hair before the millisecond
        ticks over, which would find nothing due and go round again.
        """
        offset_ns = (deadline_ms - self._wall_at_start_ms) * 1_000_000 + 50_000
        return (self._monotonic_at_start_ns + offset_ns) / 1e9
