"""Helpers of the clock service tests: calls over gRPC, the rows as stored, and a store whose commits
wait at a gate (to cancel a call while its write is being committed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import grpc
from prometheus_client import REGISTRY
from skillclassics.clock.v1 import clock_pb2 as pb
from skillclassics.clock.v1 import clock_pb2_grpc
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from libs.persistence import Database
from libs.persistence.group_commit import GroupCommitter
from libs.runtime import RunningServer
from services.clock.scheduler import Scheduler, TimerEntry
from services.clock.service import ClockService
from services.clock.servicer import ClockServicer
from services.clock.store import TimerStore
from tests.support import start_in_process

Stub = clock_pb2_grpc.ClockServiceStub
OWNER = "rules-chess-0"
SERVICE = "skillclassics.clock.v1.ClockService"
T = TypeVar("T")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def start(url: str, env: Mapping[str, str] | None = None) -> RunningServer:
    return await start_in_process("clock", ClockService, url, env)


def parts(running: RunningServer) -> tuple[TimerStore, Scheduler, ClockServicer]:
    """The started clock service's store, scheduler and servicer."""
    service = running.service
    assert isinstance(service, ClockService)
    assert service.store is not None
    assert service.scheduler is not None
    assert service.servicer is not None
    return service.store, service.scheduler, service.servicer


async def arm(stub: Stub, timer_id: str, in_ms: int, payload: bytes = b"", owner: str = OWNER) -> pb.Timer:
    reply = await stub.Arm(
        pb.ArmRequest(owner=owner, timer_id=timer_id, deadline_ms=now_ms() + in_ms, payload=payload)
    )
    timer: pb.Timer = reply.timer
    return timer


async def collect(stub: Stub, count: int, within: float = 3.0, owner: str = OWNER) -> list[pb.Expiration]:
    """Open a watch stream, read ``count`` expirations (or fewer if ``within`` passes), close it."""
    call = stub.WatchExpirations(pb.WatchExpirationsRequest(owner=owner))
    received: list[pb.Expiration] = []
    try:
        async with asyncio.timeout(within):
            while len(received) < count:
                reply = await call.read()
                assert reply is not grpc.aio.EOF
                received.append(reply.expiration)
    except TimeoutError:
        pass
    finally:
        call.cancel()
    return received


async def stored(url: str, shard: str = "0") -> list[TimerEntry]:
    """The shard's timers as the database holds them, read on a connection of the test's own."""
    db = Database(url)
    try:
        return await TimerStore(db, shard).load()
    finally:
        await db.dispose()


async def until(condition: Callable[[], bool], within: float = 10.0) -> None:
    """Wait until ``condition()`` holds; fail after ``within`` seconds. For state with no event to wait
    on (a server-side metric, the scheduler's counters)."""
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


def started(method: str) -> float:
    """How many ``method`` calls this process's servers have started so far."""
    labels = {"grpc_service": SERVICE, "grpc_method": method, "grpc_type": "unary"}
    return REGISTRY.get_sample_value("grpc_server_started_total", labels) or 0.0


def handled(method: str, code: grpc.StatusCode) -> float:
    """How many ``method`` calls this process's servers have finished with ``code`` so far."""
    labels = {"grpc_service": SERVICE, "grpc_method": method, "grpc_type": "unary", "grpc_code": code.name}
    return REGISTRY.get_sample_value("grpc_server_handled_total", labels) or 0.0


class GatedWriter:
    """Stands in for a :class:`TimerStore`'s group committer: each unit of work, once inside its
    transaction, waits until :attr:`gate` is set. While it waits, the write is being committed."""

    def __init__(self, inner: GroupCommitter) -> None:
        self._inner = inner
        self.gate = asyncio.Event()
        self.gate.set()
        self.arrived = asyncio.Event()
        """Set when a unit reaches the gate (clear it before the next one)."""
        self.waiting = 0
        """Units waiting at the gate right now."""

    async def run(self, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        async def gated(conn: AsyncConnection) -> T:
            self.waiting += 1
            self.arrived.set()
            try:
                await self.gate.wait()
            finally:
                self.waiting -= 1
            return await work(conn)

        return await self._inner.run(gated)

    async def run_sync(self, work: Callable[[Connection], T]) -> T:
        """The store's synchronous unit, gated the same way (run on the async connection, so that the
        transaction stays open while the unit waits at the gate)."""

        async def unit(conn: AsyncConnection) -> T:
            return await conn.run_sync(work)

        return await self.run(unit)

    async def close(self) -> None:
        self.gate.set()
        await self._inner.close()

    @classmethod
    def install(cls, store: TimerStore) -> GatedWriter:
        writer = cls(store._writer)
        store._writer = writer  # type: ignore[assignment]  # the same run/close surface
        return writer
