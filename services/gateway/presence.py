"""Presence as leases: this gateway process vouches, shard by shard, for the seats it has streams of.

A seated player is connected while they have a ``WatchMatch`` or ``Play`` stream open on some gateway
process. This process counts its own open streams per (match, seat) and, for each rules shard, keeps a
*lease* on every such seat (docs/match-runtime.md, "Presence is a lease"):

- every ``renew_ms`` (``GATEWAY_PRESENCE_RENEW_MS``, default 2000) one ``RenewPresence`` call per shard
  renews the leases of all its seats held here, each for ``lease_ms`` (``GATEWAY_PRESENCE_LEASE_MS``,
  default 6000);
- a seat's first stream here is sent at once (``held``), and so is the close of its last one
  (``released``), so that a normal connect or disconnect is seen at once.

The process names itself with a random instance id chosen when it starts, so the shard keeps one lease
per gateway process: a seat streamed through two gateways stays connected while either holds it, and a
gateway that crashes (and can report nothing) simply stops renewing; its leases run out within
``lease_ms`` and the shard logs the seat disconnected as of its last renewal. Calls to one shard go one
at a time, each carrying the latest state, so a quick close-and-reopen can never leave the shard
believing the wrong thing. A shard that does not serve ``RenewPresence`` yet (``UNIMPLEMENTED``: an
older version during a rolling upgrade) gets the per-seat ``SetPresence`` reports instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.match.ids import MatchId, MatchIdError
from libs.runtime.config import ConfigError, env_int
from libs.runtime.log import get_logger

_log = get_logger(__name__)
_Key = tuple[str, int]

DEFAULT_RENEW_MS = 2_000
DEFAULT_LEASE_MS = 6_000
BATCH = 5_000
"""Seats per ``RenewPresence`` call (a renewal of more seats goes in several calls)."""
RETRY_S = 0.5
"""How soon a report that failed (the shard down or unreachable) is tried again."""


def presence_settings(env: Mapping[str, str]) -> tuple[int, int]:
    """``GATEWAY_PRESENCE_RENEW_MS`` and ``GATEWAY_PRESENCE_LEASE_MS``; the lease must outlast two
    renewals (a renewal lost or late must not drop a seat)."""
    renew_ms = env_int(env, "GATEWAY_PRESENCE_RENEW_MS", DEFAULT_RENEW_MS, minimum=100)
    lease_ms = env_int(env, "GATEWAY_PRESENCE_LEASE_MS", DEFAULT_LEASE_MS, minimum=1_000)
    if lease_ms < 2 * renew_ms or lease_ms > 60_000:
        raise ConfigError(
            f"GATEWAY_PRESENCE_LEASE_MS ({lease_ms}) must be at least twice GATEWAY_PRESENCE_RENEW_MS "
            f"({renew_ms}) and at most 60000"
        )
    return renew_ms, lease_ms


@dataclass(eq=False)
class _Shard:
    """What this process has to tell one rules shard."""

    any_match: str
    """A match id of the shard (to route the call)."""
    held: set[_Key] = field(default_factory=set)
    new: set[_Key] = field(default_factory=set)
    """Seats that opened since the last report."""
    released: set[_Key] = field(default_factory=set)
    """Seats whose last stream closed since the last report."""
    kick: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    legacy: bool = False
    """The shard did not serve RenewPresence last time: per-seat SetPresence reports (changes only)."""
    legacy_connected: set[_Key] = field(default_factory=set)

    @property
    def pending(self) -> bool:
        return bool(self.new or self.released)


class PresenceTracker:
    """Counts open match streams per seat and holds a presence lease on each seat on its rules shard."""

    def __init__(
        self,
        stub_for: Callable[[str], rules_pb2_grpc.RulesServiceStub],
        timeout_s: float,
        *,
        renew_ms: int = DEFAULT_RENEW_MS,
        lease_ms: int = DEFAULT_LEASE_MS,
        instance: str | None = None,
    ) -> None:
        self._stub_for = stub_for
        self._timeout_s = timeout_s
        self.renew_ms = renew_ms
        self.lease_ms = lease_ms
        self.instance = instance or uuid.uuid4().hex
        """This gateway process, as the shards know its leases (a new one at every start)."""
        self._open: dict[_Key, int] = {}
        self._shards: dict[str, _Shard] = {}
        self._closing = False

    def opened(self, match_id: str, seat: int) -> None:
        key = (match_id, seat)
        count = self._open.get(key, 0)
        self._open[key] = count + 1
        if count == 0:
            shard = self._shard(match_id)
            shard.held.add(key)
            shard.released.discard(key)
            shard.new.add(key)
            shard.kick.set()

    def closed(self, match_id: str, seat: int) -> None:
        key = (match_id, seat)
        left = self._open.get(key, 0) - 1
        if left > 0:
            self._open[key] = left
            return
        self._open.pop(key, None)
        shard = self._shard(match_id)
        shard.held.discard(key)
        shard.new.discard(key)
        shard.released.add(key)
        shard.kick.set()

    def streams(self, match_id: str, seat: int) -> int:
        """How many streams of this seat are open here."""
        return self._open.get((match_id, seat), 0)

    def _shard(self, match_id: str) -> _Shard:
        try:
            parsed = MatchId.parse(match_id)
            name = f"{parsed.family}.{parsed.shard}"
        except MatchIdError:
            name = match_id
        shard = self._shards.get(name)
        if shard is None:
            shard = self._shards[name] = _Shard(match_id)
        if shard.task is None or shard.task.done():
            shard.task = asyncio.get_running_loop().create_task(self._keep(name, shard))
        return shard

    # -- reporting -----------------------------------------------------------------------------------------

    async def _keep(self, name: str, shard: _Shard) -> None:
        """Report ``shard``'s changes as they come and renew all its leases every ``renew_ms``."""
        loop = asyncio.get_running_loop()
        next_renewal = loop.time()
        while True:
            if self._closing and not shard.pending:
                return
            wait_s = max(0.0, next_renewal - loop.time())
            if not shard.pending and wait_s > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(shard.kick.wait(), wait_s)
            shard.kick.clear()
            renewal = loop.time() >= next_renewal
            if renewal:
                next_renewal = loop.time() + self.renew_ms / 1000
            if not shard.pending and not (renewal and shard.held):
                continue
            held = sorted(shard.held if renewal else shard.new)
            released = sorted(shard.released)
            shard.new.clear()
            shard.released.clear()
            try:
                await self._send(shard, held, released)
            except grpc.aio.AioRpcError as error:
                _log.warning(
                    "presence.report_failed", shard=name, code=error.code().name, reason=error.details()
                )
                # Try again soon with the latest state: what is still open, and what is still closed.
                shard.new.update(k for k in held if k in shard.held)
                shard.released.update(k for k in released if k not in shard.held)
                if self._closing:
                    return
                await asyncio.sleep(RETRY_S)

    async def _send(self, shard: _Shard, held: list[_Key], released: list[_Key]) -> None:
        stub = self._stub_for(shard.any_match)
        # Leases first, every time: a shard upgraded (restarted) meanwhile serves them from then on, and
        # it expects renewals (the lease it gives a seat on recovery runs out without them).
        try:
            for first in range(0, max(len(held), len(released), 1), BATCH):
                await stub.RenewPresence(
                    rules_pb2.RenewPresenceRequest(
                        gateway_instance=self.instance,
                        held=[_seat(k) for k in held[first : first + BATCH]],
                        released=[_seat(k) for k in released[first : first + BATCH]],
                        lease_ms=self.lease_ms,
                    ),
                    timeout=self._timeout_s,
                )
            shard.legacy = False
            shard.legacy_connected.clear()
            return
        except grpc.aio.AioRpcError as error:
            if error.code() is not grpc.StatusCode.UNIMPLEMENTED:
                raise
        if not shard.legacy:
            _log.warning("presence.legacy_shard", match_id=shard.any_match)
            shard.legacy = True
        held = sorted(shard.held)  # per seat, only what the shard was not told yet
        for match_id, seat in released:
            if (match_id, seat) in shard.legacy_connected:
                request = rules_pb2.SetPresenceRequest(match_id=match_id, seat=seat, connected=False)
                await stub.SetPresence(request, timeout=self._timeout_s)
                shard.legacy_connected.discard((match_id, seat))
        for match_id, seat in held:
            if (match_id, seat) not in shard.legacy_connected:
                request = rules_pb2.SetPresenceRequest(match_id=match_id, seat=seat, connected=True)
                await stub.SetPresence(request, timeout=self._timeout_s)
                shard.legacy_connected.add((match_id, seat))

    async def close(self, within_s: float = 2.0) -> None:
        """Send what is pending (the releases of the streams that ended, for at most ``within_s``), then
        stop renewing: the shards see the releases at once, and anything left runs out with its lease."""
        self._closing = True
        tasks = [s.task for s in self._shards.values() if s.task is not None and not s.task.done()]
        for shard in self._shards.values():
            shard.kick.set()
        if tasks:
            await asyncio.wait(tasks, timeout=within_s)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _seat(key: _Key) -> rules_pb2.PresenceSeat:
    return rules_pb2.PresenceSeat(match_id=key[0], seat=key[1])
