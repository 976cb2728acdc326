"""The gin rummy rules service over real gRPC on localhost, with the fairness service, on SQLite and
PostgreSQL: whole matches, hidden information, and deals audited against the revealed fairness proof."""

from __future__ import annotations

import asyncio
import base64
import random
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc
from skillclassics.gin.v1 import gin_pb2
from skillclassics.rules.v1 import rules_pb2 as pb
from skillclassics.rules.v1 import rules_pb2_grpc

from clients.families.gin import greedy_action
from libs.fairness import Proof, verify
from libs.runtime import RunningServer
from services.fairness.service import FairnessService
from services.rules_gin.service import gin_rules_service
from tests.support import backend_channel, start_in_process

Stub = rules_pb2_grpc.RulesServiceStub
SEED_KEY = base64.b64encode(bytes(range(32))).decode()
RANKS = "A23456789TJQK"
SUITS = "CDHS"
SEATS = [pb.SeatAssignment(seat=0, player_id="ann"), pb.SeatAssignment(seat=1, player_id="ben")]
DECK = [rank + suit for suit in SUITS for rank in RANKS]  # deck index = suit * 13 + rank - 1


@dataclass
class Stack:
    fairness: RunningServer
    rules: RunningServer


@pytest.fixture
async def stack(database_url: str, tmp_path: Path) -> AsyncIterator[Stack]:
    fairness = await start_in_process(
        "fairness", FairnessService, database_url, {"FAIRNESS_SEED_KEY": SEED_KEY}, DATA_DIR=str(tmp_path)
    )
    rules = await start_in_process(
        "rules-gin", gin_rules_service, database_url, {"FAIRNESS_ADDRESS": fairness.address}
    )
    running = Stack(fairness, rules)
    yield running
    await running.rules.stop(grace=0.5)  # (a test may have restarted it)
    await fairness.stop(grace=0.5)


async def create(stack: Stack, variant: gin_pb2.Variant.ValueType = gin_pb2.VARIANT_STANDARD) -> str:
    match_id = f"gin.0.{uuid.uuid4().hex[:12]}"
    async with backend_channel(stack.fairness.address, "matchmaking") as channel:
        commitment = await fairness_pb2_grpc.FairnessServiceStub(channel).Commit(
            fairness_pb2.CommitRequest(match_id=match_id, idempotency_key=match_id)
        )
    async with backend_channel(stack.rules.address, "matchmaking") as channel:
        await Stub(channel).CreateMatch(
            pb.CreateMatchRequest(
                match_id=match_id,
                seats=SEATS,
                options=pb.MatchOptions(gin=gin_pb2.GinOptions(variant=variant)),
                time_control=pb.TimeControl(base_ms=30 * 60_000),
                fairness_commitment=commitment.commitment,
                idempotency_key=f"create-{match_id}",
            )
        )
    return match_id


def act(match_id: str, seat: int, text: str) -> pb.SubmitActionRequest:
    return pb.SubmitActionRequest(
        match_id=match_id,
        seat=seat,
        idempotency_key=uuid.uuid4().hex,
        action=pb.Action(gin=gin_pb2.GinAction(action=text)),
    )


def greedy(update: pb.MatchUpdate) -> str:
    """The command line's greedy bot (deterministic here): gin or knock whenever allowed, else draw
    and throw the card that leaves the least deadwood; a quick player that ends hands."""
    action = greedy_action(update, random.Random(update.sequence))
    assert action is not None, "the player to move always has a legal action"
    return action


async def test_a_gin_match_needs_a_fairness_commitment(stack: Stack) -> None:
    async with backend_channel(stack.rules.address, "matchmaking") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await Stub(channel).CreateMatch(
                pb.CreateMatchRequest(
                    match_id="gin.0.nocommit",
                    seats=SEATS,
                    options=pb.MatchOptions(gin=gin_pb2.GinOptions()),
                    time_control=pb.TimeControl(base_ms=60_000),
                    idempotency_key="k",
                )
            )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "fairness_commitment" in (refused.value.details() or "")


async def test_a_whole_match_is_dealt_from_the_fairness_stream_and_never_leaks_a_hand(stack: Stack) -> None:
    match_id = await create(stack)
    seen: dict[int, list[pb.MatchUpdate]] = {0: [], 1: []}
    async with backend_channel(stack.rules.address, "gateway") as channel:  # playing for both seats
        stub = Stub(channel)
        state = await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=0))
        update = state.update
        for _ in range(5000):
            if update.status in (pb.MATCH_STATUS_FINISHED, pb.MATCH_STATUS_ABORTED):
                break
            mover = update.to_move
            mine = (await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=mover))).update
            reply = await stub.SubmitAction(act(match_id, mover, greedy(mine)))
            update = reply.update
        assert update.status == pb.MATCH_STATUS_FINISHED
        assert update.result.termination == pb.TERMINATION_HANDS_WON
        for seat in (0, 1):
            call = stub.Watch(pb.WatchRequest(match_id=match_id, seat=seat))
            seen[seat] = [response.update async for response in call]
        spectator = [r.update async for r in stub.Watch(pb.WatchRequest(match_id=match_id, spectator=True))]

    final = seen[0][-1].view.gin
    winner = update.result.winner
    assert final.hand_wins[winner] == final.hands_to_win == 3
    assert sum(1 for h in final.hands if h.end != gin_pb2.HAND_END_VOID and h.winner == winner) == 3
    # Every update of the log reached both seats, in order, once.
    assert [u.sequence for u in seen[0]] == list(range(1, update.sequence + 1))
    assert [u.sequence for u in seen[1]] == [u.sequence for u in seen[0]]

    # Hidden information: while a hand is being played, a seat's update shows none of the other seat's
    # cards except those it took from the discard pile (public), and no stock card at all.
    for viewer in (0, 1):
        other = 1 - viewer
        for mine, theirs in zip(seen[viewer], seen[other], strict=True):
            view, hidden_view = mine.view.gin, theirs.view.gin
            if view.phase not in (gin_pb2.PHASE_UPCARD_OFFER, gin_pb2.PHASE_DRAW, gin_pb2.PHASE_DISCARD):
                continue
            public = {c for s in view.seats if s.seat == other for c in s.known_cards}
            their_secret = set(hidden_view.hand) - public
            stock = set(DECK) - set(view.hand) - set(hidden_view.hand) - set(view.discard_pile)
            shown = _current_hand_cards(view)
            assert not shown & their_secret, f"seat {viewer} saw {shown & their_secret} at {mine.sequence}"
            assert not shown & stock, f"seat {viewer} saw stock cards at {mine.sequence}"
    for update_ in spectator:
        assert not update_.view.gin.hand
        assert not update_.view.gin.melds

    # The deals are the fairness stream's: the revealed proof verifies, and each hand's cards as
    # dealt are recomputed from its shuffle (docs/gin.md: the non-dealer gets cards 0, 2, ..., 18).
    async with backend_channel(stack.fairness.address, "gateway") as channel:  # as for a player's proof
        fairness = fairness_pb2_grpc.FairnessServiceStub(channel)
        for _ in range(50):
            try:
                revealed = await fairness.Reveal(fairness_pb2.RevealRequest(match_id=match_id))
                break
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.1)  # the result reaches fairness through the outbox
        else:
            pytest.fail("the fairness stream was never finished")
    proof = Proof.from_json(revealed.proof_json)
    assert verify(proof).ok
    shuffles = sorted((d for d in proof.draws if d.stream == "shuffle"), key=lambda d: d.index)
    dealers = [d for d in proof.draws if d.stream == "dealer"]
    assert len(dealers) == 1
    assert len(shuffles) == len(final.hands)  # one shuffle per deal, void hands included
    first_dealer = dealers[0].values[0]
    for hand, shuffle in zip(final.hands, shuffles, strict=True):
        deck = [DECK[i] for i in shuffle.values]
        dealer = hand.dealer
        non_dealer_cards, dealer_cards = set(deck[0:20:2]), set(deck[1:20:2])
        assert hand.upcard == deck[20]
        if hand.hand_number == 1:
            assert dealer == first_dealer
        for reveal in hand.hands:
            dealt = non_dealer_cards if reveal.seat != dealer else dealer_cards
            # The final hand holds dealt cards not yet thrown plus cards drawn later: never a card the
            # other seat was dealt unless it went through the discard pile.
            big = hand.end in (gin_pb2.HAND_END_BIG_GIN, gin_pb2.HAND_END_VOID)
            assert len(reveal.cards) == 10 or big
            other_dealt = dealer_cards if dealt is non_dealer_cards else non_dealer_cards
            assert dealt | other_dealt | set(deck[20:]) >= set(reveal.cards)


def _current_hand_cards(view: gin_pb2.GinView) -> set[str]:
    cards = set(view.hand) | set(view.deadwood) | set(view.discard_pile)
    cards |= {c for meld in view.melds for c in meld.cards}
    cards |= {c for seat in view.seats for c in seat.known_cards}
    if view.taken_from_discard:
        cards.add(view.taken_from_discard)
    return cards


async def test_illegal_and_malformed_actions_get_readable_statuses(stack: Stack) -> None:
    match_id = await create(stack)
    async with backend_channel(stack.rules.address, "gateway") as channel:  # playing for both seats
        stub = Stub(channel)
        update = (await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=0))).update
        mover = update.to_move
        with pytest.raises(grpc.aio.AioRpcError) as out_of_turn:
            await stub.SubmitAction(act(match_id, 1 - mover, "pass"))
        assert out_of_turn.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(grpc.aio.AioRpcError) as nonsense:
            await stub.SubmitAction(act(match_id, mover, "discard 1Z"))
        assert nonsense.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as wrong_family:
            await stub.SubmitAction(
                pb.SubmitActionRequest(match_id=match_id, seat=mover, idempotency_key="c", action=pb.Action())
            )
        assert wrong_family.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # Resigning is every family's: the other seat wins at once.
        resigned = await stub.SubmitAction(
            pb.SubmitActionRequest(
                match_id=match_id, seat=mover, idempotency_key="r", action=pb.Action(resign=pb.Resign())
            )
        )
        assert resigned.update.result.termination == pb.TERMINATION_RESIGNATION
        assert resigned.update.result.winner == 1 - mover


async def test_a_restart_replays_the_deal_from_the_log_and_draws_nothing_again(
    database_url: str, stack: Stack
) -> None:
    match_id = await create(stack)
    async with backend_channel(stack.rules.address, "gateway") as channel:  # playing for both seats
        stub = Stub(channel)
        for _ in range(6):
            update = (await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=0))).update
            mine = (await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=update.to_move))).update
            await stub.SubmitAction(act(match_id, update.to_move, greedy(mine)))
        before = {
            s: (await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=s))).update for s in (0, 1)
        }
    issued_before = await _draws_issued(stack, match_id)
    assert issued_before["dealer"] == 1
    assert issued_before["shuffle"] >= 1  # (a quick knock may already have led to a second deal)
    await stack.rules.stop(grace=0)
    stack.rules = await start_in_process(
        "rules-gin", gin_rules_service, database_url, {"FAIRNESS_ADDRESS": stack.fairness.address}
    )
    async with backend_channel(stack.rules.address, "gateway") as channel:  # playing for both seats
        stub = Stub(channel)
        for seat in (0, 1):
            after = (await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=seat))).update
            # One more event: play resumed after the restart (its downtime charged to nobody).
            assert (after.sequence, after.event.kind) == (before[seat].sequence + 1, "resumed")
            assert after.view.gin.hand == before[seat].view.gin.hand
            assert after.view.gin.discard_pile == before[seat].view.gin.discard_pile
    assert await _draws_issued(stack, match_id) == issued_before  # replayed from the log, not redrawn


async def _draws_issued(stack: Stack, match_id: str) -> dict[str, int]:
    async with backend_channel(stack.fairness.address, "operator") as channel:
        progress = await fairness_pb2_grpc.FairnessServiceStub(channel).GetCommitment(
            fairness_pb2.GetCommitmentRequest(match_id=match_id)
        )
    return {s.stream: s.draws_issued for s in progress.streams}


async def test_every_watch_starts_with_the_commitment_and_the_record_lists_the_draws(stack: Stack) -> None:
    match_id = await create(stack)  # no seed window: dealt at once
    async with backend_channel(stack.fairness.address, "operator") as channel:
        commitment = (
            await fairness_pb2_grpc.FairnessServiceStub(channel).GetCommitment(
                fairness_pb2.GetCommitmentRequest(match_id=match_id)
            )
        ).commitment
    async with backend_channel(stack.rules.address, "gateway") as channel:
        stub = Stub(channel)

        async def first_updates(from_sequence: int, count: int) -> list[pb.MatchUpdate]:
            watch = stub.Watch(pb.WatchRequest(match_id=match_id, seat=0, from_sequence=from_sequence))
            try:
                async with asyncio.timeout(5):
                    return [(await watch.read()).update for _ in range(count)]
            finally:
                watch.cancel()

        dealt = await first_updates(0, 3)  # created, the dealer, the first shuffle
        assert [u.event.kind for u in dealt] == ["created", "chance", "chance"]
        assert [(u.fairness_commitment, u.fairness_version) for u in dealt] == [
            (commitment, 1),
            ("", 0),
            ("", 0),
        ]
        assert [(u.event.draw.stream, u.event.draw.index, list(u.event.draw.values)) for u in dealt[1:]] == [
            ("dealer", 0, []),
            ("shuffle", 0, []),
        ]
        resumed = await first_updates(2, 1)  # a watch from a later sequence starts with it all the same
        assert resumed[0].sequence == 3
        assert (resumed[0].fairness_commitment, resumed[0].fairness_version) == (commitment, 1)
        await stub.SubmitAction(
            pb.SubmitActionRequest(
                match_id=match_id, seat=1, idempotency_key="resign", action=pb.Action(resign=pb.Resign())
            )
        )
        record = await stub.GetRecord(pb.GetRecordRequest(match_id=match_id))
    assert (record.fairness_commitment, record.fairness_version) == (commitment, 1)
    assert [(d.stream, d.index, d.kind, d.count, d.bound) for d in record.fairness_draws] == [
        ("dealer", 0, "coin", 1, 0),
        ("shuffle", 0, "shuffle", 1, 52),
    ]
    assert sorted(record.fairness_draws[1].values) == list(range(52))

    async with backend_channel(stack.rules.address, "matchmaking") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await Stub(channel).CreateMatch(
                pb.CreateMatchRequest(
                    match_id="gin.0.version2",
                    seats=SEATS,
                    options=pb.MatchOptions(gin=gin_pb2.GinOptions()),
                    time_control=pb.TimeControl(base_ms=60_000),
                    fairness_commitment=commitment,
                    fairness_version=2,
                    idempotency_key="v2",
                )
            )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "fairness_version 2 is not the version this service draws with (1)" in (
        refused.value.details() or ""
    )
