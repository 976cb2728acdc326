"""The clock service over real gRPC on localhost, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from skillclassics.clock.v1 import clock_pb2 as pb

from libs.runtime import RunningServer
from tests.services.clock.support import OWNER, Stub, arm, collect, now_ms, parts, stored
from tests.services.clock.support import start as _start
from tests.support import ServiceProcess, backend_channel


async def test_timers_fire_in_deadline_order_with_their_payloads(stub: Stub) -> None:
    # Deadlines from one instant, far enough ahead that every Arm lands first, however slow a commit is.
    base = now_ms() + 1_500
    delays = {"t3": 240, "t1": 80, "t5": 400, "t2": 160, "t4": 320}
    for timer_id, delay in delays.items():
        deadline, payload = base + delay, timer_id.encode()
        await stub.Arm(pb.ArmRequest(owner=OWNER, timer_id=timer_id, deadline_ms=deadline, payload=payload))
    assert now_ms() < base + 80, "arming took longer than the head start"
    fired = await collect(stub, 5, within=10)
    assert [e.timer.timer_id for e in fired] == ["t1", "t2", "t3", "t4", "t5"]
    assert [e.timer.payload for e in fired] == [b"t1", b"t2", b"t3", b"t4", b"t5"]
    for expiration in fired:
        assert expiration.fired_at_ms >= expiration.timer.deadline_ms
        assert expiration.lateness_ms == expiration.fired_at_ms - expiration.timer.deadline_ms
        assert expiration.lateness_ms < 200  # generous: precision is measured by `make bench`
        assert not expiration.late


async def test_cancel_and_rearm(stub: Stub) -> None:
    await arm(stub, "cancelled", 100)
    assert (await stub.Cancel(pb.CancelRequest(owner=OWNER, timer_id="cancelled"))).cancelled
    assert not (await stub.Cancel(pb.CancelRequest(owner=OWNER, timer_id="cancelled"))).cancelled
    first = await arm(stub, "moved", 1_500, b"old")
    second_reply = await stub.Arm(
        pb.ArmRequest(owner=OWNER, timer_id="moved", deadline_ms=now_ms() + 300, payload=b"new")
    )
    assert second_reply.replaced
    assert second_reply.timer.arm_id > first.arm_id
    # Watch until well past the replaced deadline: only the new arming fires.
    fired = await collect(stub, 2, within=(first.deadline_ms - now_ms()) / 1000 + 0.5)
    assert [(e.timer.timer_id, e.timer.payload) for e in fired] == [("moved", b"new")]
    assert fired[0].timer.arm_id == second_reply.timer.arm_id


async def test_unacknowledged_expirations_are_redelivered_until_acked(stub: Stub) -> None:
    await arm(stub, "a", 20)
    await arm(stub, "b", 40)
    first = await collect(stub, 2)
    assert [e.timer.timer_id for e in first] == ["a", "b"]
    again = await collect(stub, 2)
    assert [(e.timer.timer_id, e.timer.arm_id) for e in again] == [
        (e.timer.timer_id, e.timer.arm_id) for e in first
    ]
    ack = await stub.Ack(pb.AckRequest(owner=OWNER, timer_id="a", arm_id=first[0].timer.arm_id))
    assert ack.acknowledged
    assert not (
        await stub.Ack(pb.AckRequest(owner=OWNER, timer_id="a", arm_id=first[0].timer.arm_id))
    ).acknowledged
    assert [e.timer.timer_id for e in await collect(stub, 2, within=0.5)] == ["b"]


async def test_watchers_see_only_their_owner_and_every_watcher_gets_each_expiry(
    server: RunningServer, stub: Stub
) -> None:
    async with backend_channel(server.address, "rules-go-0") as channel:  # another shard, for its own
        one = asyncio.ensure_future(collect(stub, 1))
        two = asyncio.ensure_future(collect(stub, 1))
        other = asyncio.ensure_future(collect(Stub(channel), 1, within=0.8, owner="rules-go-0"))
        await asyncio.sleep(0.1)
        await arm(stub, "shared", 50)
        assert [e.timer.timer_id for e in await one] == ["shared"]
        assert [e.timer.timer_id for e in await two] == ["shared"]
        assert await other == []


async def test_ack_before_expiry_is_refused(stub: Stub) -> None:
    timer = await arm(stub, "later", 60_000)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Ack(pb.AckRequest(owner=OWNER, timer_id="later", arm_id=timer.arm_id))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "not expired" in (caught.value.details() or "")
    assert not (
        await stub.Ack(pb.AckRequest(owner=OWNER, timer_id="later", arm_id=timer.arm_id + 999))
    ).acknowledged


@pytest.mark.parametrize(
    ("owner", "timer_id", "offset_ms", "payload", "code", "reason"),
    [
        # A shard arms only its own timers: an owner that is not the caller (empty, too long) is refused
        # by the authorisation check before the service sees it.
        ("", "t", 1000, b"", "PERMISSION_DENIED", "its own timers"),
        (OWNER, "", 1000, b"", "INVALID_ARGUMENT", "timer_id"),
        (OWNER, "has space", 1000, b"", "INVALID_ARGUMENT", "timer_id"),
        ("o" * 129, "t", 1000, b"", "PERMISSION_DENIED", "its own timers"),
        (OWNER, "t", 1000, b"x" * 4097, "INVALID_ARGUMENT", "payload"),
        (OWNER, "t", -3_600_000, b"", "INVALID_ARGUMENT", "in the past"),
        (OWNER, "t", 8 * 24 * 3600 * 1000, b"", "INVALID_ARGUMENT", "7 days"),
    ],
)
async def test_bad_arms_are_refused_and_store_nothing(
    stub: Stub,
    database_url: str,
    owner: str,
    timer_id: str,
    offset_ms: int,
    payload: bytes,
    code: str,
    reason: str,
) -> None:
    request = pb.ArmRequest(owner=owner, timer_id=timer_id, deadline_ms=now_ms() + offset_ms, payload=payload)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Arm(request)
    assert caught.value.code() == grpc.StatusCode[code]
    assert reason in (caught.value.details() or "")
    assert await stored(database_url) == []


@pytest.mark.parametrize(
    ("offset_ms", "payload", "reason"),
    [
        (1000, b"x" * 4097, "payload"),
        (-3_600_000, b"", "in the past"),
        (8 * 24 * 3600 * 1000, b"", "7 days"),
    ],
)
async def test_a_refused_rearm_leaves_the_armed_timer_as_it_was(
    server: RunningServer, stub: Stub, database_url: str, offset_ms: int, payload: bytes, reason: str
) -> None:
    _, scheduler, _ = parts(server)
    kept = await arm(stub, "t", 60_000, b"keep")
    request = pb.ArmRequest(owner=OWNER, timer_id="t", deadline_ms=now_ms() + offset_ms, payload=payload)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Arm(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason in (caught.value.details() or "")
    [row] = await stored(database_url)
    assert (row.arm_id, row.deadline_ms, row.payload) == (kept.arm_id, kept.deadline_ms, b"keep")
    in_memory = scheduler.get(OWNER, "t")
    assert in_memory is not None
    assert (in_memory.arm_id, in_memory.deadline_ms, in_memory.payload) == (
        kept.arm_id,
        kept.deadline_ms,
        b"keep",
    )


@pytest.mark.parametrize(
    ("owner", "timer_id", "code", "reason"),
    [
        ("", "t", "PERMISSION_DENIED", "may only use its own timers"),  # refused by the authorisation check
        (OWNER, "", "INVALID_ARGUMENT", "timer_id must be 1-128 characters"),
    ],
)
async def test_cancel_and_ack_refuse_an_empty_owner_or_id(
    stub: Stub, database_url: str, owner: str, timer_id: str, code: str, reason: str
) -> None:
    await arm(stub, "t", 60_000)
    calls = [
        stub.Cancel(pb.CancelRequest(owner=owner, timer_id=timer_id)),
        stub.Ack(pb.AckRequest(owner=owner, timer_id=timer_id, arm_id=1)),
    ]
    for call in calls:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode[code]
        assert reason in (caught.value.details() or "")
    assert [row.timer_id for row in await stored(database_url)] == ["t"]


async def test_watching_refuses_an_empty_owner(stub: Stub) -> None:
    # No shard is called "": the authorisation check refuses the watch before the service sees it.
    call = stub.WatchExpirations(pb.WatchExpirationsRequest(owner=""))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call.read()
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "may only use its own timers" in (caught.value.details() or "")


async def test_cancelling_a_fired_unacknowledged_timer_removes_it_for_good(
    stub: Stub, database_url: str
) -> None:
    """The proto: "Cancel removes a timer, armed or expired-but-unacknowledged". It is not delivered
    again, and its late Ack finds nothing to acknowledge."""
    await arm(stub, "fired", 10, b"f")
    [pending] = await collect(stub, 1)
    assert [e.timer.timer_id for e in await collect(stub, 1)] == ["fired"]  # pending: redelivered
    assert (await stub.Cancel(pb.CancelRequest(owner=OWNER, timer_id="fired"))).cancelled
    assert await stored(database_url) == []
    assert await collect(stub, 1, within=0.5) == []
    ack = await stub.Ack(pb.AckRequest(owner=OWNER, timer_id="fired", arm_id=pending.timer.arm_id))
    assert not ack.acknowledged


async def test_a_deadline_just_past_fires_at_once(stub: Stub) -> None:
    await arm(stub, "overdue", -500)
    fired = await collect(stub, 1, within=1.0)
    assert [e.timer.timer_id for e in fired] == ["overdue"]
    assert fired[0].lateness_ms >= 500


async def test_now_is_the_service_time(stub: Stub) -> None:
    before = now_ms()
    reply = await stub.Now(pb.NowRequest())
    assert before - 5 <= reply.unix_ms <= now_ms() + 5


async def test_draining_ends_watch_streams_with_unavailable(database_url: str) -> None:
    running = await _start(database_url)
    async with backend_channel(running.address, OWNER) as channel:
        call = Stub(channel).WatchExpirations(pb.WatchExpirationsRequest(owner=OWNER))
        await asyncio.sleep(0.1)
        stopping = asyncio.ensure_future(running.stop(grace=5))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call.read()
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        await asyncio.wait_for(stopping, 3)


async def test_a_write_after_the_writer_closed_is_unavailable_not_internal(
    server: RunningServer, stub: Stub, database_url: str
) -> None:
    """Shutting down closes the store's writer; a change that comes after it is refused UNAVAILABLE with
    a reason (the caller retries on another instance), not INTERNAL, and changes nothing."""
    store, scheduler, _ = parts(server)
    await arm(stub, "kept", 60_000)
    await arm(stub, "fired", 10)
    [fired] = await collect(stub, 1)
    await store.close()
    calls = [
        stub.Arm(pb.ArmRequest(owner=OWNER, timer_id="late", deadline_ms=now_ms() + 60_000)),
        stub.Cancel(pb.CancelRequest(owner=OWNER, timer_id="kept")),
        stub.Ack(pb.AckRequest(owner=OWNER, timer_id="fired", arm_id=fired.timer.arm_id)),
    ]
    for call in calls:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, caught.value.details()
        assert "shutting down" in (caught.value.details() or "")
        assert "retry" in (caught.value.details() or "")
    assert sorted(row.timer_id for row in await stored(database_url)) == ["fired", "kept"]
    assert scheduler.get(OWNER, "late") is None
    assert scheduler.get(OWNER, "kept") is not None
    assert scheduler.get(OWNER, "fired") is not None


async def test_a_restart_fires_every_timer_it_had_late_ones_marked(database_url: str) -> None:
    first = await _start(database_url)
    async with backend_channel(first.address, OWNER) as channel:
        stub = Stub(channel)
        await arm(stub, "acked", 10)
        [done] = await collect(stub, 1)
        await stub.Ack(pb.AckRequest(owner=OWNER, timer_id="acked", arm_id=done.timer.arm_id))
        await arm(stub, "during-downtime", 150)
        await arm(stub, "after-restart", 2_000)
    await first.stop(grace=0.5)
    await asyncio.sleep(0.3)
    second = await _start(database_url)
    try:
        async with backend_channel(second.address, OWNER) as channel:
            fired = await collect(Stub(channel), 2, within=4.0)
        assert [e.timer.timer_id for e in fired] == ["during-downtime", "after-restart"]
        assert fired[0].late
        assert not fired[1].late
    finally:
        await second.stop(grace=0.5)


async def test_kill_9_loses_no_timer_and_acked_ones_stay_acked(tmp_path: Path, database_url: str) -> None:
    await _kill_9(tmp_path, database_url)


async def _kill_9(tmp_path: Path, database_url: str) -> None:
    async with ServiceProcess("services.clock", {"DATABASE_URL": database_url}) as service:
        async with backend_channel(service.address, OWNER) as channel:
            stub = Stub(channel)
            for i in range(5):
                await arm(stub, f"early-{i}", 10 + i)
            early = await collect(stub, 5)
            for expiration in early[:3]:
                timer = expiration.timer
                await stub.Ack(pb.AckRequest(owner=OWNER, timer_id=timer.timer_id, arm_id=timer.arm_id))
            for i in range(10):
                await arm(stub, f"late-{i}", 400 + 10 * i)
        service.kill()
        await asyncio.sleep(0.6)
        await service.start()
        async with backend_channel(service.address, OWNER) as channel:
            fired = await collect(Stub(channel), 12, within=4.0)
    names = [e.timer.timer_id for e in fired]
    assert sorted(names) == sorted([e.timer.timer_id for e in early[3:]] + [f"late-{i}" for i in range(10)])
    assert len(set(names)) == len(names)
    assert all(e.late for e in fired if e.timer.timer_id.startswith("late-"))
