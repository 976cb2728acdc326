"""Wake-ups for matches: the clock service when one is configured, the local event loop otherwise.

A wake-up is only a prompt: the match actor re-checks its own clock and deadlines whenever it wakes
(and on every action), so an early, late, duplicate or lost wake-up can delay an automatic end but never
decide one wrongly. Each match has at most one timer, ``<match id>/wake``, armed at its earliest due
instant. With the clock service the timer is durable there and is delivered at least once; when the
clock service cannot be reached the wake-up falls back to the local loop, and the rules service re-arms
everything from its own log after a restart anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import grpc
from skillclassics.clock.v1 import clock_pb2, clock_pb2_grpc

from libs.runtime.log import get_logger
from libs.runtime.timesource import ServiceTime
from libs.runtime.tls import TransportSecurity

OnWake = Callable[[str], Coroutine[Any, Any, None]]
_log = get_logger(__name__)
_SUFFIX = "/wake"


class LocalDeadlines:
    """Wake-ups on this process's event loop (tests, and the fallback)."""

    def __init__(self, time: ServiceTime) -> None:
        self._time = time
        self._handles: dict[str, asyncio.TimerHandle] = {}
        self._on_wake: OnWake | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, on_wake: OnWake) -> None:
        self._on_wake = on_wake

    async def arm(self, match_id: str, deadline_ms: int) -> None:
        self._cancel_local(match_id)
        loop = asyncio.get_running_loop()
        self._handles[match_id] = loop.call_at(self._time.loop_time_for(deadline_ms), self._fire, match_id)

    async def cancel(self, match_id: str) -> None:
        self._cancel_local(match_id)

    def _cancel_local(self, match_id: str) -> None:
        handle = self._handles.pop(match_id, None)
        if handle is not None:
            handle.cancel()

    def _fire(self, match_id: str) -> None:
        self._handles.pop(match_id, None)
        if self._on_wake is not None:
            task = asyncio.get_running_loop().create_task(self._on_wake(match_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()


class ClockServiceDeadlines:
    """Wake-ups armed on the clock service, delivered over its expiration stream and acknowledged."""

    def __init__(
        self,
        address: str,
        owner: str,
        time: ServiceTime,
        transport: TransportSecurity,
        call_timeout: float = 2.0,
    ) -> None:
        self._channel = transport.channel(address, "clock")
        self._stub = clock_pb2_grpc.ClockServiceStub(self._channel)
        self._owner = owner
        self._timeout = call_timeout
        self._fallback = LocalDeadlines(time)
        self._on_wake: OnWake | None = None
        self._watcher: asyncio.Task[None] | None = None

    async def start(self, on_wake: OnWake) -> None:
        self._on_wake = on_wake
        await self._fallback.start(on_wake)
        self._watcher = asyncio.get_running_loop().create_task(self._watch_forever())

    async def arm(self, match_id: str, deadline_ms: int) -> None:
        request = clock_pb2.ArmRequest(
            owner=self._owner, timer_id=match_id + _SUFFIX, deadline_ms=deadline_ms
        )
        try:
            await self._stub.Arm(request, timeout=self._timeout)
            await self._fallback.cancel(match_id)
        except grpc.aio.AioRpcError as error:
            _log.warning("deadline.clock_unavailable", match_id=match_id, code=error.code().name)
            await self._fallback.arm(match_id, deadline_ms)

    async def cancel(self, match_id: str) -> None:
        await self._fallback.cancel(match_id)
        try:
            await self._stub.Cancel(
                clock_pb2.CancelRequest(owner=self._owner, timer_id=match_id + _SUFFIX), timeout=self._timeout
            )
        except grpc.aio.AioRpcError as error:
            _log.warning("deadline.cancel_failed", match_id=match_id, code=error.code().name)

    async def _watch_forever(self) -> None:
        backoff = 0.05
        while True:
            try:
                call = self._stub.WatchExpirations(clock_pb2.WatchExpirationsRequest(owner=self._owner))
                async for reply in call:
                    backoff = 0.05
                    timer = reply.expiration.timer
                    if self._on_wake is not None and timer.timer_id.endswith(_SUFFIX):
                        await self._on_wake(timer.timer_id.removesuffix(_SUFFIX))
                    await self._stub.Ack(
                        clock_pb2.AckRequest(owner=self._owner, timer_id=timer.timer_id, arm_id=timer.arm_id),
                        timeout=self._timeout,
                    )
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the stream broke (clock restarting): reconnect with backoff
                _log.info("deadline.watch_reconnecting", error=type(error).__name__)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
        await self._fallback.close()
        await self._channel.close()


Deadlines = LocalDeadlines | ClockServiceDeadlines
