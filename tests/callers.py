"""One stub of a backend whose every method is called as the identity that calls it in production.

A test often plays several callers of one backend at once: matchmaking creates a match on a rules shard
and the gateway submits its players' moves; matchmaking commits to a fairness stream and the shard that
owns the match draws from it. With mutual TLS each of those calls must present the certificate of a
caller the authorisation table (:data:`libs.runtime.authz.POLICY`) allows, so :meth:`Callers.stub`
builds a stub whose method ``name`` goes over a channel presenting ``callers[name]``'s certificate::

    async with Callers(server.address) as callers:
        stub = callers.stub(rules_pb2_grpc.RulesServiceStub, RULES_CALLERS)
        await stub.CreateMatch(...)  # as matchmaking
        await stub.SubmitAction(...)  # as the gateway
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

import grpc

from tests.support import backend_channel

S = TypeVar("S")

RULES_CALLERS: Mapping[str, str] = {
    "CreateMatch": "matchmaking",
    "SubmitAction": "gateway",
    "Watch": "gateway",
    "GetMatch": "gateway",
    "SetPresence": "gateway",
    "RenewPresence": "gateway",
    "Exchange": "gateway",
    "GetRecord": "gateway",
    "ListMatches": "operator",
}
"""Who calls each method of a rules shard: matchmaking creates matches, the gateway plays them for its
players, operators list them."""


def fairness_callers(shard: str) -> dict[str, str]:
    """Who calls each method of the fairness service for matches owned by the rules shard ``shard``
    (``rules-gin-0`` for match ids ``gin.0.*``): matchmaking commits, the gateway adds players' seeds,
    the shard draws, finishes, reads and reveals."""
    return {
        "Commit": "matchmaking",
        "AddClientSeed": "gateway",
        "Draw": shard,
        "Finish": shard,
        "GetCommitment": shard,
        "Reveal": shard,
    }


class Callers:
    """Channels to the backend at ``address``, one per identity, each opened on first use; closed
    together by :meth:`close` (or ``async with``)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._channels: dict[str, grpc.aio.Channel] = {}

    def channel(self, identity: str) -> grpc.aio.Channel:
        """The channel presenting ``identity``'s certificate."""
        channel = self._channels.get(identity)
        if channel is None:
            channel = self._channels[identity] = backend_channel(self.address, identity)
        return channel

    def stub(self, stub_class: Callable[[grpc.aio.Channel], S], callers: Mapping[str, str]) -> S:
        """A ``stub_class`` whose method ``name`` calls as ``callers[name]`` (a method ``callers`` does
        not name calls as its first identity)."""
        identities = list(dict.fromkeys(callers.values()))
        stubs = {identity: stub_class(self.channel(identity)) for identity in identities}
        stub = stubs[identities[0]]
        for method, identity in callers.items():
            setattr(stub, method, getattr(stubs[identity], method))
        return stub

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()

    async def __aenter__(self) -> Callers:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
