"""The clock's shard ownership (``clock/N``) after a database restart, and under another owner's epoch.

As for the rules shards (tests/services/rules_chess/test_shard_ownership.py): a clock process whose lock
vanished with a PostgreSQL restart stops taking writes and reports NOT_SERVING, takes its shard again once
the database is back (reading every timer again) and serves; a second process for the same shard is
then refused; SIGTERM still exits 0. On SQLite another owner is simulated by moving the epoch on.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from skillclassics.clock.v1 import clock_pb2 as pb
from sqlalchemy import select, update

from libs.persistence import Database
from libs.persistence.schema import shard_owners
from tests.services.clock.support import OWNER, Stub, arm, collect, start, stored
from tests.support import ROOT, ServiceProcess, backend_channel, wait_for_health
from tools.pgcluster import PrivatePostgres

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.mark.postgres
async def test_a_clock_that_lost_its_lock_stops_takes_its_shard_again_and_a_second_one_is_refused(
    private_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    url = private_postgres.create_database("clock")
    service = ServiceProcess("services.clock", {"DATABASE_URL": url})
    await service.start()
    try:
        async with backend_channel(service.address, OWNER) as channel:
            stub = Stub(channel)
            await arm(stub, "before", 60_000)
            await asyncio.to_thread(private_postgres.stop, "fast")
            try:
                await wait_for_health(service.health_address, NOT_SERVING, within=5)
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await arm(stub, "during", 60_000)
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            finally:
                await asyncio.to_thread(private_postgres.start)
            await wait_for_health(service.health_address, SERVING, within=20)
            await arm(stub, "after", 60_000)
        assert sorted(timer.timer_id for timer in await stored(url)) == ["after", "before"]
        second = ServiceProcess("services.clock", {"DATABASE_URL": url})
        log = tmp_path / "second.log"
        with log.open("ab") as sink:
            process = subprocess.Popen(  # noqa: ASYNC220 - a fork-exec, not a wait
                [sys.executable, "-m", second.module], cwd=ROOT, env=second.env, stderr=sink
            )
        assert await asyncio.to_thread(process.wait, 30) == 1
        assert "another process owns clock/0" in log.read_text()
    finally:
        assert service.kill(signal.SIGTERM) == 0


async def test_a_clock_whose_epoch_moved_on_refuses_writes_and_serves_its_timers_again(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'clock.db'}"
    # A long heartbeat: the write, not a renewal, finds the epoch moved on (it marks the shard lost itself).
    running = await start(url, {"SHARD_HEARTBEAT_MS": "60000"})
    db = Database(url)
    try:
        async with backend_channel(running.address, OWNER) as channel:
            stub, health = Stub(channel), health_pb2_grpc.HealthStub(channel)
            await arm(stub, "before", 1_500)
            async with db.begin() as conn:
                await conn.execute(update(shard_owners).values(epoch=shard_owners.c.epoch + 1))
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await arm(stub, "refused", 500)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "shard clock/0 lost its ownership; retry" in (refused.value.details() or "")
            assert (await health.Check(health_pb2.HealthCheckRequest())).status == NOT_SERVING
            async with asyncio.timeout(10):
                while True:
                    if (await health.Check(health_pb2.HealthCheckRequest())).status == SERVING:
                        break
                    await asyncio.sleep(0.05)
            await arm(stub, "after", 100)
            fired = await collect(stub, 2, within=5)
            assert sorted(e.timer.timer_id for e in fired) == ["after", "before"]  # read again, on time
            for expiration in fired:
                timer = expiration.timer
                await stub.Ack(pb.AckRequest(owner=OWNER, timer_id=timer.timer_id, arm_id=timer.arm_id))
        assert await stored(url) == []
        async with db.connect() as conn:
            assert (await conn.execute(select(shard_owners.c.epoch))).scalar_one() == 3
    finally:
        await db.dispose()
        await running.stop(grace=0.5)
