"""The clock scheduler's heap: timers armed in any order fire in deadline order, on time."""

from __future__ import annotations

import asyncio
import heapq
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from libs.runtime.timesource import ServiceTime
from services.clock.scheduler import Scheduler, TimerEntry

FAR = 10**13
"""An instant centuries ahead, in Unix ms."""


def _entry(n: int, deadline_ms: int, owner: str = "o") -> TimerEntry:
    return TimerEntry(owner, f"t{n}", n + 1, deadline_ms, b"", 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=300))
def test_arming_keeps_the_heap_ordered(deadlines: list[int]) -> None:
    async def arm_all() -> Scheduler:
        scheduler = Scheduler(ServiceTime())
        for n, deadline in enumerate(deadlines):
            scheduler.arm(_entry(n, FAR + deadline))  # far ahead: nothing fires while we look
        return scheduler

    loop = asyncio.new_event_loop()
    try:
        scheduler = loop.run_until_complete(arm_all())
    finally:
        loop.close()
    heap = list(scheduler._heap)
    assert len(heap) == len(deadlines)  # one entry per arm, not two
    assert all(heap[i] <= heap[c] for i in range(len(heap)) for c in (2 * i + 1, 2 * i + 2) if c < len(heap))
    popped = [heapq.heappop(heap)[0] for _ in range(len(heap))]
    assert popped == sorted(FAR + d for d in deadlines)


async def test_mixed_deadlines_fire_in_order_and_on_time() -> None:
    time = ServiceTime()
    scheduler = Scheduler(time)
    rng = random.Random(7)
    now = time.now_ms()
    delays = [rng.randrange(50, 400) for _ in range(300)]
    for n, delay in enumerate(delays):
        scheduler.arm(_entry(n, now + delay))
    fired: list[tuple[int, int]] = []
    async with asyncio.timeout(5):
        async for expiry in scheduler.watch("o"):
            fired.append((expiry.timer.deadline_ms, expiry.fired_at_ms))
            if len(fired) == len(delays):
                break
    assert [deadline for deadline, _ in fired] == sorted(now + d for d in delays)
    assert max(at - deadline for deadline, at in fired) < 100  # none waits behind a later one
