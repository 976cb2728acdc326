"""Presence as leases: a seat is connected while some gateway process holds a live lease on it.

Each gateway process (a random instance id chosen when it starts) renews, every few seconds and in one
``RenewPresence`` call per shard, a lease on every seat that has an open stream on it, and releases a
seat at once when its last stream there closes. The shard keeps the leases in memory, per match, seat
and gateway instance (:class:`SeatLeases`, pure: every method takes the instant). When a seat's last
lease is released or expires, the seat is disconnected, and the instant of the disconnection logged
with it (``since_ms``) is the last instant a gateway vouched for it: the release instant, or the last
renewal of a lease that expired. So a gateway that crashed (and can report nothing) costs its players
nothing and their opponents at most one lease period of waiting for the forfeit to be *noticed*, never
a later forfeit: it falls due at the last renewal + the forfeit time (docs/match-runtime.md).

``SetPresence`` (the older, per-call report) is the lease of :data:`DIRECT` that never expires:
connected takes it, disconnected releases it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from libs.runtime.config import env_int

DEFAULT_LEASE_MS = 6_000
"""How long a lease lasts from its renewal when the gateway does not say (``RULES_PRESENCE_LEASE_MS``);
also the fresh lease every seat the log says is connected gets when a shard recovers."""
MIN_LEASE_MS = 1_000
MAX_LEASE_MS = 60_000
DIRECT = ""
"""The holder of ``SetPresence``'s leases (which never expire)."""
RECOVERED = "(recovered)"
"""The holder of the lease a seat connected in the log gets when the shard starts: the gateways that
hold it renew within one period."""
MAX_INSTANCE = 64


def lease_ms_from_env(env: Mapping[str, str]) -> int:
    """``RULES_PRESENCE_LEASE_MS``: the shard's default lease (for gateways that name none, and after a
    restart), 1-60 s."""
    return min(env_int(env, "RULES_PRESENCE_LEASE_MS", DEFAULT_LEASE_MS, minimum=MIN_LEASE_MS), MAX_LEASE_MS)


def clamp_lease_ms(asked: int, default: int) -> int:
    """The lease a renewal gets: what the gateway asked for within 1-60 s (0: the shard's default)."""
    if asked <= 0:
        return default
    return max(MIN_LEASE_MS, min(MAX_LEASE_MS, asked))


@dataclass(slots=True)
class Lease:
    renewed_at_ms: int
    expires_at_ms: int | None
    """``None``: never (a ``SetPresence`` report)."""


@dataclass(slots=True)
class SeatLeases:
    """One match's presence leases: seat -> holder (gateway instance) -> lease."""

    seats: int
    leases: dict[int, dict[str, Lease]] = field(default_factory=dict)
    last_seen_ms: dict[int, int] = field(default_factory=dict)
    """Per seat, the latest instant a lease that has ended vouched for it (since its leases last ran out)."""

    def renew(self, seat: int, holder: str, now_ms: int, lease_ms: int | None) -> None:
        """``holder`` vouches for ``seat`` at ``now_ms`` for ``lease_ms`` more (``None``: until released)."""
        held = self.leases.setdefault(seat, {})
        if not held:
            self.last_seen_ms.pop(seat, None)  # a new connection: what ended before is history
        held[holder] = Lease(now_ms, None if lease_ms is None else now_ms + lease_ms)

    def release(self, seat: int, holder: str, now_ms: int) -> None:
        """``holder`` no longer holds ``seat`` (its last stream there closed at ``now_ms``)."""
        held = self.leases.get(seat)
        if held is None or held.pop(holder, None) is None:
            return
        self._ended(seat, now_ms)

    def expire(self, now_ms: int) -> None:
        """Drop every lease that has run out by ``now_ms`` (a lease is live before its expiry instant)."""
        for seat, held in list(self.leases.items()):
            for holder, lease in list(held.items()):
                if lease.expires_at_ms is not None and lease.expires_at_ms <= now_ms:
                    del held[holder]
                    self._ended(seat, lease.renewed_at_ms)

    def _ended(self, seat: int, seen_ms: int) -> None:
        self.last_seen_ms[seat] = max(self.last_seen_ms.get(seat, seen_ms), seen_ms)
        if not self.leases.get(seat):
            self.leases.pop(seat, None)

    def connected(self, seat: int) -> bool:
        return bool(self.leases.get(seat))

    def holders(self, seat: int) -> set[str]:
        return set(self.leases.get(seat, {}))

    def since_ms(self, seat: int, now_ms: int) -> int:
        """The disconnection instant of a seat without a lease: the last instant one vouched for it."""
        return min(self.last_seen_ms.get(seat, now_ms), now_ms)

    def next_expiry_ms(self) -> int | None:
        """The earliest instant a lease runs out (``None``: none will)."""
        instants = [
            lease.expires_at_ms
            for held in self.leases.values()
            for lease in held.values()
            if lease.expires_at_ms is not None
        ]
        return min(instants) if instants else None
