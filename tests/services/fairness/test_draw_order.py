"""The order of a stream's draws, over real gRPC on localhost, on SQLite and PostgreSQL.

A stream's draws are issued in order with no gaps (docs/fairness.md, "Draw order"): the next index is
issued, an index already issued is answered from the record (the same spec) or refused (another spec),
and a later index is refused and records nothing, so nobody can draw a later deal ahead of the game and
find it in the proof. The other refusals of a match's life are here too: a client seed after the first
draw, a new draw after the finish, a reveal before it. The last test plays the attack of the security
review against a real gin rummy match (rules-gin dealing from fairness).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from skillclassics.fairness.v1 import fairness_pb2 as pb
from skillclassics.fairness.v1 import fairness_pb2_grpc
from skillclassics.gin.v1 import gin_pb2
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.fairness import Proof, verify
from libs.runtime import RunningServer
from services.rules_gin.service import gin_rules_service
from tests.callers import RULES_CALLERS, Callers, fairness_callers
from tests.services.fairness.test_fairness_service import stored_rows
from tests.support import start_fairness, start_in_process

Stub = fairness_pb2_grpc.FairnessServiceStub
FAILED = grpc.StatusCode.FAILED_PRECONDITION
DECK = 52


def shuffle(
    match_id: str, index: int | None = None, stream: str = "shuffle", bound: int = DECK
) -> pb.DrawRequest:
    request = pb.DrawRequest(
        match_id=match_id, stream=stream, kind=pb.DRAW_KIND_SHUFFLE, count=1, bound=bound
    )
    if index is not None:
        request.index = index
    return request


def coin(match_id: str, index: int | None = None, stream: str = "dealer") -> pb.DrawRequest:
    request = pb.DrawRequest(match_id=match_id, stream=stream, kind=pb.DRAW_KIND_COIN, count=1)
    if index is not None:
        request.index = index
    return request


async def refused(call: object, code: grpc.StatusCode, *reasons: str) -> str:
    """Await ``call``, which must fail with ``code`` and a reason holding every one of ``reasons``."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    details = caught.value.details() or ""
    assert caught.value.code() == code, details
    for reason in reasons:
        assert reason in details, details
    return details


async def streams(stub: Stub, match_id: str) -> dict[str, int]:
    """How many draws each stream of ``match_id`` has issued, as fairness tells anyone."""
    status = await stub.GetCommitment(pb.GetCommitmentRequest(match_id=match_id))
    return {s.stream: s.draws_issued for s in status.streams}


async def proof_of(stub: Stub, match_id: str) -> Proof:
    """Finish ``match_id`` and return its proof, which must verify."""
    await stub.Finish(pb.FinishRequest(match_id=match_id))
    revealed = await stub.Reveal(pb.RevealRequest(match_id=match_id))
    proof = Proof.from_json(revealed.proof_json)
    report = verify(proof)
    assert report.ok, report.summary()
    return proof


def indices(proof: Proof) -> list[tuple[str, int]]:
    return [(d.stream, d.index) for d in proof.draws]


@pytest.mark.parametrize("index", [2, 3, 6, 2**64 - 1])
async def test_a_draw_ahead_of_the_stream_is_refused_and_never_reaches_the_proof(
    database_url: str, stub: Stub, index: int
) -> None:
    # Like gin rummy: the dealer coin, then the first hand's shuffle, both asked for by the game.
    await stub.Commit(pb.CommitRequest(match_id="gin.0.g", idempotency_key="k"))
    await stub.Draw(coin("gin.0.g", 0))
    dealt = (await stub.Draw(shuffle("gin.0.g", 0))).draw
    before = await stored_rows(database_url, "gin.0.g")

    # Someone asks for a later deal's shuffle before the game does: refused, naming the stream, the
    # index asked and the next index; nothing is recorded.
    await refused(
        stub.Draw(shuffle("gin.0.g", index)),
        FAILED,
        "stream shuffle",
        f"draw {index}",
        "next index is 1",
    )
    assert await stored_rows(database_url, "gin.0.g") == before
    assert await streams(stub, "gin.0.g") == {"dealer": 1, "shuffle": 1}

    # The game's own next draw is issued now, for the first time: nobody saw it before.
    second = await stub.Draw(shuffle("gin.0.g", 1))
    assert second.newly_issued
    assert second.draw.index == 1

    proof = await proof_of(stub, "gin.0.g")
    assert indices(proof) == [("dealer", 0), ("shuffle", 0), ("shuffle", 1)]
    assert list(proof.draws[1].values) == list(dealt.values)


async def test_a_fresh_stream_starts_at_index_0(database_url: str, stub: Stub) -> None:
    await stub.Commit(pb.CommitRequest(match_id="gin.0.f", idempotency_key="k"))
    await stub.Draw(coin("gin.0.f", 0))
    before = await stored_rows(database_url, "gin.0.f")
    await refused(stub.Draw(shuffle("gin.0.f", 1)), FAILED, "stream shuffle", "draw 1", "next index is 0")
    assert await stored_rows(database_url, "gin.0.f") == before
    assert await streams(stub, "gin.0.f") == {"dealer": 1}  # the refused stream does not exist
    assert (await stub.Draw(shuffle("gin.0.f", 0))).draw.index == 0
    assert indices(await proof_of(stub, "gin.0.f")) == [("dealer", 0), ("shuffle", 0)]


async def test_a_match_that_has_not_drawn_yet_refuses_an_ahead_draw_and_still_takes_client_seeds(
    database_url: str, stub: Stub
) -> None:
    await stub.Commit(pb.CommitRequest(match_id="gin.0.o", idempotency_key="k"))
    before = await stored_rows(database_url, "gin.0.o")
    await refused(stub.Draw(shuffle("gin.0.o", 3)), FAILED, "stream shuffle", "draw 3", "next index is 0")
    assert await stored_rows(database_url, "gin.0.o") == before
    status = await stub.GetCommitment(pb.GetCommitmentRequest(match_id="gin.0.o"))
    assert status.state == pb.MATCH_STATE_OPEN  # a refused draw does not fix the key
    await stub.AddClientSeed(
        pb.AddClientSeedRequest(match_id="gin.0.o", seat=0, client_seed=b"still in time")
    )


async def test_indices_are_issued_in_order_with_no_gaps_with_or_without_an_explicit_index(
    stub: Stub,
) -> None:
    await stub.Commit(pb.CommitRequest(match_id="gin.0.n", idempotency_key="k"))
    issued = [
        await stub.Draw(shuffle("gin.0.n", 0)),
        await stub.Draw(shuffle("gin.0.n")),  # unset: the next one
        await stub.Draw(shuffle("gin.0.n", 2)),
        await stub.Draw(shuffle("gin.0.n")),
        await stub.Draw(coin("gin.0.n")),  # another stream has its own numbering, from 0
        await stub.Draw(coin("gin.0.n", 1)),
    ]
    assert [(r.draw.stream, r.draw.index) for r in issued] == [
        ("shuffle", 0),
        ("shuffle", 1),
        ("shuffle", 2),
        ("shuffle", 3),
        ("dealer", 0),
        ("dealer", 1),
    ]
    assert all(r.newly_issued for r in issued)
    assert await streams(stub, "gin.0.n") == {"dealer": 2, "shuffle": 4}
    proof = await proof_of(stub, "gin.0.n")
    assert indices(proof) == [("dealer", 0), ("dealer", 1)] + [("shuffle", i) for i in range(4)]


async def test_concurrent_next_and_ahead_draws_leave_no_gap(stub: Stub) -> None:
    """Many callers at once, each asking for an index of its own (0 to 29): the ones that came in order
    are issued, the rest refused; whatever was issued is dense from 0."""
    await stub.Commit(pb.CommitRequest(match_id="gin.0.c", idempotency_key="k"))
    replies = await asyncio.gather(
        *(stub.Draw(shuffle("gin.0.c", i, bound=8)) for i in range(30)), return_exceptions=True
    )
    issued = sorted(r.draw.index for r in replies if isinstance(r, pb.DrawResponse))
    errors = [r for r in replies if not isinstance(r, pb.DrawResponse)]
    assert all(isinstance(e, grpc.aio.AioRpcError) and e.code() == FAILED for e in errors)
    assert issued == list(range(len(issued)))
    assert issued  # index 0 is always the next one when it is asked for
    proof = await proof_of(stub, "gin.0.c")
    assert indices(proof) == [("shuffle", i) for i in issued]


async def test_a_retry_of_an_issued_index_returns_the_recorded_draw(database_url: str, stub: Stub) -> None:
    await stub.Commit(pb.CommitRequest(match_id="gin.0.r", idempotency_key="k"))
    first = [(await stub.Draw(shuffle("gin.0.r", i))).draw for i in range(3)]
    before = await stored_rows(database_url, "gin.0.r")
    for draw in first:
        again = await stub.Draw(shuffle("gin.0.r", draw.index))
        assert not again.newly_issued
        assert again.draw == first[draw.index]  # the same values and the same issue time
    assert await stored_rows(database_url, "gin.0.r") == before

    # The same index with another spec is refused and changes nothing.
    await refused(
        stub.Draw(shuffle("gin.0.r", 1, bound=10)), FAILED, "draw 1 of stream shuffle was issued as shuffle"
    )
    await refused(
        stub.Draw(coin("gin.0.r", 0, stream="shuffle")), FAILED, "was issued as shuffle", "not coin"
    )
    assert await stored_rows(database_url, "gin.0.r") == before

    # The next draw is still the next index: the retries took no index.
    assert (await stub.Draw(shuffle("gin.0.r"))).draw.index == 3

    # After the finish a retry is still answered from the record (a rules service that crashed between
    # the draw and its log asks again); a new draw is not.
    await stub.Finish(pb.FinishRequest(match_id="gin.0.r"))
    late = await stub.Draw(shuffle("gin.0.r", 0))
    assert (late.newly_issued, late.draw) == (False, first[0])


async def test_no_draw_after_the_finish(database_url: str, stub: Stub) -> None:
    await stub.Commit(pb.CommitRequest(match_id="gin.0.e", idempotency_key="k"))
    await stub.Draw(shuffle("gin.0.e", 0))
    await stub.Finish(pb.FinishRequest(match_id="gin.0.e"))
    before = await stored_rows(database_url, "gin.0.e")
    for request in (shuffle("gin.0.e"), shuffle("gin.0.e", 1), shuffle("gin.0.e", 4), coin("gin.0.e", 0)):
        await refused(stub.Draw(request), FAILED, "match gin.0.e is finished; no more draws")
    assert await stored_rows(database_url, "gin.0.e") == before
    assert indices(await proof_of(stub, "gin.0.e")) == [("shuffle", 0)]


async def test_no_client_seed_after_the_first_draw_or_the_finish(database_url: str, stub: Stub) -> None:
    await stub.Commit(pb.CommitRequest(match_id="gin.0.s", idempotency_key="k"))
    await stub.AddClientSeed(pb.AddClientSeedRequest(match_id="gin.0.s", seat=0, client_seed=b"early"))
    await stub.Draw(coin("gin.0.s", 0))
    before = await stored_rows(database_url, "gin.0.s")
    await refused(
        stub.AddClientSeed(pb.AddClientSeedRequest(match_id="gin.0.s", seat=1, client_seed=b"late")),
        FAILED,
        "match gin.0.s has drawn already; client seeds must come before the first draw",
    )
    # Seat 0's own seed again is a retry: answered, nothing changes.
    again = await stub.AddClientSeed(
        pb.AddClientSeedRequest(match_id="gin.0.s", seat=0, client_seed=b"early")
    )
    assert [(c.seat, c.seed) for c in again.client_seeds] == [(0, b"early")]
    assert await stored_rows(database_url, "gin.0.s") == before
    await stub.Finish(pb.FinishRequest(match_id="gin.0.s"))
    await refused(
        stub.AddClientSeed(pb.AddClientSeedRequest(match_id="gin.0.s", seat=1, client_seed=b"later")),
        FAILED,
        "match gin.0.s is finished; no more client seeds",
    )
    proof = await proof_of(stub, "gin.0.s")
    assert [(c.seat, c.seed) for c in proof.client_seeds] == [(0, b"early")]


async def test_no_reveal_before_the_finish(stub: Stub) -> None:
    await stub.Commit(pb.CommitRequest(match_id="gin.0.v", idempotency_key="k"))
    await refused(
        stub.Reveal(pb.RevealRequest(match_id="gin.0.v")),
        FAILED,
        "match gin.0.v is not finished (state: open)",
    )
    await stub.Draw(coin("gin.0.v", 0))
    await refused(
        stub.Reveal(pb.RevealRequest(match_id="gin.0.v")),
        FAILED,
        "match gin.0.v is not finished (state: drawing)",
    )
    assert indices(await proof_of(stub, "gin.0.v")) == [("dealer", 0)]


# -- the attack against a real gin rummy match -----------------------------------------------------------


@dataclass
class GinStack:
    fairness: RunningServer
    rules: RunningServer


@pytest.fixture
async def gin(database_url: str, tmp_path: Path) -> AsyncIterator[GinStack]:
    fairness = await start_fairness(database_url, tmp_path)
    rules = await start_in_process(
        "rules-gin", gin_rules_service, database_url, {"FAIRNESS_ADDRESS": fairness.address}
    )
    yield GinStack(fairness, rules)
    await rules.stop(grace=0.5)
    await fairness.stop(grace=0.5)


async def test_the_next_deals_cannot_be_drawn_ahead_of_a_gin_match(gin: GinStack) -> None:
    match_id = f"gin.0.{uuid.uuid4().hex[:12]}"
    seats = [
        rules_pb2.SeatAssignment(seat=0, player_id="ann"),
        rules_pb2.SeatAssignment(seat=1, player_id="ben"),
    ]
    # Fairness called as its real callers, the draws as rules-gin-0 itself (the shard that owns the
    # match); the rules service as matchmaking (creation) and the gateway (the players' moves).
    async with (
        Callers(gin.fairness.address) as fairness_channels,
        Callers(gin.rules.address) as rules_channels,
    ):
        fairness = fairness_channels.stub(Stub, fairness_callers("rules-gin-0"))
        rules = rules_channels.stub(rules_pb2_grpc.RulesServiceStub, RULES_CALLERS)
        commitment = await fairness.Commit(pb.CommitRequest(match_id=match_id, idempotency_key=match_id))
        await rules.CreateMatch(
            rules_pb2.CreateMatchRequest(
                match_id=match_id,
                seats=seats,
                options=rules_pb2.MatchOptions(gin=gin_pb2.GinOptions(variant=gin_pb2.VARIANT_STANDARD)),
                time_control=rules_pb2.TimeControl(base_ms=30 * 60_000),
                fairness_commitment=commitment.commitment,
                idempotency_key=f"create-{match_id}",
            )
        )
        async with asyncio.timeout(10):  # the rules service draws the dealer and deals hand 1
            while True:
                if await streams(fairness, match_id) == {"dealer": 1, "shuffle": 1}:
                    break
                await asyncio.sleep(0.02)

        # While hand 1 is played, the shuffles of hands 3 and 6 are asked for, by the owning shard's own
        # identity: refused. (The shuffle of hand 2, index 1, is the next index: only the owning shard may
        # draw it, and the rules service asks for it once hand 1 is over.)
        for index in (2, 5):
            await refused(
                fairness.Draw(shuffle(match_id, index)),
                FAILED,
                "stream shuffle",
                f"draw {index}",
                "next index is 1",
            )
        assert await streams(fairness, match_id) == {"dealer": 1, "shuffle": 1}

        # The match ends (a resignation); the rules service finishes the stream through its outbox.
        await rules.SubmitAction(
            rules_pb2.SubmitActionRequest(
                match_id=match_id,
                seat=0,
                idempotency_key="resign",
                action=rules_pb2.Action(resign=rules_pb2.Resign()),
            )
        )
        async with asyncio.timeout(10):
            while True:
                status = await fairness.GetCommitment(pb.GetCommitmentRequest(match_id=match_id))
                if status.state == pb.MATCH_STATE_FINISHED:
                    break
                await asyncio.sleep(0.02)
        revealed = await fairness.Reveal(pb.RevealRequest(match_id=match_id))
    proof = Proof.from_json(revealed.proof_json)
    assert verify(proof).ok
    assert indices(proof) == [("dealer", 0), ("shuffle", 0)]  # no draw made ahead of the game
