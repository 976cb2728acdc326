"""``benchmarks/matchmaking.py`` run with a handful of players, so that it keeps working (the figures
come from ``make bench``)."""

from __future__ import annotations

import pytest

from benchmarks.matchmaking import run

pytestmark = pytest.mark.long  # a benchmark run small: `make test-long`


async def test_the_matchmaking_benchmark_runs_end_to_end_with_a_few_players() -> None:
    figures = await run(queued=12, arrivals=8, tables=2, lobby_pairs=4)
    assert figures.backlog_pairs == 6
    assert 0 < figures.backlog_pairing_s <= figures.backlog_start_to_paired_s
    assert figures.backlog_pairings_per_s > 0
    assert set(figures.join_to_told_p99) == {1, 20}
    assert all(p99 > 0 for p99 in figures.join_to_told_p99.values())
    assert figures.lobby_pairs == 4
    assert figures.lobby_calls_per_s > 0
    assert figures.arrivals_entered_s > 0
    assert figures.arrivals_all_paired_s > 0
    assert figures.arrivals_most_waiting <= 8
    assert figures.pairing_alone_per_s > 0
