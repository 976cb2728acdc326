"""``benchmarks/ceiling.py`` run with a few matches for a moment, so that it keeps working (the figure
comes from ``make bench``)."""

from __future__ import annotations

from benchmarks.ceiling import ceiling_rate


async def test_the_ceiling_benchmark_plays_actions_through_both_relays() -> None:
    rate = await ceiling_rate(matches=3, seconds=0.5, warm_up_s=0.2)
    assert rate > 0
