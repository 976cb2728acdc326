"""Gin rummy engine figures: the deadwood optimiser per hand (10 and 11 cards, random and dense hands),
the deadwood of every discard of an 11-card hand, knock scoring with lay-offs, and whole matches through
the engine alone (legal-action listing, apply, a view for each seat per action).

The optimiser figures bypass the engine's per-hand caches, so they are the cost of a hand never seen.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from skillclassics.fairness.v1 import fairness_pb2
from skillclassics.gin.v1 import gin_pb2
from skillclassics.rules.v1 import rules_pb2 as pb

from benchmarks.support import chance_rules, concurrent_games, rss_mib
from clients.families.gin import greedy_action
from libs.engines.base import ActionContext
from libs.engines.gin import CARD_TEXT, GIN, GinOptions, GinState, best_arrangement, discard_deadwood, mask_of
from libs.engines.gin.engine import _knock_reveals
from libs.engines.gin.melds import arrange_mask, deadwood_mask, discard_deadwood_mask

HANDS = 5_000
KNOCKS = 500
MATCHES = 20
CONTEXT = ActionContext(remaining_ms=(300_000, 300_000))
DENSE_POOL = [card for card in range(52) if card % 13 in range(3, 9)]
"""Ranks 4 to 9 of every suit: hands from here have many overlapping sets and runs."""


def _per_call_us(function: Callable[[int], object], masks: list[int]) -> float:
    started = time.perf_counter()
    for mask in masks:
        function(mask)
    return (time.perf_counter() - started) / len(masks) * 1e6


def _hands(rng: random.Random, size: int, pool: list[int]) -> list[int]:
    return [mask_of(rng.sample(pool, size)) for _ in range(HANDS)]


def optimiser_figures() -> list[tuple[str, str]]:
    rng = random.Random(1)
    arrange = arrange_mask.__wrapped__
    discards = discard_deadwood_mask.__wrapped__
    figures: list[tuple[str, str]] = []
    for size in (10, 11):
        random_hands = _hands(rng, size, list(range(52)))
        dense_hands = _hands(rng, size, DENSE_POOL)
        figures.append(
            (
                f"optimiser, best arrangement of {size} cards",
                f"{_per_call_us(arrange, random_hands):.0f} µs random hands, "
                f"{_per_call_us(arrange, dense_hands):.0f} µs dense hands",
            )
        )
    texts = [[CARD_TEXT[card] for card in rng.sample(range(52), 11)] for _ in range(HANDS)]
    started = time.perf_counter()
    for hand in texts:
        best_arrangement(hand)
    per_call = (time.perf_counter() - started) / len(texts) * 1e6
    figures.append(("best_arrangement() on 11 card texts, parsing included", f"{per_call:.0f} µs"))
    random_hands = _hands(rng, 11, list(range(52)))
    dense_hands = _hands(rng, 11, DENSE_POOL)
    figures.append(
        (
            "optimiser, deadwood after each of the 11 discards",
            f"{_per_call_us(discards, random_hands):.0f} µs random hands, "
            f"{_per_call_us(discards, dense_hands):.0f} µs dense hands (all 11 together)",
        )
    )
    return figures


def knock_figures() -> list[tuple[str, str]]:
    """Knock scoring: the knocker's melds chosen among the optimal arrangements, the defender's best
    lay-offs for each."""
    rng = random.Random(2)
    pairs: list[tuple[int, int]] = []
    while len(pairs) < KNOCKS:
        cards = rng.sample(DENSE_POOL, 20)
        knocker, defender = mask_of(cards[:10]), mask_of(cards[10:])
        if 0 < deadwood_mask(knocker) <= 10:
            pairs.append((knocker, defender))
    timings: list[float] = []
    for knocker, defender in pairs:
        started = time.perf_counter()
        _knock_reveals(0, (knocker, defender))
        timings.append(time.perf_counter() - started)
    timings.sort()
    mean = sum(timings) / len(timings) * 1e3
    return [
        (
            "knock scoring with lay-offs (dense hands)",
            f"mean {mean:.2f} ms, max {timings[-1] * 1e3:.2f} ms per knock",
        )
    ]


def _choose(rng: random.Random, state: GinState, seat: int) -> str:
    actions = GIN.legal_actions(state, seat)
    ends = [a for a in actions if a.startswith(("knock", "gin", "biggin"))]
    if ends:
        return rng.choice(ends)
    if actions[0].startswith("discard"):
        after = discard_deadwood(GIN.view(state, seat).hand)
        return min(actions, key=lambda a: (after[a.split()[1]], a))
    return rng.choice(actions)


def match_figures() -> list[tuple[str, str]]:
    rng = random.Random(3)
    actions = hands = 0
    started = time.perf_counter()
    for _ in range(MATCHES):
        state = GIN.new_game(GinOptions())
        while GIN.outcome(state) is None:
            request = GIN.chance_needed(state)
            if request is not None:
                permutation = list(range(52))
                rng.shuffle(permutation)
                values = (rng.randrange(2),) if request.kind == "coin" else tuple(permutation)
                state = GIN.apply_chance(state, request, values)
                continue
            seat = GIN.to_move(state)
            assert seat is not None
            state = GIN.apply(state, seat, _choose(rng, state, seat), CONTEXT)
            GIN.view(state, 0)
            GIN.view(state, 1)
            actions += 1
        hands += len(state.results)
    elapsed = time.perf_counter() - started
    return [
        (
            "engine alone, whole matches (legal actions + apply + 2 views per action)",
            f"{actions / elapsed:,.0f} actions/s ({hands} hands in {MATCHES} matches, {elapsed:.1f} s)",
        )
    ]


def figures() -> list[tuple[str, str]]:
    """Every figure as (what, value)."""
    return optimiser_figures() + knock_figures() + match_figures()


SERVICE_MATCHES = 16
"""Gin matches played at once through the service."""


async def _play_through(stub: Any, match_id: str, rng: random.Random, latencies: list[float]) -> int:
    """Both seats of one match, greedy, until it ends; returns the actions made."""
    made = 0
    while True:
        update = (await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=0))).update
        if update.status in (pb.MATCH_STATUS_FINISHED, pb.MATCH_STATUS_ABORTED):
            return made
        if not update.HasField("to_move"):
            await asyncio.sleep(0.01)  # the next deal is being drawn
            continue
        seat = update.to_move
        mine = (
            update
            if seat == 0
            else (await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=seat))).update
        )
        action = greedy_action(mine, rng)
        if action is None:
            await asyncio.sleep(0.01)
            continue
        request = pb.SubmitActionRequest(
            match_id=match_id,
            seat=seat,
            idempotency_key=f"a{mine.sequence}",
            action=pb.Action(gin=gin_pb2.GinAction(action=action)),
        )
        started = time.perf_counter()
        await stub.SubmitAction(request)
        latencies.append(time.perf_counter() - started)
        made += 1


async def _new_match(stub: Any, commit: Any, label: str) -> str:
    match_id = f"gin.0.{label}{uuid.uuid4().hex[:8]}"
    committed = await commit(fairness_pb2.CommitRequest(match_id=match_id, idempotency_key=match_id))
    await stub.CreateMatch(
        pb.CreateMatchRequest(
            match_id=match_id,
            seats=[pb.SeatAssignment(seat=0, player_id="a"), pb.SeatAssignment(seat=1, player_id="b")],
            options=pb.MatchOptions(gin=gin_pb2.GinOptions()),
            time_control=pb.TimeControl(base_ms=30 * 60_000),
            fairness_commitment=committed.commitment,
            idempotency_key=match_id,
            disconnect_forfeit_ms=3_600_000,
        )
    )
    return match_id


async def _first_actions(stub: Any, match_id: str, actions: int) -> None:
    """A few greedy actions, so that the match holds a dealt hand and some history."""
    rng = random.Random(match_id)
    for _ in range(actions):
        update = (await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=0))).update
        if not update.HasField("to_move"):
            await asyncio.sleep(0.01)
            continue
        seat = update.to_move
        mine = (await stub.GetMatch(pb.GetMatchRequest(match_id=match_id, seat=seat))).update
        action = greedy_action(mine, rng) or "stock"
        await stub.SubmitAction(
            pb.SubmitActionRequest(
                match_id=match_id,
                seat=seat,
                idempotency_key=f"a{mine.sequence}",
                action=pb.Action(gin=gin_pb2.GinAction(action=action)),
            )
        )


MEMORY_MATCHES = 1_000
"""Live gin matches held for the memory figure."""


async def through_service() -> list[tuple[str, str]]:
    """Whole best-of-five matches through rules-gin (and fairness for every deal), each its own process."""
    async with chance_rules("services.rules_gin") as service:
        stub, commit, rules, backend = service.stub, service.commit, service.rules, service.backend
        matches = [await _new_match(stub, commit, f"bench{n}") for n in range(SERVICE_MATCHES)]
        counts, elapsed, p50, p99 = await concurrent_games(
            [partial(_play_through, stub, m, random.Random(n)) for n, m in enumerate(matches)]
        )
        what = f"through rules-gin ({backend}, {SERVICE_MATCHES} whole matches at once, deals from fairness)"
        value = (
            f"{sum(counts) / elapsed:,.0f} actions/s (plus a GetMatch per action); "
            f"SubmitAction p50 {p50:.1f} ms, p99 {p99:.1f} ms"
        )
        before = rss_mib(rules.pid)
        extra: list[str] = []
        for batch in range(0, MEMORY_MATCHES, 50):
            made = await asyncio.gather(*(_new_match(stub, commit, f"mem{batch}x{n}") for n in range(50)))
            await asyncio.gather(*(_first_actions(stub, m, 6) for m in made))
            extra += made
        after = rss_mib(rules.pid)
        per_match = (after - before) * 1024 / len(extra)
        memory = (
            f"{after:.1f} MiB with {len(extra):,} live matches more (about {per_match:.0f} KiB per live "
            f"match after 6 actions; {int(1024 * 1024 / max(per_match, 0.001)):,} such matches per GiB)"
        )
        return [(what, value), ("rules-gin memory", memory)]


async def run() -> None:
    for name, value in figures():
        print(f"{name}: {value}")
    for name, value in await through_service():
        print(f"{name}: {value}")
