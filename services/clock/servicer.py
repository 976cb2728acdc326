"""The gRPC face of the clock service: validate, persist, schedule, stream.

Every change to a timer (Arm, Cancel, Ack) is one unit: the database write, then the matching update of
the scheduler in memory. A call can be cancelled at any await (the client's deadline passes, it hangs
up) while its write is being committed, and the write commits all the same; so once the unit has the
timer's lock it runs to its end in a task of its own, shielded from the call. Memory then changes if and
only if the write committed: no stored timer that never fires, no forgotten timer that still fires.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator, Callable, Coroutine
from functools import partial
from typing import Any, TypeVar

import grpc
from skillclassics.clock.v1 import clock_pb2, clock_pb2_grpc

from libs.runtime.errors import (
    ErrorReason,
    FailedPrecondition,
    ResourceExhausted,
    Unavailable,
    invalid_field,
)
from services.clock.scheduler import Expiry, Scheduler, SchedulerClosed, TimerEntry, WatcherOverflow
from services.clock.store import TimerStore

MAX_AHEAD_MS = 7 * 24 * 3600 * 1000
"""A deadline may be at most a week ahead."""
MAX_BEHIND_MS = 60_000
"""A deadline up to a minute in the past is accepted (it fires at once); further back is a mistake."""
_LOCK_STRIPES = 256
T = TypeVar("T")


class ClockServicer(clock_pb2_grpc.ClockServiceServicer):
    """Implements ``skillclassics.clock.v1.ClockService``."""

    def __init__(self, store: TimerStore, scheduler: Scheduler) -> None:
        self._store = store
        self._scheduler = scheduler
        # Calls on one timer are applied one at a time, so memory follows the database's order.
        self._locks = [asyncio.Lock() for _ in range(_LOCK_STRIPES)]
        self._units: set[asyncio.Task[object]] = set()

    def serve(self, store: TimerStore, scheduler: Scheduler) -> None:
        """Serve ``store`` and ``scheduler`` from now on: the shard's timers read again from the database
        after the shard was lost and taken again (services/clock/service.py). Units in progress on the
        old ones finish there; their writes are refused (the old store's epoch is over)."""
        self._store = store
        self._scheduler = scheduler

    def _lock(self, owner: str, timer_id: str) -> asyncio.Lock:
        return self._locks[zlib.crc32(f"{owner}\0{timer_id}".encode()) % _LOCK_STRIPES]

    async def _exclusive(self, owner: str, timer_id: str, change: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run ``change`` (a store write, then the scheduler update) holding the timer's lock, as a unit
        the call's cancellation cannot cut in two.

        Waiting for the lock can be cancelled: nothing has happened yet. Once the lock is held,
        ``change`` runs in a task of its own to its end, whatever happens to the call, and the lock is
        released only when it has finished; the call just stops waiting for it.
        """
        lock = self._lock(owner, timer_id)
        await lock.acquire()
        try:
            unit: asyncio.Task[T] = asyncio.get_running_loop().create_task(change())
        except BaseException:
            lock.release()
            raise
        self._units.add(unit)
        unit.add_done_callback(partial(self._unit_done, lock))
        return await asyncio.shield(unit)

    def _unit_done(self, lock: asyncio.Lock, unit: asyncio.Task[object]) -> None:
        lock.release()
        self._units.discard(unit)
        if not unit.cancelled():
            unit.exception()  # retrieved here: the call that started it may have stopped waiting

    async def settled(self) -> None:
        """Wait until every unit in progress has finished (the units of cancelled calls included)."""
        while self._units:
            await asyncio.wait(set(self._units))  # unlike gather, never cancels them

    async def Arm(
        self, request: clock_pb2.ArmRequest, context: grpc.aio.ServicerContext
    ) -> clock_pb2.ArmResponse:
        owner, timer_id = request.owner, request.timer_id
        # The names' pattern and the payload's size are the contract's rules (the interceptor's).
        now_ms = self._scheduler.clock.now_ms()
        if request.deadline_ms < now_ms - MAX_BEHIND_MS:
            raise invalid_field(
                "deadline_ms",
                f"{request.deadline_ms} is {now_ms - request.deadline_ms} ms in the past "
                f"(at most {MAX_BEHIND_MS} ms allowed)",
            )
        if request.deadline_ms > now_ms + MAX_AHEAD_MS:
            raise invalid_field("deadline_ms", f"{request.deadline_ms} is more than 7 days ahead")

        async def change() -> tuple[TimerEntry, bool]:
            replaced = self._scheduler.get(owner, timer_id) is not None
            entry = await self._store.arm(
                owner, timer_id, request.deadline_ms, bytes(request.payload), now_ms
            )
            self._scheduler.arm(entry)
            return entry, replaced

        entry, replaced = await self._exclusive(owner, timer_id, change)
        return clock_pb2.ArmResponse(timer=_timer(entry), replaced=replaced)

    async def Cancel(
        self, request: clock_pb2.CancelRequest, context: grpc.aio.ServicerContext
    ) -> clock_pb2.CancelResponse:
        owner, timer_id = request.owner, request.timer_id

        async def change() -> bool:
            cancelled = await self._store.remove(owner, timer_id)
            self._scheduler.remove(owner, timer_id)
            return cancelled

        return clock_pb2.CancelResponse(cancelled=await self._exclusive(owner, timer_id, change))

    async def Ack(
        self, request: clock_pb2.AckRequest, context: grpc.aio.ServicerContext
    ) -> clock_pb2.AckResponse:
        owner, timer_id = request.owner, request.timer_id

        async def change() -> bool:
            entry = self._scheduler.get(owner, timer_id)
            if entry is None or entry.arm_id != request.arm_id:
                return False
            if entry.fired_at_ms is None:
                raise FailedPrecondition(
                    f"timer {timer_id} of {owner} has not expired yet",
                    reason=ErrorReason.ERROR_REASON_WRONG_STATE,
                )
            await self._store.remove(owner, timer_id, request.arm_id)
            self._scheduler.remove(owner, timer_id, request.arm_id)
            return True

        return clock_pb2.AckResponse(acknowledged=await self._exclusive(owner, timer_id, change))

    async def WatchExpirations(
        self, request: clock_pb2.WatchExpirationsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[clock_pb2.WatchExpirationsResponse]:
        owner = request.owner
        try:
            async for expiry in self._scheduler.watch(owner):
                yield clock_pb2.WatchExpirationsResponse(expiration=_expiration(expiry))
        except WatcherOverflow:
            raise ResourceExhausted(
                "watcher fell too far behind; reconnect to receive what is pending",
                reason=ErrorReason.ERROR_REASON_FELL_BEHIND,
            ) from None
        except SchedulerClosed:
            raise Unavailable(
                "clock service is shutting down; reconnect", reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN
            ) from None

    async def Now(
        self, request: clock_pb2.NowRequest, context: grpc.aio.ServicerContext
    ) -> clock_pb2.NowResponse:
        return clock_pb2.NowResponse(unix_ms=self._scheduler.clock.now_ms())


def _timer(entry: TimerEntry) -> clock_pb2.Timer:
    return clock_pb2.Timer(
        owner=entry.owner,
        timer_id=entry.timer_id,
        arm_id=entry.arm_id,
        deadline_ms=entry.deadline_ms,
        payload=entry.payload,
        armed_at_ms=entry.armed_at_ms,
    )


def _expiration(expiry: Expiry) -> clock_pb2.Expiration:
    return clock_pb2.Expiration(
        timer=_timer(expiry.timer),
        fired_at_ms=expiry.fired_at_ms,
        lateness_ms=expiry.lateness_ms,
        late=expiry.late,
    )
