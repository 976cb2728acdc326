"""``benchmarks/ceiling.py`` run with a few matches for a moment, so that it keeps working (the figure
comes from ``make bench``)."""

from __future__ import annotations

import pytest

from benchmarks.ceiling import SHAPES, ceiling_rate


@pytest.mark.parametrize("shape", SHAPES)
async def test_the_ceiling_benchmark_plays_actions_through_both_relays(shape: str) -> None:
    rate = await ceiling_rate(matches=3, seconds=0.5, warm_up_s=0.2, shape=shape)
    assert rate > 0
