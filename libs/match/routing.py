"""Where a family's rules shards listen, and the channel to the shard a match id names.

``RULES_<FAMILY>_ADDRESSES`` (e.g. ``RULES_CHESS_ADDRESSES=10.0.0.5:50060,10.0.0.6:50060``) lists a
family's shards in shard order: the n-th address serves shard n, and the match id names the shard
(``chess.<n>.<unique>``, see :mod:`libs.match.ids`). Matchmaking and the gateway both route this way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import grpc
from skillclassics.rules.v1 import rules_pb2_grpc

from libs.runtime.tls import TransportSecurity

_VARIABLE = re.compile(r"RULES_([A-Z]{2,32})_ADDRESSES")
RECONNECT_CHANNEL_OPTIONS: list[tuple[str, object]] = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
]
"""How soon a channel to a rules shard tries again after failing to connect: after 0.1 s, growing to at
most 0.5 s (grpc's defaults: 1 s growing to 120 s). A restarting shard is then reached within about half
a second of reporting SERVING, not seconds later (with the defaults the gateway still refused every Play
stream for some 1.5-3 s after a shard's restart). A refused connect attempt to a shard that is down costs
next to nothing; the time a single attempt may take stays grpc's (20 s)."""


def address_variable(family: str) -> str:
    """The variable that lists ``family``'s shards."""
    return f"RULES_{family.upper()}_ADDRESSES"


def shard_addresses(env: Mapping[str, str], family: str) -> list[str]:
    """``family``'s shard addresses in shard order (empty when none is configured)."""
    raw = env.get(address_variable(family), "")
    return [a.strip() for a in raw.split(",") if a.strip()]


def all_shard_addresses(
    env: Mapping[str, str], families: Iterable[str] | None = None
) -> dict[str, list[str]]:
    """Every configured family's shards: those of ``families``, or of every ``RULES_*_ADDRESSES``."""
    if families is None:
        families = [m[1].lower() for m in (_VARIABLE.fullmatch(name) for name in env) if m is not None]
    return {family: shard_addresses(env, family) for family in families}


class RulesChannels:
    """One lazily opened channel, and one stub over it, per rules shard address (a stub builds a
    callable per method: made once, not on every forwarded call), over ``transport``'s mutual TLS, with
    ``options`` and a short reconnect backoff (:data:`RECONNECT_CHANNEL_OPTIONS`)."""

    def __init__(self, transport: TransportSecurity, options: list[tuple[str, object]] | None = None) -> None:
        self._transport = transport
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, rules_pb2_grpc.RulesServiceStub] = {}
        self._options = [*(options or []), *RECONNECT_CHANNEL_OPTIONS]

    def stub(self, address: str, family: str) -> rules_pb2_grpc.RulesServiceStub:
        """The stub of ``family``'s shard at ``address`` (whose certificate must be ``rules-<family>``'s)."""
        stub = self._stubs.get(address)
        if stub is None:
            channel = self._channels[address] = self._transport.channel(
                address, f"rules-{family}", options=self._options
            )
            stub = self._stubs[address] = rules_pb2_grpc.RulesServiceStub(channel)
        return stub

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
        self._stubs.clear()
