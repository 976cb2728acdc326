"""Where a match's random draws come from: the fairness service, and nowhere else.

An engine that needs chance (a shuffle, the first dealer) says so with ``chance_needed``; the match's
actor asks a :class:`ChanceSource` for the draw, logs it as a ``chance`` event and hands the values to
the engine. A draw names its index explicitly, and the fairness service returns the recorded values
for an index it issued before, so a rules service that crashed between the draw and its log entry
gets the very same values when it asks again: nothing can be re-rolled.
"""

from __future__ import annotations

from typing import Protocol

import grpc
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc

from libs.engines.base import ChanceRequest
from libs.runtime.tls import TransportSecurity

DRAW_TIMEOUT_SECONDS = 5.0

_KINDS = {
    "dice": fairness_pb2.DRAW_KIND_DICE,
    "integer": fairness_pb2.DRAW_KIND_INTEGER,
    "coin": fairness_pb2.DRAW_KIND_COIN,
    "shuffle": fairness_pb2.DRAW_KIND_SHUFFLE,
}


class ChanceUnavailable(Exception):
    """The draw could not be obtained now (the fairness service is down or refused); try again later."""


class ChanceSource(Protocol):
    async def draw(self, match_id: str, request: ChanceRequest) -> tuple[int, ...]: ...

    async def seeds(self, match_id: str) -> int:
        """How many seats have contributed a client seed to the match's stream so far."""
        ...

    async def close(self) -> None: ...


class FairnessChance:
    """Draws from the fairness service at ``address``."""

    def __init__(
        self, address: str, transport: TransportSecurity, timeout: float = DRAW_TIMEOUT_SECONDS
    ) -> None:
        self._channel = transport.channel(address, "fairness")
        self._stub = fairness_pb2_grpc.FairnessServiceStub(self._channel)
        self._timeout = timeout

    async def draw(self, match_id: str, request: ChanceRequest) -> tuple[int, ...]:
        kind = _KINDS.get(request.kind)
        if kind is None:
            raise ValueError(f"unknown draw kind {request.kind!r}")
        message = fairness_pb2.DrawRequest(
            match_id=match_id,
            stream=request.stream,
            kind=kind,
            count=request.count,
            bound=request.bound,
            index=request.index,
        )
        try:
            reply = await self._stub.Draw(message, timeout=self._timeout)
        except grpc.aio.AioRpcError as error:
            raise ChanceUnavailable(f"fairness Draw failed: {error.code().name}: {error.details()}") from None
        return tuple(int(v) for v in reply.draw.values)

    async def seeds(self, match_id: str) -> int:
        request = fairness_pb2.GetCommitmentRequest(match_id=match_id)
        try:
            reply = await self._stub.GetCommitment(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as error:
            raise ChanceUnavailable(f"fairness GetCommitment failed: {error.code().name}") from None
        return len(reply.client_seeds)

    async def close(self) -> None:
        await self._channel.close()


class NoChance:
    """For a service without a fairness service: any draw is refused (chess never asks)."""

    async def draw(self, match_id: str, request: ChanceRequest) -> tuple[int, ...]:
        raise ChanceUnavailable("no fairness service is configured (FAIRNESS_ADDRESS)")

    async def seeds(self, match_id: str) -> int:
        return 0

    async def close(self) -> None:
        return None
