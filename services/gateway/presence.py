"""Presence: a seated player is connected while they have a ``WatchMatch`` stream open.

The gateway counts open streams per (match, seat) and reports the changes to the rules shard with
``SetPresence``: ``connected=True`` when the first stream opens, ``connected=False`` when the last one
closes. Reports for one seat are sent one at a time by a single task that always sends the latest
state, so a quick close-and-reopen can never leave the rules service believing the wrong thing.
Counting is per gateway process; the rules service owns the disconnect rules.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.runtime.log import get_logger

_log = get_logger(__name__)
_Key = tuple[str, int]


class PresenceTracker:
    """Counts open match streams per seat and reports connects and disconnects to the rules shard."""

    def __init__(self, stub_for: Callable[[str], rules_pb2_grpc.RulesServiceStub], timeout_s: float) -> None:
        self._stub_for = stub_for
        self._timeout_s = timeout_s
        self._open: dict[_Key, int] = {}
        self._reported: set[_Key] = set()
        self._settling: dict[_Key, asyncio.Task[None]] = {}

    def opened(self, match_id: str, seat: int) -> None:
        key = (match_id, seat)
        self._open[key] = self._open.get(key, 0) + 1
        self._settle(key)

    def closed(self, match_id: str, seat: int) -> None:
        key = (match_id, seat)
        left = self._open.get(key, 0) - 1
        if left > 0:
            self._open[key] = left
        else:
            self._open.pop(key, None)
        self._settle(key)

    def streams(self, match_id: str, seat: int) -> int:
        """How many streams of this seat are open here."""
        return self._open.get((match_id, seat), 0)

    def _settle(self, key: _Key) -> None:
        if key not in self._settling:
            self._settling[key] = asyncio.get_running_loop().create_task(self._report(key))

    async def _report(self, key: _Key) -> None:
        match_id, seat = key
        try:
            while True:
                connected = key in self._open
                if connected == (key in self._reported):
                    return
                try:
                    await self._stub_for(match_id).SetPresence(
                        rules_pb2.SetPresenceRequest(match_id=match_id, seat=seat, connected=connected),
                        timeout=self._timeout_s,
                    )
                except grpc.aio.AioRpcError as error:
                    _log.warning(
                        "presence.report_failed",
                        match_id=match_id,
                        seat=seat,
                        connected=connected,
                        code=error.code().name,
                        reason=error.details(),
                    )
                    return
                if connected:
                    self._reported.add(key)
                else:
                    self._reported.discard(key)
        finally:
            self._settling.pop(key, None)

    async def close(self, within_s: float = 2.0) -> None:
        """Let the reports in flight finish (for at most ``within_s``)."""
        pending = list(self._settling.values())
        if pending:
            await asyncio.wait(pending, timeout=within_s)
