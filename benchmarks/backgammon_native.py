"""The C legal-play generator (``libs/engines/backgammon/_native.c``) against the pure-Python one on the
worst doubles positions: the same cases as ``benchmarks/backgammon.py``'s ``worst_figures`` (the 10 with
the most plays among 5,000 positions from random games with each double, plus the hand-made SPREAD with
1-1 and 2-2), cold, best of 15.

Per case: the Python generator (``moves._generate``, its notation cache cleared before every call), and
through ``native``: (a) the C call alone (``raw_plays``: search, notation, sort, one (notation, steps,
board) entry per play), (b) ``generate`` (the finished ``Play`` objects, built in C), (c) ``decode`` of
the entries (the same ``Play`` objects built in Python), (d) the entries plus one lazy object per play (a
prototype of a lazy ``Play``: what listing the plays would cost if moves and result were only made on
first access).

Run: ``.venv/bin/python -m benchmarks.backgammon_native`` (after ``setup.py build_ext --inplace``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from benchmarks.backgammon import REPEATS, SPREAD, WORST, WORST_POOL
from libs.engines.backgammon import BLACK, Play, Position, Variant, native
from libs.engines.backgammon.moves import _generate
from libs.engines.backgammon.notation import _canonical
from tests.libs.engines.backgammon.reference import random_game_positions


class _LazyPlay:
    """A prototype lazy play: the notation and the C entry; moves and result would be decoded on first
    access (not needed for the figure: only the cost of making one per play)."""

    __slots__ = ("_entry", "_origin", "notation")

    def __init__(self, entry: native.Entry, origin: tuple[Position, int]) -> None:
        self.notation = entry[0]
        self._entry = entry
        self._origin = origin


def _lazy(position: Position, seat: int, die: int) -> tuple[_LazyPlay, ...]:
    origin = (position, seat)
    return tuple([_LazyPlay(entry, origin) for entry in native.raw_plays(position, seat, die, die)])


def _decoded(position: Position, seat: int, die: int) -> tuple[Play, ...]:
    return native.decode(position, seat, native.raw_plays(position, seat, die, die))


def _best(call: Callable[[], Any]) -> float:
    timings = []
    for _ in range(REPEATS):
        _canonical.cache_clear()
        started = time.perf_counter()
        call()
        timings.append(time.perf_counter() - started)
    return min(timings)


def worst_cases() -> list[tuple[Position, int, int, str]]:
    """(position, seat, die, label): ``worst_figures``'s cases."""
    rng = random.Random(12)
    pool = random_game_positions(rng, WORST_POOL, Position.start(Variant.STANDARD))
    counted = []
    for position, seat in pool:
        for die in range(1, 7):
            counted.append((len(_generate(position, seat, die, die)), position, seat, die))
    counted.sort(key=lambda case: -case[0])
    cases = [(position, seat, die, f"random game, {die}-{die}") for _, position, seat, die in counted[:WORST]]
    cases += [(SPREAD, BLACK, die, f"hand-made spread, {die}-{die}") for die in (1, 2)]
    return cases


def native_figures() -> list[tuple[str, str]]:
    """Every figure as (what, value), the case with the most plays first."""
    if not native.available:
        return [("C generator", "not built: .venv/bin/python setup.py build_ext --inplace")]
    figures = []
    for position, seat, die, label in worst_cases():
        count = len(_generate(position, seat, die, die))
        assert native.generate(position, seat, die, die) == _generate(position, seat, die, die)
        python = _best(partial(_generate, position, seat, die, die))
        alone = _best(partial(native.raw_plays, position, seat, die, die))
        objects = _best(partial(native.generate, position, seat, die, die))
        decoded = _best(partial(_decoded, position, seat, die))
        lazy = _best(partial(_lazy, position, seat, die))
        figures.append((count, label, python, alone, objects, decoded, lazy))
    figures.sort(key=lambda figure: -figure[0])

    def cell(seconds: float, count: int) -> str:
        return f"{seconds * 1e3:.3f} ms ({seconds / count * 1e6:.2f} µs/play)"

    return [
        (
            f"worst doubles, cold, best of {REPEATS}: {label}, {count} plays",
            f"Python {cell(python, count)}; C alone {cell(alone, count)}; C + Play objects built in C "
            f"{cell(objects, count)}; C + Play objects built in Python {cell(decoded, count)}; "
            f"C + lazy plays (prototype) {cell(lazy, count)}; "
            f"speed-up with Play objects {python / objects:.1f}x",
        )
        for count, label, python, alone, objects, decoded, lazy in figures
    ]


async def run() -> None:
    for name, value in native_figures():
        print(f"{name}: {value}")


if __name__ == "__main__":
    for name, value in native_figures():
        print(f"{name}: {value}")
