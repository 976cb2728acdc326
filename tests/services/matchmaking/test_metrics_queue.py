"""Matchmaking's metrics over real gRPC: the quick-match queue's depth per family and how long a paired
player had waited (libs/runtime/game_metrics.py). Values are compared before and after: the registry is
shared by every test of the process."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from prometheus_client import REGISTRY
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb

from tests.services.matchmaking.test_matchmaking_service import (
    Platform,
    next_event,
    queue_request,
    running_platform,
)

CHESS = {"family": "chess"}


def value(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def depth(family: str = "chess") -> float:
    return value("skillclassics_queue_depth", {"family": family})


async def until(condition: Callable[[], bool], within: float = 10.0) -> None:
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110 - a metric has no event to wait on
            await asyncio.sleep(0.01)


async def test_queue_depth_and_pairing_wait(database_url: str) -> None:
    base = depth()  # other matchmakers of this process (none, unless a test left one running)
    async with running_platform(database_url) as platform:
        await _queue_and_pair(platform, base)
        await platform.mm.EnterQueue(queue_request("leaves-with-the-service", minutes=10))
        assert depth() == base + 1
    assert depth() == base  # a closed matchmaker holds nobody


async def _queue_and_pair(platform: Platform, base: float) -> None:
    mm = platform.mm
    gin_base = depth("gin")
    paired_before = value("skillclassics_pairing_wait_seconds_count", CHESS)
    waited_before = value("skillclassics_pairing_wait_seconds_sum", CHESS)
    lobby = {p: mm.WatchLobby(pb.WatchLobbyRequest(player_id=p)) for p in ("m1", "m2")}
    for stream in lobby.values():
        await next_event(stream, "subscribed")
    await mm.EnterQueue(queue_request("lonely", minutes=10))  # nobody with that clock: stays
    await mm.EnterQueue(queue_request("m1", minutes=5))
    assert depth() == base + 2
    assert depth("gin") == gin_base
    await asyncio.sleep(0.3)  # m1 waits a while before m2 comes
    await mm.EnterQueue(queue_request("m2", minutes=5))
    for stream in lobby.values():
        await next_event(stream, "match_ready")
    await until(lambda: value("skillclassics_pairing_wait_seconds_count", CHESS) == paired_before + 2)
    waited = value("skillclassics_pairing_wait_seconds_sum", CHESS) - waited_before
    assert 0.3 <= waited < 10  # m1's wait (at least 0.3 s) and m2's (a moment)
    assert depth() == base + 1  # the lonely player
    assert (await mm.LeaveQueue(pb.LeaveQueueRequest(player_id="lonely"))).left
    assert depth() == base
    for stream in lobby.values():
        stream.cancel()
