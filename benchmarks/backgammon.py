"""Backgammon engine figures: legal plays (the family's hottest operation) per second over positions from
random games, and the time of the worst doubles positions (the most distinct plays).

"Cold" figures clear the generator's caches before every call (the result cache of ``legal_plays`` and
the notation cache), so they are the cost of a position and roll never seen; "warm" is the same roll
listed again (the engine lists, checks and shows a roll several times).
"""

from __future__ import annotations

import random
import time

from benchmarks.support import percentile
from libs.engines.backgammon import BLACK, Position, Variant, legal_plays
from libs.engines.backgammon.moves import _cached, _generate
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
            f"legal plays, cold, {len(cases):,} positions from random games with random rolls",
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
    what = f"worst doubles, cold, best of {REPEATS}"
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


async def run() -> None:
    for name, value in figures():
        print(f"{name}: {value}")
    for name, value in engine_game_figures():
        print(f"{name}: {value}")
