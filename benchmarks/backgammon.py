"""Backgammon engine figures: legal plays (the family's hottest operation) per second over positions from
random games, and the time of the worst doubles positions (the most distinct plays).

"Cold" figures clear the generator's caches before every call (the result cache of ``legal_plays`` and
the notation cache), so they are the cost of a position and roll never seen; "warm" is the same roll
listed again (the engine lists, checks and shows a roll several times).
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from functools import partial
from typing import Any

from skillclassics.backgammon.v1 import backgammon_pb2 as bg_pb2
from skillclassics.fairness.v1 import fairness_pb2
from skillclassics.rules.v1 import rules_pb2 as rules_pb

from benchmarks.support import chance_rules, concurrent_games, percentile, rss_mib
from libs.engines.backgammon import BLACK, Position, Variant, legal_plays, native
from libs.engines.backgammon.moves import _cached
from libs.engines.backgammon.notation import _canonical
from tests.libs.engines.backgammon.reference import random_game_positions

POSITIONS = 20_000
"""Positions from random games for the plays-per-second figures."""
WORST_POOL = 5_000
"""Positions from random games searched (with each of the six doubles) for the worst cases."""
WORST = 10
"""How many of the worst found are timed (with the hand-made ones)."""
REPEATS = 15
"""Each worst case is timed this many times and the best kept (the machine may be busy)."""
WARM = 4_000

SPREAD = Position.from_counts({1: 1, 2: 1, 3: 1, 4: 1, 24: 11}, {p: 1 for p in range(6, 21)})
"""Hand-made: Black's fifteen checkers one per point from 20 down to 6, nothing in the way."""


_generate = _cached.__wrapped__
"""The generator ``legal_plays`` uses: the C one when it was built (``setup.py``), else pure Python."""
GENERATOR = "C generator" if native.available else "pure Python (the C generator was not built)"


def _cold(position: Position, seat: int, dice: tuple[int, int]) -> float:
    _canonical.cache_clear()
    started = time.perf_counter()
    _generate(position, seat, max(dice), min(dice))
    return time.perf_counter() - started


def random_figures() -> list[tuple[str, str]]:
    rng = random.Random(11)
    cases = [
        (position, seat, (rng.randint(1, 6), rng.randint(1, 6)))
        for position, seat in random_game_positions(rng, POSITIONS, Position.start(Variant.STANDARD))
    ]
    timings: list[float] = []
    plays = 0
    for position, seat, dice in cases:
        timings.append(_cold(position, seat, dice))
        plays += len(_generate(position, seat, max(dice), min(dice)))
    total = sum(timings)
    doubles = [t for (_, _, dice), t in zip(cases, timings, strict=True) if dice[0] == dice[1]]
    timings.sort()
    _cached.cache_clear()
    warm_total = 0.0
    for position, seat, dice in cases[:WARM]:
        legal_plays(position, seat, dice)
        started = time.perf_counter()
        legal_plays(position, seat, dice)
        warm_total += time.perf_counter() - started
    warm = warm_total / WARM * 1e6
    mean, p50, p99 = total / len(cases), percentile(timings, 0.5), percentile(timings, 0.99)
    per_roll = plays / len(cases)
    return [
        (
            f"legal plays ({GENERATOR}), cold, {len(cases):,} positions from random games with random rolls",
            f"{len(cases) / total:,.0f} calls/s ({plays / total:,.0f} plays/s, {per_roll:.1f} plays a roll); "
            f"mean {mean * 1e6:.0f} µs, p50 {p50 * 1e6:.0f} µs, p99 {p99 * 1e6:.0f} µs, "
            f"max {timings[-1] * 1e3:.2f} ms per call",
        ),
        ("legal plays, cold, doubles only", f"mean {sum(doubles) / len(doubles) * 1e6:.0f} µs per call"),
        ("legal plays, warm (the same roll listed again)", f"{warm:.1f} µs per call"),
    ]


def worst_figures() -> list[tuple[str, str]]:
    rng = random.Random(12)
    pool = random_game_positions(rng, WORST_POOL, Position.start(Variant.STANDARD))
    counted = []
    for position, seat in pool:
        for die in range(1, 7):
            counted.append((len(_generate(position, seat, die, die)), position, seat, die))
    counted.sort(key=lambda case: -case[0])
    cases = [(position, seat, die, f"random game, {die}-{die}") for _, position, seat, die in counted[:WORST]]
    cases += [(SPREAD, BLACK, die, f"hand-made spread, {die}-{die}") for die in (1, 2)]
    figures = []
    for position, seat, die, label in cases:
        best = min(_cold(position, seat, (die, die)) for _ in range(REPEATS))
        count = len(_generate(position, seat, die, die))
        figures.append((best, count, label))
    figures.sort(key=lambda figure: -figure[1])
    what = f"worst doubles ({GENERATOR}), cold, best of {REPEATS}"
    return [
        (f"{what}: {label}", f"{count} plays in {best * 1e3:.2f} ms ({best / count * 1e6:.1f} µs per play)")
        for best, count, label in figures
    ]


def figures() -> list[tuple[str, str]]:
    """Every figure as (what, value)."""
    return random_figures() + worst_figures()


GAME_SECONDS = 3.0
"""How long the whole-game figures play random games for (per option set)."""


def engine_game_figures() -> list[tuple[str, str]]:
    """Whole random games through the engine alone: legal actions, apply (and apply_chance), a view per
    action; actions per second, dice draws counted separately."""
    from libs.engines.backgammon.engine import BACKGAMMON, BackgammonOptions
    from libs.engines.base import ActionContext

    context = ActionContext(remaining_ms=(300_000, 300_000))
    figures: list[tuple[str, str]] = []
    cases = [
        ("money game, no cube", BackgammonOptions()),
        ("money game, cube + beavers + gammons", BackgammonOptions(cube=True, beavers=True, gammons=True)),
        ("match to 5, cube", BackgammonOptions(cube=True, gammons=True, match_to=5)),
    ]
    for label, options in cases:
        rng = random.Random(7)
        actions = draws = games = 0
        started = time.perf_counter()
        while time.perf_counter() - started < GAME_SECONDS:
            state = BACKGAMMON.new_game(options)
            while BACKGAMMON.outcome(state) is None:
                request = BACKGAMMON.chance_needed(state)
                if request is not None:
                    state = BACKGAMMON.apply_chance(state, request, (rng.randint(1, 6), rng.randint(1, 6)))
                    draws += 1
                    continue
                seat = next(s for s in (0, 1) if BACKGAMMON.legal_actions(state, s))
                legal = BACKGAMMON.legal_actions(state, seat)
                calm = [a for a in legal if not a.startswith("resign") and a not in ("drop", "accept")]
                state = BACKGAMMON.apply(state, seat, rng.choice(calm or legal), context)
                BACKGAMMON.view(state, None)
                actions += 1
            games += len(state.games)
        elapsed = time.perf_counter() - started
        figures.append(
            (
                f"engine alone, whole random games, {label} (legal actions + apply + a view per action)",
                f"{actions / elapsed:,.0f} actions/s, {(actions + draws) / elapsed:,.0f} steps/s with dice "
                f"({games} games, {elapsed:.1f} s)",
            )
        )
    return figures


# ---------------------------------------------------------------------------------------------------------
# Through the service (rules-backgammon as its own process, every die from the fairness service)

SERVICE_MATCHES = 16
"""Backgammon games played at once through the service."""
MEMORY_MATCHES = 600
"""Live backgammon games held for the memory figure, each played to a typical game's length."""


def _random_action(update: Any, rng: random.Random) -> str:
    """A random legal play from the view's list; roll; continue (lobby tables: no cube)."""
    view = update.view.backgammon
    if view.phase == bg_pb2.PHASE_MOVE:
        return str(rng.choice(view.legal_plays))
    return "continue" if view.phase == bg_pb2.PHASE_BETWEEN_GAMES else "roll"


async def _mover_update(stub: Any, match_id: str) -> Any | None:
    """The update as the seat to act sees it (with its legal actions); ``None`` once the game is over."""
    while True:
        update = (await stub.GetMatch(rules_pb.GetMatchRequest(match_id=match_id, seat=0))).update
        if update.status in (rules_pb.MATCH_STATUS_FINISHED, rules_pb.MATCH_STATUS_ABORTED):
            return None
        drawing = update.view.backgammon.phase in (bg_pb2.PHASE_OPENING, bg_pb2.PHASE_ROLLING)
        if not update.HasField("to_move") or drawing:
            await asyncio.sleep(0.002)  # the dice are being drawn
            continue
        if update.to_move == 0:
            return update
        return (await stub.GetMatch(rules_pb.GetMatchRequest(match_id=match_id, seat=1))).update


async def _play_through(
    stub: Any, match_id: str, rng: random.Random, latencies: list[float], limit: int | None = None
) -> int:
    """Both seats of one game, random legal plays, until it ends (or ``limit`` actions); the actions made."""
    made = 0
    while limit is None or made < limit:
        mine = await _mover_update(stub, match_id)
        if mine is None:
            return made
        request = rules_pb.SubmitActionRequest(
            match_id=match_id,
            seat=mine.to_move,
            idempotency_key=f"a{mine.sequence}",
            action=rules_pb.Action(backgammon=bg_pb2.BackgammonAction(action=_random_action(mine, rng))),
        )
        started = time.perf_counter()
        await stub.SubmitAction(request)
        latencies.append(time.perf_counter() - started)
        made += 1
    return made


async def _new_match(stub: Any, commit: Any, label: str) -> str:
    match_id = f"backgammon.0.{label}{uuid.uuid4().hex[:8]}"
    committed = await commit(fairness_pb2.CommitRequest(match_id=match_id, idempotency_key=match_id))
    await stub.CreateMatch(
        rules_pb.CreateMatchRequest(
            match_id=match_id,
            seats=[
                rules_pb.SeatAssignment(seat=0, player_id="a"),
                rules_pb.SeatAssignment(seat=1, player_id="b"),
            ],
            options=rules_pb.MatchOptions(backgammon=bg_pb2.BackgammonOptions()),
            time_control=rules_pb.TimeControl(base_ms=30 * 60_000),
            fairness_commitment=committed.commitment,
            idempotency_key=match_id,
            disconnect_forfeit_ms=3_600_000,
        )
    )
    return match_id


async def through_service() -> list[tuple[str, str]]:
    """Whole lobby games (standard, no cube) through rules-backgammon, ``SERVICE_MATCHES`` at once, every
    roll drawn from fairness; then the memory of ``MEMORY_MATCHES`` live games at a typical length."""
    async with chance_rules("services.rules_backgammon") as service:
        stub, commit, rules, backend = service.stub, service.commit, service.rules, service.backend
        matches = [await _new_match(stub, commit, f"bench{n}") for n in range(SERVICE_MATCHES)]
        counts, elapsed, p50, p99 = await concurrent_games(
            [partial(_play_through, stub, m, random.Random(n)) for n, m in enumerate(matches)]
        )
        typical = round(sum(counts) / len(counts))
        what = (
            f"through rules-backgammon ({backend}, {SERVICE_MATCHES} whole games at once, dice from fairness)"
        )
        value = (
            f"{sum(counts) / elapsed:,.0f} actions/s (plus one or two GetMatch per action; a game "
            f"{typical} actions on average); SubmitAction p50 {p50:.1f} ms, p99 {p99:.1f} ms"
        )
        # The cost of one more live game, measured between the middle and the end of the run, so that the
        # fixed costs (the bounded legal-play caches, the service's view caches) cancel out: games that
        # ended before the limit stay in the count of games made but not of live ones (conservative).
        live, made_all = 0, 0
        middle: tuple[float, int] | None = None
        for batch in range(0, MEMORY_MATCHES, 50):
            made = await asyncio.gather(*(_new_match(stub, commit, f"mem{batch}x{n}") for n in range(50)))
            await asyncio.gather(
                *(_play_through(stub, m, random.Random(m), [], limit=typical - 2) for m in made)
            )
            live += sum([await _mover_update(stub, m) is not None for m in made])
            made_all += len(made)
            if middle is None and made_all >= MEMORY_MATCHES // 2:
                middle = (rss_mib(rules.pid), live)
        after = rss_mib(rules.pid)
        assert middle is not None
        per_match = (after - middle[0]) * 1024 / max(live - middle[1], 1)
        memory = (
            f"{after:.1f} MiB with {live:,} live games (of {made_all:,} made), each {typical - 2} actions "
            f"in: about {per_match:.0f} KiB per more live game between the middle and the end of the run "
            f"(finished games and the shared caches counted against the live ones); "
            f"{int(1024 * 1024 / max(per_match, 0.001)):,} such games per GiB"
        )
        return [(what, value), ("rules-backgammon memory", memory)]


async def run() -> None:
    for name, value in figures():
        print(f"{name}: {value}")
    for name, value in engine_game_figures():
        print(f"{name}: {value}")
    for name, value in await through_service():
        print(f"{name}: {value}")
