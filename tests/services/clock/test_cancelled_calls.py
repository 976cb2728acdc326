"""Calls cancelled while their write is being committed (the client's deadline passes, or it hangs up).

The write commits all the same, so the scheduler must follow it: an Arm cut off mid-commit still fires
(once), a re-arm still replaces the timer in memory, a Cancel or an Ack still forgets it. The store's
commits wait at a gate (:class:`GatedWriter`) so that the call is cut off exactly mid-commit: the gate
opens only after the server has finished the call as cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal

import grpc
import pytest
from skillclassics.clock.v1 import clock_pb2 as pb

from libs.runtime import RunningServer
from tests.services.clock.support import (
    OWNER,
    GatedWriter,
    Stub,
    arm,
    collect,
    handled,
    now_ms,
    parts,
    started,
    stored,
    until,
)

How = Literal["deadline", "hang-up"]
CALL_DEADLINE_S = 1.0
"""The client deadline of a call cut off by its deadline: long enough to reach the gate on a busy machine."""


@pytest.fixture
def gate(server: RunningServer) -> GatedWriter:
    store, _, _ = parts(server)
    return GatedWriter.install(store)


async def cut_mid_commit(
    gate: GatedWriter, method: str, send: Callable[[float | None], Any], how: How
) -> None:
    """Send a call (``send(timeout)``) while commits wait at the gate, and end it once its write is in the
    transaction: by its deadline, or by hanging up. Returns with the write still held at the gate and the
    call finished on the server as CANCELLED."""
    cancelled_before = handled(method, grpc.StatusCode.CANCELLED)
    gate.gate.clear()
    gate.arrived.clear()
    call = send(CALL_DEADLINE_S if how == "deadline" else None)
    async with asyncio.timeout(10):
        await gate.arrived.wait()
    if how == "hang-up":
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    else:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    await until(lambda: handled(method, grpc.StatusCode.CANCELLED) > cancelled_before)
    assert gate.waiting == 1  # the call is over; its write is still being committed


async def release(server: RunningServer, gate: GatedWriter) -> None:
    """Let the held commit finish and wait until the server has applied what it committed."""
    _, _, servicer = parts(server)
    gate.gate.set()
    async with asyncio.timeout(10):
        await servicer.settled()


async def past(deadline_ms: int) -> None:
    """Sleep until ``deadline_ms`` (Unix ms) has passed, with room for the timer to have fired."""
    await asyncio.sleep(max(0, deadline_ms - now_ms()) / 1000 + 0.2)


@pytest.mark.parametrize("how", ["deadline", "hang-up"])
async def test_an_arm_cut_off_mid_commit_is_scheduled_and_fires_once(
    server: RunningServer, stub: Stub, gate: GatedWriter, database_url: str, how: How
) -> None:
    _, scheduler, _ = parts(server)
    deadline = now_ms() + 300
    request = pb.ArmRequest(owner=OWNER, timer_id="t", deadline_ms=deadline, payload=b"p")
    await cut_mid_commit(gate, "Arm", lambda timeout: stub.Arm(request, timeout=timeout), how)
    assert scheduler.get(OWNER, "t") is None  # not scheduled before the commit

    await release(server, gate)
    [row] = await stored(database_url)
    assert (row.timer_id, row.deadline_ms, row.payload) == ("t", deadline, b"p")
    in_memory = scheduler.get(OWNER, "t")
    assert in_memory is not None
    assert in_memory.arm_id == row.arm_id

    [fired] = await collect(stub, 1, within=10)
    assert (fired.timer.arm_id, fired.timer.payload) == (row.arm_id, b"p")
    assert (await stub.Ack(pb.AckRequest(owner=OWNER, timer_id="t", arm_id=row.arm_id))).acknowledged
    assert await stored(database_url) == []
    assert await collect(stub, 1, within=0.5) == []
    assert scheduler.fired_total == 1


async def test_a_rearm_cut_off_mid_commit_replaces_the_timer_in_memory_too(
    server: RunningServer, stub: Stub, gate: GatedWriter, database_url: str
) -> None:
    _, scheduler, _ = parts(server)
    old = await arm(stub, "t", 60_000, b"old")
    deadline = now_ms() + 300
    request = pb.ArmRequest(owner=OWNER, timer_id="t", deadline_ms=deadline, payload=b"new")
    await cut_mid_commit(gate, "Arm", lambda timeout: stub.Arm(request, timeout=timeout), "deadline")
    held = scheduler.get(OWNER, "t")
    assert held is not None
    assert held.arm_id == old.arm_id  # the old arming stands until the new one is committed

    await release(server, gate)
    [row] = await stored(database_url)
    assert (row.deadline_ms, row.payload) == (deadline, b"new")
    assert row.arm_id > old.arm_id
    in_memory = scheduler.get(OWNER, "t")
    assert in_memory is not None
    assert in_memory.arm_id == row.arm_id

    [fired] = await collect(stub, 1, within=10)
    assert (fired.timer.arm_id, fired.timer.payload) == (row.arm_id, b"new")
    assert (await stub.Ack(pb.AckRequest(owner=OWNER, timer_id="t", arm_id=row.arm_id))).acknowledged
    assert scheduler.armed_count == 0  # the old arming is gone as well: it can never fire
    assert await stored(database_url) == []
    assert scheduler.fired_total == 1


async def test_a_cancel_cut_off_mid_commit_forgets_the_timer(
    server: RunningServer, stub: Stub, gate: GatedWriter, database_url: str
) -> None:
    _, scheduler, _ = parts(server)
    timer = await arm(stub, "t", 1_000)
    request = pb.CancelRequest(owner=OWNER, timer_id="t")
    await cut_mid_commit(gate, "Cancel", lambda timeout: stub.Cancel(request, timeout=timeout), "hang-up")
    assert scheduler.get(OWNER, "t") is not None  # still armed until the delete is committed

    await release(server, gate)
    assert await stored(database_url) == []
    assert scheduler.get(OWNER, "t") is None
    await past(timer.deadline_ms)
    assert await collect(stub, 1, within=0.5) == []


async def test_an_ack_cut_off_mid_commit_is_not_redelivered(
    server: RunningServer, stub: Stub, gate: GatedWriter, database_url: str
) -> None:
    _, scheduler, _ = parts(server)
    await arm(stub, "t", 10)
    [fired] = await collect(stub, 1)
    request = pb.AckRequest(owner=OWNER, timer_id="t", arm_id=fired.timer.arm_id)
    await cut_mid_commit(gate, "Ack", lambda timeout: stub.Ack(request, timeout=timeout), "deadline")

    await release(server, gate)
    assert await stored(database_url) == []
    assert scheduler.get(OWNER, "t") is None
    assert await collect(stub, 1, within=0.5) == []


async def test_a_call_cancelled_while_waiting_for_the_timer_changes_nothing(
    server: RunningServer, stub: Stub, gate: GatedWriter, database_url: str
) -> None:
    """Only a call whose write has begun is carried through; one still queued behind another call on the
    same timer is dropped when it is cancelled."""
    _, scheduler, _ = parts(server)
    deadline = now_ms() + 60_000
    gate.gate.clear()
    first = stub.Arm(pb.ArmRequest(owner=OWNER, timer_id="t", deadline_ms=deadline, payload=b"first"))
    async with asyncio.timeout(10):
        await gate.arrived.wait()
    arms_started, cancelled_before = started("Arm"), handled("Arm", grpc.StatusCode.CANCELLED)
    second = stub.Arm(pb.ArmRequest(owner=OWNER, timer_id="t", deadline_ms=deadline + 1, payload=b"second"))
    await until(lambda: started("Arm") > arms_started)  # it waits for the first one's lock
    second.cancel()
    await until(lambda: handled("Arm", grpc.StatusCode.CANCELLED) > cancelled_before)

    await release(server, gate)
    reply = await first
    assert not reply.replaced
    [row] = await stored(database_url)
    assert (row.arm_id, row.payload) == (reply.timer.arm_id, b"first")
    in_memory = scheduler.get(OWNER, "t")
    assert in_memory is not None
    assert (in_memory.arm_id, in_memory.payload) == (row.arm_id, b"first")
