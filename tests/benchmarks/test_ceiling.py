"""``benchmarks/ceiling.py`` run with a few matches for a moment, so that it keeps working (the figure
comes from ``make bench``)."""

from __future__ import annotations

import pytest

from benchmarks.ceiling import SHAPES, Window, ceiling_rate

pytestmark = pytest.mark.long  # a benchmark run small: `make test-long`


@pytest.mark.parametrize("shape", SHAPES)
async def test_the_ceiling_benchmark_plays_actions_through_both_relays(shape: str) -> None:
    rate = await ceiling_rate(matches=3, seconds=0.5, warm_up_s=0.2, shape=shape)
    assert rate > 0


async def test_the_paced_relay_times_each_action_to_the_opponent_in_its_window() -> None:
    window = Window()
    rate = await ceiling_rate(
        # Long enough for the relays' first stream to open on a busy machine (a 0.2 s warm-up and a 0.6 s
        # window once saw no action at all in CI).
        matches=4,
        seconds=1.5,
        warm_up_s=1.0,
        shape="streamed",
        think_ms=20,
        window=window,
    )
    # Four matches, each mover thinking 15-25 ms: at most 4 / 0.015 actions per second, and at least one.
    assert 0 < rate < 4 / 0.015
    assert len(window.to_opponent) >= 1
    assert all(0 < latency < 5 for latency in window.to_opponent)
    assert window.busy_cores > 0
