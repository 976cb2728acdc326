"""The clock scheduler's heap: timers armed in any order fire in deadline order, on time; re-arms and
cancellations leave stale entries behind, and the heap is rebuilt before they outnumber the timers."""

from __future__ import annotations

import asyncio
import heapq
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from libs.runtime.timesource import ServiceTime
from services.clock.scheduler import COMPACT_ABOVE, Scheduler, TimerEntry

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


async def test_rearming_one_timer_200000_times_keeps_the_heap_small() -> None:
    """A rules service re-arms ``<match>/wake`` on every move: the replaced entries must not pile up."""
    scheduler = Scheduler(ServiceTime())
    largest = 0
    for arm_id in range(1, 200_001):
        scheduler.arm(TimerEntry("o", "wake", arm_id, FAR + arm_id, b"", 0))
        largest = max(largest, scheduler.heap_size)
    assert scheduler.armed_count == 1
    assert largest <= COMPACT_ABOVE + 1
    # The last arming is the one that fires, once.
    scheduler.arm(TimerEntry("o", "wake", 200_001, scheduler.clock.now_ms() + 20, b"last", 0))
    async with asyncio.timeout(5):
        async for expiry in scheduler.watch("o"):
            assert (expiry.timer.arm_id, expiry.timer.payload) == (200_001, b"last")
            break
    assert scheduler.fired_total == 1


async def test_rearming_many_timers_bounds_stale_entries_and_fires_each_last_arming() -> None:
    time = ServiceTime()
    scheduler = Scheduler(time)
    rng = random.Random(11)
    timers, rounds = 2_000, 10
    now = time.now_ms()
    last: dict[str, tuple[int, int]] = {}  # timer id -> (deadline, arm id) of its last arming
    arm_id = 0
    for _ in range(rounds):
        for n in rng.sample(range(timers), timers):
            arm_id += 1
            deadline = now + rng.randrange(300, 800)
            scheduler.arm(TimerEntry("o", f"t{n}", arm_id, deadline, b"", 0))
            last[f"t{n}"] = (deadline, arm_id)
            assert scheduler.heap_size <= max(COMPACT_ABOVE, 2 * scheduler.armed_count) + 1
    assert scheduler.armed_count == timers
    fired: list[tuple[int, int]] = []
    async with asyncio.timeout(10):
        async for expiry in scheduler.watch("o"):
            fired.append((expiry.timer.deadline_ms, expiry.timer.arm_id))
            if len(fired) == timers:
                break
    assert sorted(fired) == sorted(last.values())  # each timer once, at its last arming
    assert [deadline for deadline, _ in fired] == sorted(deadline for deadline, _ in fired)
    assert scheduler.fired_total == timers


async def test_cancelling_rebuilds_the_heap_too() -> None:
    scheduler = Scheduler(ServiceTime())
    for n in range(10_000):
        scheduler.arm(_entry(n, FAR + n))
    for n in range(9_900):
        scheduler.remove("o", f"t{n}")
    assert scheduler.armed_count == 100
    assert scheduler.heap_size <= COMPACT_ABOVE + 1
