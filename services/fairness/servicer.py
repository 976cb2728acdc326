"""The gRPC face of the fairness service: decode and validate, call the store, encode."""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

import grpc
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc

from libs.fairness import derivation
from libs.fairness.derivation import DrawKind, DrawSpec, FairnessError
from libs.fairness.proof import ClientSeed, DrawRecord, Proof
from libs.runtime.errors import ErrorReason, InvalidArgument
from libs.runtime.game_metrics import FAIRNESS_DRAWS
from services.fairness.store import FairnessStore, IssuedDraw, Revelation

P = ParamSpec("P")
T = TypeVar("T")

_KIND_FROM_PROTO = {
    fairness_pb2.DRAW_KIND_DICE: DrawKind.DICE,
    fairness_pb2.DRAW_KIND_INTEGER: DrawKind.INTEGER,
    fairness_pb2.DRAW_KIND_COIN: DrawKind.COIN,
    fairness_pb2.DRAW_KIND_SHUFFLE: DrawKind.SHUFFLE,
}
_KIND_TO_PROTO = {kind: number for number, kind in _KIND_FROM_PROTO.items()}
_DRAWS_BY_KIND = {kind: FAIRNESS_DRAWS.labels(kind.value) for kind in DrawKind}
_STATE_TO_PROTO = {
    "open": fairness_pb2.MATCH_STATE_OPEN,
    "drawing": fairness_pb2.MATCH_STATE_DRAWING,
    "finished": fairness_pb2.MATCH_STATE_FINISHED,
}


class FairnessServicer(fairness_pb2_grpc.FairnessServiceServicer):
    """Implements ``skillclassics.fairness.v1.FairnessService`` over a :class:`FairnessStore`."""

    def __init__(self, store: FairnessStore) -> None:
        self._store = store

    async def Commit(
        self, request: fairness_pb2.CommitRequest, context: grpc.aio.ServicerContext
    ) -> fairness_pb2.CommitResponse:
        match_id = _match_id(request.match_id)
        made = await self._store.commit(match_id, request.idempotency_key)  # 1-128: the contract's rule
        return fairness_pb2.CommitResponse(
            match_id=made.match_id, commitment=made.commitment, committed_at_ms=made.committed_at_ms
        )

    async def AddClientSeed(
        self, request: fairness_pb2.AddClientSeedRequest, context: grpc.aio.ServicerContext
    ) -> fairness_pb2.AddClientSeedResponse:
        match_id = _match_id(request.match_id)
        seed = _checked(derivation.validate_client_seed, bytes(request.client_seed))
        seeds = await self._store.add_client_seed(match_id, request.seat, seed)
        return fairness_pb2.AddClientSeedResponse(match_id=match_id, client_seeds=_seeds(seeds))

    async def Draw(
        self, request: fairness_pb2.DrawRequest, context: grpc.aio.ServicerContext
    ) -> fairness_pb2.DrawResponse:
        match_id = _match_id(request.match_id)
        stream = _checked(derivation.validate_stream_name, request.stream)
        kind = _KIND_FROM_PROTO[request.kind]  # a defined kind, not UNSPECIFIED: the contract's rule
        count = 1 if kind is DrawKind.SHUFFLE and request.count == 0 else request.count
        spec = _checked(DrawSpec, kind, count, request.bound)
        index = request.index if request.HasField("index") else None
        draw, newly_issued = await self._store.draw(match_id, stream, spec, index)
        if newly_issued:
            _DRAWS_BY_KIND[kind].inc()
        return fairness_pb2.DrawResponse(draw=_draw(draw), newly_issued=newly_issued)

    async def Finish(
        self, request: fairness_pb2.FinishRequest, context: grpc.aio.ServicerContext
    ) -> fairness_pb2.FinishResponse:
        match_id = _match_id(request.match_id)
        finished_at_ms = await self._store.finish(match_id)
        return fairness_pb2.FinishResponse(match_id=match_id, finished_at_ms=finished_at_ms)

    async def Reveal(
        self, request: fairness_pb2.RevealRequest, context: grpc.aio.ServicerContext
    ) -> fairness_pb2.RevealResponse:
        revealed = await self._store.reveal(_match_id(request.match_id))
        proof = _proof(revealed)
        return fairness_pb2.RevealResponse(
            match_id=revealed.commitment.match_id,
            commitment=revealed.commitment.commitment,
            server_seed=revealed.server_seed,
            client_seeds=_seeds(revealed.client_seeds),
            draws=[_draw(d) for d in revealed.draws],
            proof_json=proof.to_json(),
        )

    async def GetCommitment(
        self, request: fairness_pb2.GetCommitmentRequest, context: grpc.aio.ServicerContext
    ) -> fairness_pb2.GetCommitmentResponse:
        made, seeds, streams = await self._store.status(_match_id(request.match_id))
        return fairness_pb2.GetCommitmentResponse(
            match_id=made.match_id,
            commitment=made.commitment,
            state=_STATE_TO_PROTO[made.state],
            client_seeds=_seeds(seeds),
            streams=[fairness_pb2.StreamProgress(stream=s, draws_issued=n) for s, n in streams.items()],
            committed_at_ms=made.committed_at_ms,
        )


def _match_id(value: str) -> str:
    return _checked(derivation.validate_match_id, value)


def _checked(build: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Call a validating constructor; its rules error becomes INVALID_ARGUMENT with the same reason."""
    try:
        return build(*args, **kwargs)
    except FairnessError as error:
        raise InvalidArgument(str(error), reason=ErrorReason.ERROR_REASON_INVALID_REQUEST) from None


def _proof(revealed: Revelation) -> Proof:
    """The proof of what was recorded (not re-derived: the verifier is what re-derives)."""
    return Proof(
        match_id=revealed.commitment.match_id,
        commitment=revealed.commitment.commitment,
        server_seed=revealed.server_seed,
        client_seeds=tuple(ClientSeed(seat, seed) for seat, seed in sorted(revealed.client_seeds.items())),
        draws=tuple(DrawRecord(d.stream, d.index, d.spec, d.values) for d in revealed.draws),
    )


def _seeds(seeds: dict[int, bytes]) -> list[fairness_pb2.ClientSeed]:
    return [fairness_pb2.ClientSeed(seat=seat, seed=seed) for seat, seed in sorted(seeds.items())]


def _draw(draw: IssuedDraw) -> fairness_pb2.Draw:
    return fairness_pb2.Draw(
        stream=draw.stream,
        index=draw.index,
        kind=_KIND_TO_PROTO[draw.spec.kind],
        count=draw.spec.count,
        bound=draw.spec.bound,
        values=draw.values,
        issued_at_ms=draw.issued_at_ms,
    )


__all__ = ["FairnessServicer"]
