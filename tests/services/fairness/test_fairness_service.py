"""The fairness service over real gRPC on localhost, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any, cast

import grpc
import pytest
from skillclassics.fairness.v1 import fairness_pb2 as pb
from skillclassics.fairness.v1 import fairness_pb2_grpc
from sqlalchemy import select

from libs.fairness.derivation import DrawSpec, draw_values, stream_key
from libs.fairness.proof import Proof, verify
from libs.persistence import Database
from libs.persistence.schema import fairness_client_seeds, fairness_commitments, fairness_draws
from libs.runtime import RunningServer
from services.fairness.service import FairnessService
from services.fairness.store import FairnessStore
from tests.callers import Callers, fairness_callers
from tests.support import FAIRNESS_TEST_SEED_KEY, ServiceProcess, start_fairness

ROOT = Path(__file__).resolve().parents[3]

Stub = fairness_pb2_grpc.FairnessServiceStub
CALLERS = fairness_callers("rules-gin-0")
"""Each method is called as its real caller would: matchmaking commits, the gateway adds client seeds, and
rules-gin-0 draws, finishes and reveals, for it owns the matches these tests name (``gin.0.*``)."""


async def _status(stub: Stub, match_id: str) -> pb.GetCommitmentResponse:
    reply: pb.GetCommitmentResponse = await stub.GetCommitment(pb.GetCommitmentRequest(match_id=match_id))
    return reply


async def stored_rows(database_url: str, match_id: str) -> dict[str, list[tuple[object, ...]]]:
    """Every stored row of ``match_id``, table by table, read straight from the database."""
    db = Database(database_url)
    try:
        async with db.connect() as conn:
            rows: dict[str, list[tuple[object, ...]]] = {}
            for table in (fairness_commitments, fairness_client_seeds, fairness_draws):
                result = await conn.execute(select(table).where(table.c.match_id == match_id))
                rows[table.name] = sorted(tuple(row) for row in result)
            return rows
    finally:
        await db.dispose()


async def _revealed(stub: Stub, match_id: str) -> pb.RevealResponse:
    """Finish ``match_id`` and reveal everything recorded for it."""
    await stub.Finish(pb.FinishRequest(match_id=match_id))
    reply: pb.RevealResponse = await stub.Reveal(pb.RevealRequest(match_id=match_id))
    return reply


async def _refused(call: object, code: grpc.StatusCode, reason: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.code() == code, caught.value.details()
    assert reason in (caught.value.details() or "")


def dice(match_id: str, count: int = 2, index: int | None = None, stream: str = "dice") -> pb.DrawRequest:
    request = pb.DrawRequest(match_id=match_id, stream=stream, kind=pb.DRAW_KIND_DICE, count=count)
    if index is not None:
        request.index = index
    return request


async def test_commit_is_idempotent_per_key_and_unique_per_match(database_url: str, stub: Stub) -> None:
    first = await stub.Commit(pb.CommitRequest(match_id="gin.0.m-1", idempotency_key="k-1"))
    assert len(first.commitment) == 64
    int(first.commitment, 16)
    again = await stub.Commit(pb.CommitRequest(match_id="gin.0.m-1", idempotency_key="k-1"))
    assert again == first
    stored = await stored_rows(database_url, "gin.0.m-1")
    status = await _status(stub, "gin.0.m-1")
    await _refused(
        stub.Commit(pb.CommitRequest(match_id="gin.0.m-1", idempotency_key="k-2")),
        grpc.StatusCode.ALREADY_EXISTS,
        "already has a commitment",
    )
    # The refused second commitment changed nothing: not the commitment, its seed, nor its idempotency key.
    assert await stored_rows(database_url, "gin.0.m-1") == stored
    assert await _status(stub, "gin.0.m-1") == status
    assert status.commitment == first.commitment
    assert status.committed_at_ms == first.committed_at_ms
    assert await stub.Commit(pb.CommitRequest(match_id="gin.0.m-1", idempotency_key="k-1")) == first
    other = await stub.Commit(pb.CommitRequest(match_id="gin.0.m-2", idempotency_key="k-1"))
    assert other.commitment != first.commitment
    revealed = await _revealed(stub, "gin.0.m-1")
    assert revealed.commitment == first.commitment == hashlib.sha256(revealed.server_seed).hexdigest()


async def test_a_full_match_reveals_a_proof_that_verifies(stub: Stub) -> None:
    made = await stub.Commit(pb.CommitRequest(match_id="gin.0.bg-7", idempotency_key="k"))
    await stub.AddClientSeed(
        pb.AddClientSeedRequest(match_id="gin.0.bg-7", seat=0, client_seed=b"white's seed")
    )
    seeds = await stub.AddClientSeed(
        pb.AddClientSeedRequest(match_id="gin.0.bg-7", seat=1, client_seed=b"\x00\xff")
    )
    assert [(s.seat, s.seed) for s in seeds.client_seeds] == [(0, b"white's seed"), (1, b"\x00\xff")]
    rolls = [(await stub.Draw(dice("gin.0.bg-7"))).draw for _ in range(5)]
    assert [r.index for r in rolls] == [0, 1, 2, 3, 4]
    assert all(len(r.values) == 2 and all(1 <= v <= 6 for v in r.values) for r in rolls)
    deck = (
        await stub.Draw(
            pb.DrawRequest(match_id="gin.0.bg-7", stream="deck", kind=pb.DRAW_KIND_SHUFFLE, bound=52)
        )
    ).draw
    assert sorted(deck.values) == list(range(52))
    coin = (
        await stub.Draw(pb.DrawRequest(match_id="gin.0.bg-7", stream="toss", kind=pb.DRAW_KIND_COIN, count=3))
    ).draw
    integer = (
        await stub.Draw(
            pb.DrawRequest(
                match_id="gin.0.bg-7", stream="setup", kind=pb.DRAW_KIND_INTEGER, count=4, bound=27
            )
        )
    ).draw
    assert all(v in (0, 1) for v in coin.values)
    assert all(0 <= v < 27 for v in integer.values)

    status = await _status(stub, "gin.0.bg-7")
    assert status.state == pb.MATCH_STATE_DRAWING
    assert {s.stream: s.draws_issued for s in status.streams} == {"deck": 1, "dice": 5, "setup": 1, "toss": 1}

    await _refused(
        stub.Reveal(pb.RevealRequest(match_id="gin.0.bg-7")),
        grpc.StatusCode.FAILED_PRECONDITION,
        "not finished",
    )
    await stub.Finish(pb.FinishRequest(match_id="gin.0.bg-7"))
    await stub.Finish(pb.FinishRequest(match_id="gin.0.bg-7"))  # idempotent
    await _refused(stub.Draw(dice("gin.0.bg-7")), grpc.StatusCode.FAILED_PRECONDITION, "finished")

    revealed = await stub.Reveal(pb.RevealRequest(match_id="gin.0.bg-7"))
    assert hashlib.sha256(revealed.server_seed).hexdigest() == made.commitment == revealed.commitment
    proof = Proof.from_json(revealed.proof_json)
    report = verify(proof)
    assert report.ok, report.summary()
    recorded = {(d.stream, d.index): list(d.values) for d in revealed.draws}
    assert recorded[("dice", 3)] == list(rolls[3].values)
    assert recorded[("deck", 0)] == list(deck.values)
    # An independent re-derivation from the revealed seed gives the values that were dealt during play.
    key = stream_key(revealed.server_seed, "gin.0.bg-7", {0: b"white's seed", 1: b"\x00\xff"})
    assert list(draw_values(key, "dice", 3, DrawSpec.dice(2))) == list(rolls[3].values)


async def test_a_draw_index_is_issued_once_and_replayed_from_the_record(stub: Stub) -> None:
    await stub.Commit(pb.CommitRequest(match_id="gin.0.m", idempotency_key="k"))
    first = await stub.Draw(dice("gin.0.m", index=0))
    assert first.newly_issued
    replay = await stub.Draw(dice("gin.0.m", index=0))
    assert not replay.newly_issued
    assert replay.draw == first.draw
    await _refused(
        stub.Draw(dice("gin.0.m", count=3, index=0)), grpc.StatusCode.FAILED_PRECONDITION, "was issued as"
    )
    await _refused(stub.Draw(dice("gin.0.m", index=5)), grpc.StatusCode.FAILED_PRECONDITION, "before draw 1")
    assert (await stub.Draw(dice("gin.0.m"))).draw.index == 1


async def test_concurrent_draws_get_distinct_consecutive_indices(stub: Stub) -> None:
    await stub.Commit(pb.CommitRequest(match_id="gin.0.race", idempotency_key="k"))
    replies = await asyncio.gather(*(stub.Draw(dice("gin.0.race", count=1)) for _ in range(20)))
    assert sorted(r.draw.index for r in replies) == list(range(20))
    assert all(r.newly_issued for r in replies)


async def test_client_seeds_only_before_the_first_draw_and_once_per_seat(
    database_url: str, stub: Stub
) -> None:
    await stub.Commit(pb.CommitRequest(match_id="gin.0.s", idempotency_key="k"))
    add = pb.AddClientSeedRequest(match_id="gin.0.s", seat=0, client_seed=b"abc")
    await stub.AddClientSeed(add)
    await stub.AddClientSeed(add)  # the same seed again is a no-op
    await _refused(
        stub.AddClientSeed(pb.AddClientSeedRequest(match_id="gin.0.s", seat=0, client_seed=b"xyz")),
        grpc.StatusCode.ALREADY_EXISTS,
        "seat 0",
    )
    drawn = [(await stub.Draw(dice("gin.0.s"))).draw, (await stub.Draw(dice("gin.0.s", stream="other"))).draw]
    stored = await stored_rows(database_url, "gin.0.s")
    for seat, seed in ((1, b"late"), (0, b"xyz")):
        await _refused(
            stub.AddClientSeed(pb.AddClientSeedRequest(match_id="gin.0.s", seat=seat, client_seed=seed)),
            grpc.StatusCode.FAILED_PRECONDITION,
            "before the first draw",
        )
    # Neither the seeds nor the recorded draws changed: in the database and as revealed.
    assert await stored_rows(database_url, "gin.0.s") == stored
    status = await _status(stub, "gin.0.s")
    assert [(c.seat, c.seed) for c in status.client_seeds] == [(0, b"abc")]
    revealed = await _revealed(stub, "gin.0.s")
    assert [(c.seat, c.seed) for c in revealed.client_seeds] == [(0, b"abc")]
    assert sorted(revealed.draws, key=lambda d: d.stream) == drawn
    assert verify(Proof.from_json(revealed.proof_json)).ok


@pytest.mark.parametrize(
    ("request_", "code", "reason"),
    [
        (
            pb.DrawRequest(match_id="gin.0.nope", stream="dice", kind=pb.DRAW_KIND_DICE, count=1),
            "NOT_FOUND",
            "no commitment",
        ),
        (
            pb.DrawRequest(match_id="gin.0.b", stream="dice", kind=pb.DRAW_KIND_UNSPECIFIED, count=1),
            "INVALID_ARGUMENT",
            "kind",
        ),
        (
            pb.DrawRequest(match_id="gin.0.b", stream="dice", kind=cast(Any, 99), count=1),
            "INVALID_ARGUMENT",
            "kind",
        ),
        (
            pb.DrawRequest(match_id="gin.0.b", stream="dice", kind=pb.DRAW_KIND_DICE, count=0),
            "INVALID_ARGUMENT",
            "count",
        ),
        (
            pb.DrawRequest(match_id="gin.0.b", stream="dice", kind=pb.DRAW_KIND_DICE, count=1025),
            "INVALID_ARGUMENT",
            "count",
        ),
        (
            pb.DrawRequest(match_id="gin.0.b", stream="dice", kind=pb.DRAW_KIND_DICE, count=1, bound=6),
            "INVALID_ARGUMENT",
            "bound",
        ),
        (
            pb.DrawRequest(match_id="gin.0.b", stream="x", kind=pb.DRAW_KIND_INTEGER, count=1, bound=0),
            "INVALID_ARGUMENT",
            "bound",
        ),
        (
            pb.DrawRequest(match_id="gin.0.b", stream="x", kind=pb.DRAW_KIND_SHUFFLE, bound=1025),
            "INVALID_ARGUMENT",
            "bound",
        ),
        (
            pb.DrawRequest(match_id="gin.0.b", stream="Bad Name", kind=pb.DRAW_KIND_DICE, count=1),
            "INVALID_ARGUMENT",
            "stream",
        ),
        # No shard owns an empty match id: the authorisation check refuses the draw before the service
        # sees it. The service's own check of the id is reached through the gateway's AddClientSeed.
        (
            pb.DrawRequest(match_id="", stream="dice", kind=pb.DRAW_KIND_DICE, count=1),
            "PERMISSION_DENIED",
            "is not a match id",
        ),
        (pb.AddClientSeedRequest(match_id="", seat=0, client_seed=b"x"), "INVALID_ARGUMENT", "match"),
        (pb.AddClientSeedRequest(match_id="gin.0.b", seat=0, client_seed=b""), "INVALID_ARGUMENT", "seed"),
        (
            pb.AddClientSeedRequest(match_id="gin.0.b", seat=0, client_seed=b"x" * 65),
            "INVALID_ARGUMENT",
            "seed",
        ),
        (pb.AddClientSeedRequest(match_id="gin.0.b", seat=16, client_seed=b"x"), "INVALID_ARGUMENT", "seat"),
        (pb.CommitRequest(match_id="gin.0.b", idempotency_key=""), "INVALID_ARGUMENT", "idempotency_key"),
        (pb.CommitRequest(match_id="b" * 129, idempotency_key="k"), "INVALID_ARGUMENT", "match"),
        (pb.FinishRequest(match_id="gin.0.nope"), "NOT_FOUND", "no commitment"),
        (pb.RevealRequest(match_id="gin.0.nope"), "NOT_FOUND", "no commitment"),
    ],
)
async def test_bad_input_is_refused_clearly_and_changes_nothing(
    database_url: str, stub: Stub, request_: object, code: str, reason: str
) -> None:
    await stub.Commit(pb.CommitRequest(match_id="gin.0.b", idempotency_key="k"))
    drawn = (await stub.Draw(dice("gin.0.b"))).draw
    before = await _status(stub, "gin.0.b")
    stored = await stored_rows(database_url, "gin.0.b")
    method = {
        pb.DrawRequest: stub.Draw,
        pb.AddClientSeedRequest: stub.AddClientSeed,
        pb.CommitRequest: stub.Commit,
        pb.FinishRequest: stub.Finish,
        pb.RevealRequest: stub.Reveal,
    }[type(request_)]
    await _refused(method(request_), grpc.StatusCode[code], reason)
    # Read back: the rows, the public state and, once revealed, the draws are as before the refusal.
    assert await stored_rows(database_url, "gin.0.b") == stored
    assert await _status(stub, "gin.0.b") == before
    revealed = await _revealed(stub, "gin.0.b")
    assert list(revealed.draws) == [drawn]
    assert list(revealed.client_seeds) == []


async def test_a_restart_loses_no_commitment_or_draw(database_url: str, tmp_path: Path) -> None:
    first = await start_fairness(database_url, tmp_path)
    async with Callers(first.address) as callers:
        stub = callers.stub(Stub, CALLERS)
        made = await stub.Commit(pb.CommitRequest(match_id="gin.0.r", idempotency_key="k"))
        before = [(await stub.Draw(dice("gin.0.r"))).draw for _ in range(3)]
    await first.stop(grace=1)

    second = await start_fairness(database_url, tmp_path)
    try:
        async with Callers(second.address) as callers:
            stub = callers.stub(Stub, CALLERS)
            assert (await _status(stub, "gin.0.r")).commitment == made.commitment
            assert [(await stub.Draw(dice("gin.0.r", index=i))).draw for i in range(3)] == before
            assert (await stub.Draw(dice("gin.0.r"))).draw.index == 3
    finally:
        await second.stop(grace=1)


async def test_the_database_holds_no_readable_seed(database_url: str, stub: Stub) -> None:
    await stub.Commit(pb.CommitRequest(match_id="gin.0.dump", idempotency_key="k"))
    await stub.Finish(pb.FinishRequest(match_id="gin.0.dump"))
    seed = (await stub.Reveal(pb.RevealRequest(match_id="gin.0.dump"))).server_seed
    db = Database(database_url)
    try:
        async with db.connect() as conn:
            row = (await conn.execute(select(fairness_commitments))).one()
    finally:
        await db.dispose()
    stored = b"".join(v if isinstance(v, bytes) else str(v).encode() for v in row)
    assert seed not in stored
    assert seed.hex().encode() not in stored


async def test_kill_9_and_restart_keeps_every_draw(tmp_path: Path) -> None:
    await _kill_and_restart(tmp_path)


async def _kill_and_restart(tmp_path: Path) -> None:
    env = {"DATA_DIR": str(tmp_path), "FAIRNESS_SEED_KEY": FAIRNESS_TEST_SEED_KEY, "DATABASE_URL": ""}
    async with ServiceProcess("services.fairness", env) as service:
        async with Callers(service.address) as callers:
            stub = callers.stub(Stub, CALLERS)
            await stub.Commit(pb.CommitRequest(match_id="gin.0.k9", idempotency_key="k"))
            acknowledged = [(await stub.Draw(dice("gin.0.k9"))).draw for _ in range(10)]
        service.kill()
        await service.start()
        async with Callers(service.address) as callers:
            stub = callers.stub(Stub, CALLERS)
            await stub.Finish(pb.FinishRequest(match_id="gin.0.k9"))
            revealed = await stub.Reveal(pb.RevealRequest(match_id="gin.0.k9"))
        assert list(revealed.draws) == acknowledged
        assert verify(Proof.from_json(revealed.proof_json)).ok


def _store(server: RunningServer) -> FairnessStore:
    service = cast(FairnessService, server.service)
    assert service.store is not None
    return service.store


async def test_concurrent_calls_share_commits_and_each_is_durable_when_answered(
    server: RunningServer, stub: Stub, database_url: str
) -> None:
    """Calls that arrive while a commit is in flight share the next one (group commit): fewer commits
    than calls, and every answered draw is in the database with the values it was answered with."""
    matches = [f"gin.0.g-{n}" for n in range(8)]
    await asyncio.gather(*(stub.Commit(pb.CommitRequest(match_id=m, idempotency_key="k")) for m in matches))
    committer = _store(server).committer
    before_batches, before_units = committer.batches, committer.units
    replies = await asyncio.gather(*(stub.Draw(dice(m, count=1)) for m in matches for _ in range(5)))
    assert committer.units - before_units == 40
    assert committer.batches - before_batches < 40
    for match_id in matches:
        stored = (await stored_rows(database_url, match_id))["fairness_draws"]
        answered = sorted(
            (r.draw.index, list(r.draw.values))
            for r, m in zip(replies, [m for m in matches for _ in range(5)], strict=True)
            if m == match_id
        )
        assert [i for i, _ in answered] == list(range(5))
        # Each row: match_id, stream, draw_index, kind, count, bound, draw_values, issued_at_ms.
        assert sorted((cast(int, row[2]), list(cast(list[int], row[6]))) for row in stored) == answered
        revealed = await _revealed(stub, match_id)
        assert [(d.index, list(d.values)) for d in revealed.draws] == answered


async def test_a_refused_call_fails_alone_in_a_shared_commit(stub: Stub, database_url: str) -> None:
    """A refused call (a draw after the finish, a client seed after the first draw, an unknown match)
    that shares a transaction with accepted ones fails alone, with its reason; the others are kept."""
    for match_id in ("gin.0.ok", "gin.0.seeded", "gin.0.finished", "gin.0.drawn"):
        await stub.Commit(pb.CommitRequest(match_id=match_id, idempotency_key="k"))
    await stub.Finish(pb.FinishRequest(match_id="gin.0.finished"))
    await stub.Draw(dice("gin.0.drawn"))
    calls = [
        stub.Draw(dice("gin.0.ok", count=1)),
        stub.Draw(dice("gin.0.finished")),
        stub.AddClientSeed(pb.AddClientSeedRequest(match_id="gin.0.seeded", seat=0, client_seed=b"seed-0")),
        stub.AddClientSeed(pb.AddClientSeedRequest(match_id="gin.0.drawn", seat=1, client_seed=b"late")),
        stub.Draw(dice("gin.0.nowhere")),
        stub.Draw(dice("gin.0.ok", count=1)),
    ]
    results = await asyncio.gather(*calls, return_exceptions=True)
    refused = {
        n: (r.code(), r.details()) for n, r in enumerate(results) if isinstance(r, grpc.aio.AioRpcError)
    }
    assert sorted(refused) == [1, 3, 4]
    assert refused[1] == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "match gin.0.finished is finished; no more draws",
    )
    assert refused[3][0] == grpc.StatusCode.FAILED_PRECONDITION
    assert "has drawn already" in str(refused[3][1])
    assert refused[4] == (grpc.StatusCode.NOT_FOUND, "match gin.0.nowhere has no commitment")
    ok = await _status(stub, "gin.0.ok")
    assert [(s.stream, s.draws_issued) for s in ok.streams] == [("dice", 2)]
    assert [(s.seat, s.seed) for s in (await _status(stub, "gin.0.seeded")).client_seeds] == [(0, b"seed-0")]
    stored = await stored_rows(database_url, "gin.0.drawn")
    assert stored["fairness_client_seeds"] == []
    assert len(stored["fairness_draws"]) == 1


async def test_a_call_after_the_store_closed_is_unavailable_and_changes_nothing(
    server: RunningServer, stub: Stub, database_url: str
) -> None:
    """Shutting down closes the store's committer: a call after that is refused UNAVAILABLE with a
    reason (the caller retries on another instance), not INTERNAL, and changes nothing."""
    await stub.Commit(pb.CommitRequest(match_id="gin.0.kept", idempotency_key="k"))
    await _store(server).close()
    calls = [
        stub.Commit(pb.CommitRequest(match_id="gin.0.late", idempotency_key="k")),
        stub.Draw(dice("gin.0.kept")),
        stub.Finish(pb.FinishRequest(match_id="gin.0.kept")),
    ]
    for call in calls:
        await _refused(call, grpc.StatusCode.UNAVAILABLE, "shutting down")
    assert (await stored_rows(database_url, "gin.0.late"))["fairness_commitments"] == []
    kept = await stored_rows(database_url, "gin.0.kept")
    assert kept["fairness_draws"] == []
    assert [row[6] for row in kept["fairness_commitments"]] == ["open"]  # state; not finished
