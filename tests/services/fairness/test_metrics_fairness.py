"""The fairness service's metrics over real gRPC: draws issued by kind (a retried draw counts once) and
seeds released for reveal at a match's end (a repeated Finish counts once). Values are compared before
and after: the registry is shared by every test of the process."""

from __future__ import annotations

from prometheus_client import REGISTRY
from skillclassics.fairness.v1 import fairness_pb2 as pb
from skillclassics.fairness.v1 import fairness_pb2_grpc

Stub = fairness_pb2_grpc.FairnessServiceStub
KINDS = ("dice", "integer", "coin", "shuffle")


def draws(kind: str) -> float:
    return REGISTRY.get_sample_value("skillclassics_fairness_draws_total", {"kind": kind}) or 0.0


def reveals() -> float:
    return REGISTRY.get_sample_value("skillclassics_fairness_reveals_total", {}) or 0.0


async def test_draws_by_kind_and_reveals_are_counted_once(stub: Stub) -> None:
    before = {kind: draws(kind) for kind in KINDS}
    revealed_before = reveals()
    match_id = "gin.0.metrics"
    await stub.Commit(pb.CommitRequest(match_id=match_id, idempotency_key=match_id))
    await stub.Draw(pb.DrawRequest(match_id=match_id, stream="dice", kind=pb.DRAW_KIND_DICE, count=2))
    await stub.Draw(pb.DrawRequest(match_id=match_id, stream="dice", kind=pb.DRAW_KIND_DICE, count=2))
    retry = await stub.Draw(
        pb.DrawRequest(match_id=match_id, stream="dice", kind=pb.DRAW_KIND_DICE, count=2, index=0)
    )
    assert not retry.newly_issued  # the recorded draw again: not a new one
    await stub.Draw(
        pb.DrawRequest(match_id=match_id, stream="n", kind=pb.DRAW_KIND_INTEGER, count=1, bound=10)
    )
    await stub.Draw(pb.DrawRequest(match_id=match_id, stream="toss", kind=pb.DRAW_KIND_COIN, count=3))
    await stub.Draw(pb.DrawRequest(match_id=match_id, stream="deck", kind=pb.DRAW_KIND_SHUFFLE, bound=52))
    assert {kind: draws(kind) - before[kind] for kind in KINDS} == {
        "dice": 2,
        "integer": 1,
        "coin": 1,
        "shuffle": 1,
    }
    assert reveals() == revealed_before
    await stub.Finish(pb.FinishRequest(match_id=match_id))
    assert reveals() == revealed_before + 1
    await stub.Finish(pb.FinishRequest(match_id=match_id))  # idempotent: the same finish
    await stub.Reveal(pb.RevealRequest(match_id=match_id))
    assert reveals() == revealed_before + 1
