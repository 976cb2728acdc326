"""The clock service's metrics over real gRPC: timers held now, and how late each fired. Values are
compared before and after: the registry is shared by every test of the process."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from skillclassics.clock.v1 import clock_pb2 as pb

from tests.services.clock.support import OWNER, Stub, arm, collect, until


def armed() -> float:
    return REGISTRY.get_sample_value("skillclassics_clock_timers_armed", {}) or 0.0


def fired() -> tuple[float, float]:
    count = REGISTRY.get_sample_value("skillclassics_clock_expiry_lateness_seconds_count", {}) or 0.0
    late = REGISTRY.get_sample_value("skillclassics_clock_expiry_lateness_seconds_sum", {}) or 0.0
    return count, late


async def test_timers_armed_and_expiry_lateness(stub: Stub) -> None:
    armed_before = armed()
    count_before, late_before = fired()
    await arm(stub, "soon", 50)
    await arm(stub, "later", 60_000)
    await arm(stub, "cancelled", 60_000)
    assert armed() == armed_before + 3
    await stub.Cancel(pb.CancelRequest(owner=OWNER, timer_id="cancelled"))
    assert armed() == armed_before + 2
    [expiry] = await collect(stub, 1)
    await until(lambda: fired()[0] == count_before + 1)
    lateness_s = fired()[1] - late_before
    assert lateness_s == pytest.approx(expiry.lateness_ms / 1000)
    assert 0 <= lateness_s < 1
    assert armed() == armed_before + 2  # fired, held until acknowledged
    await stub.Ack(pb.AckRequest(owner=OWNER, timer_id="soon", arm_id=expiry.timer.arm_id))
    assert armed() == armed_before + 1
    await stub.Cancel(pb.CancelRequest(owner=OWNER, timer_id="later"))
    assert armed() == armed_before
