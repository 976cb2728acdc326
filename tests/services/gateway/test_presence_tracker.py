"""The gateway's presence tracker against fake shards: leases renewed per shard in one call, opens and
last closes sent at once, retries after a failure, and per-seat SetPresence for a shard without leases."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from skillclassics.rules.v1 import rules_pb2

from libs.runtime.config import ConfigError
from services.gateway.presence import PresenceTracker, presence_settings


class Refused(grpc.aio.AioRpcError):  # type: ignore[misc]
    def __init__(self, code: grpc.StatusCode) -> None:
        super().__init__(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=code.name)


class FakeShard:
    def __init__(self, *, leases: bool = True) -> None:
        self.leases = leases
        self.renewals: list[rules_pb2.RenewPresenceRequest] = []
        self.reports: list[tuple[str, int, bool]] = []
        self.failures = 0

    async def RenewPresence(self, request: rules_pb2.RenewPresenceRequest, **_: float) -> Any:
        if not self.leases:
            raise Refused(grpc.StatusCode.UNIMPLEMENTED)
        if self.failures:
            self.failures -= 1
            raise Refused(grpc.StatusCode.UNAVAILABLE)
        self.renewals.append(request)
        return rules_pb2.RenewPresenceResponse(lease_ms=request.lease_ms)

    async def SetPresence(self, request: rules_pb2.SetPresenceRequest, **_: float) -> Any:
        self.reports.append((request.match_id, request.seat, request.connected))
        return rules_pb2.SetPresenceResponse(sequence=1)

    def seats(self, which: str) -> list[set[tuple[str, int]]]:
        return [{(s.match_id, s.seat) for s in getattr(r, which)} for r in self.renewals]


async def eventually(check: Callable[[], bool], what: str, within_s: float = 5) -> None:
    deadline = time.monotonic() + within_s
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


def tracker(shards: dict[str, FakeShard], renew_ms: int = 100) -> PresenceTracker:
    return PresenceTracker(
        lambda match_id: shards[match_id.split(".")[1]],  # type: ignore[arg-type,return-value]
        1.0,
        renew_ms=renew_ms,
        lease_ms=3 * renew_ms,
        instance="gw-1",
    )


async def test_each_shard_gets_its_seats_renewed_in_one_call_and_changes_at_once() -> None:
    shards = {"0": FakeShard(), "1": FakeShard()}
    presence = tracker(shards)
    presence.opened("chess.0.a", 0)
    presence.opened("chess.0.b", 1)
    presence.opened("chess.1.c", 0)
    presence.opened("chess.0.a", 0)  # a second stream of the same seat
    await eventually(
        lambda: {("chess.0.a", 0), ("chess.0.b", 1)} <= set().union(*shards["0"].seats("held")), "no leases"
    )
    await eventually(lambda: len(shards["0"].renewals) >= 4, "no renewals")
    assert all(r.gateway_instance == "gw-1" and r.lease_ms == 300 for r in shards["0"].renewals)
    assert {("chess.0.a", 0), ("chess.0.b", 1)} in shards["0"].seats("held")  # both in one call
    assert all(("chess.1.c", 0) not in seats for seats in shards["0"].seats("held"))
    assert ("chess.1.c", 0) in set().union(*shards["1"].seats("held"))

    presence.closed("chess.0.a", 0)  # one of its two streams: still held
    await asyncio.sleep(0.25)
    assert all(not seats for seats in shards["0"].seats("released"))
    assert {("chess.0.a", 0), ("chess.0.b", 1)} == shards["0"].seats("held")[-1]
    presence.renew_ms = 2_000  # from the next renewal on: a release cannot be waiting for one
    await asyncio.sleep(0.25)
    renewals = len(shards["0"].renewals)
    presence.closed("chess.0.a", 0)  # its last: released at once, and no longer renewed
    await eventually(lambda: any(shards["0"].seats("released")), "the release was not sent at once")
    assert shards["0"].renewals[renewals:] == [
        rules_pb2.RenewPresenceRequest(
            gateway_instance="gw-1",
            released=[rules_pb2.PresenceSeat(match_id="chess.0.a", seat=0)],
            lease_ms=300,
        )
    ]
    presence.renew_ms = 100
    await eventually(lambda: len(shards["0"].renewals) > renewals + 2, "no more renewals", 8)
    assert shards["0"].seats("held")[-1] == {("chess.0.b", 1)}
    await presence.close()


async def test_a_failed_report_is_sent_again_and_a_shard_without_leases_gets_set_presence() -> None:
    shards = {"0": FakeShard(), "1": FakeShard(leases=False)}
    shards["0"].failures = 2
    presence = tracker(shards)
    presence.opened("chess.0.a", 0)
    presence.opened("chess.1.b", 1)
    await eventually(lambda: any(shards["0"].seats("held")), "the lease was not retried", 3)
    await eventually(lambda: shards["1"].reports == [("chess.1.b", 1, True)], "no SetPresence")
    await asyncio.sleep(0.3)
    assert shards["1"].reports == [("chess.1.b", 1, True)]  # renewals do not repeat it
    presence.closed("chess.1.b", 1)
    await eventually(lambda: shards["1"].reports[-1] == ("chess.1.b", 1, False), "no disconnect")
    # The shard is upgraded: the next renewal is a lease.
    presence.opened("chess.1.b", 0)
    shards["1"].leases = True
    await eventually(lambda: ("chess.1.b", 0) in set().union(*shards["1"].seats("held")), "no lease")
    await presence.close()


def test_the_lease_must_outlast_two_renewals() -> None:
    assert presence_settings({}) == (2_000, 6_000)
    assert presence_settings({"GATEWAY_PRESENCE_RENEW_MS": "300", "GATEWAY_PRESENCE_LEASE_MS": "1000"}) == (
        300,
        1_000,
    )
    with pytest.raises(ConfigError, match="at least twice"):
        presence_settings({"GATEWAY_PRESENCE_RENEW_MS": "4000"})
