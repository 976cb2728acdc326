"""The pure parts of ``benchmarks/platform_load.py`` (the benchmark itself runs with ``make bench``)."""

from __future__ import annotations

import asyncio

import pytest

from benchmarks.platform_load import (
    MINUTES,
    Gate,
    Settings,
    WindowMetrics,
    slowed_think_ms,
    split_mix,
)


def test_the_mix_is_scaled_to_the_number_of_matches() -> None:
    plans = split_mix("chess=3,gin=2", 500)
    assert [(plan.name, plan.concurrency) for plan in plans] == [("chess", 300), ("gin", 200)]
    assert all(plan.minutes == MINUTES for plan in plans)
    odd = split_mix("chess=1,gin=1", 3)
    assert sum(plan.concurrency for plan in odd) == 3
    assert min(plan.concurrency for plan in odd) == 1
    assert [plan.concurrency for plan in split_mix("chess=99,gin=1", 2)] == [1, 1]
    with pytest.raises(ValueError, match="cannot cover"):
        split_mix("chess=1,gin=1", 1)


def test_half_rate_think_time_doubles_each_matchs_cycle() -> None:
    # 500 matches at 250 actions/s: a move every 2 s per match; half the rate: every 4 s.
    assert slowed_think_ms(500, 250.0, unloaded_cycle_ms=15.0) == pytest.approx(3985.0)
    # a quarter of the rate: every 8 s
    assert slowed_think_ms(500, 250.0, 0.25, unloaded_cycle_ms=15.0) == pytest.approx(7985.0)
    assert slowed_think_ms(1, 1e9) == 0.0
    with pytest.raises(ValueError, match="above 0"):
        slowed_think_ms(500, 0.0)
    with pytest.raises(ValueError, match="share"):
        slowed_think_ms(500, 250.0, 0.0)


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLATFORM_LOAD_MATCHES", "20")
    monkeypatch.setenv("PLATFORM_LOAD_SECONDS", "12")
    monkeypatch.setenv("PLATFORM_LOAD_MIX", "gin=1")
    monkeypatch.setenv("PLATFORM_LOAD_SLOW_SHARE", "0.3")
    settings = Settings.from_env()
    assert (settings.matches, settings.seconds, settings.slow_share) == (20, 12.0, 0.3)
    assert [(plan.name, plan.concurrency) for plan in settings.plans()] == [("gin", 20)]
    monkeypatch.setenv("PLATFORM_LOAD_MATCHES", "many")
    with pytest.raises(ValueError, match="PLATFORM_LOAD_MATCHES"):
        Settings.from_env()


async def test_the_gate_holds_moves_until_opened() -> None:
    gate = Gate()
    waiting = asyncio.ensure_future(gate.wait())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    gate.open(stagger_s=0.0)
    await asyncio.wait_for(waiting, 1)
    await asyncio.wait_for(gate.wait(), 1)  # open: at once


def test_window_metrics_keep_only_the_window() -> None:
    metrics = WindowMetrics(["chess"])
    metrics.latency("chess", "submit_action", 5_000_000)
    metrics.window = {}
    metrics.latency("chess", "submit_action", 7_000_000)
    metrics.latency("chess", "match_setup", 9_000_000)
    window = metrics.window
    assert list(window) == [("chess", "submit_action")]
    assert window[("chess", "submit_action")].total == 1
    assert metrics.families["chess"].latency["submit_action"].total == 2
