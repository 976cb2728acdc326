"""The load-testing harness: the histogram, the report, the options, ``/proc`` readings, and runs against
a real stack (fairness, clock, rules-chess, rules-gin, matchmaking, gateway as processes, started once
for the module with the launcher, the rate limits raised as docs/load-testing.md says)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import random
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from hypothesis import given, settings
from hypothesis import strategies as st
from skillclassics.rules.v1 import rules_pb2

from clients.load.cli import (
    UsageError,
    bridge_arguments,
    build_parser,
    config_from_args,
    families_argument,
    run_command,
)
from clients.load.harness import (
    Engine,
    FamilyPlan,
    LoadConfig,
    LoadRun,
    Metrics,
    RunResult,
    TokenMinter,
    _WeightedRoundRobin,
    arrival_time,
    error_label,
    parse_families,
    run_load,
)
from clients.load.histogram import Histogram
from clients.load.procstat import (
    ProcessMonitor,
    ServiceUsage,
    discover_services,
    parse_services,
    read_sample,
)
from clients.load.report import (
    SCHEMA,
    build_report,
    histograms_of,
    latency_summary,
    render_table,
    write_json,
    write_png,
)
from clients.player import GatewayError, PlayerSession, exhausted_wait_s
from libs.launcher import Stack, StartError, available_services
from libs.runtime.errors import Problem
from services.gateway.tokens import SigningKey, write_development_key
from tests.support import ROOT, stack_port_offset

SIGNING_KEY = SigningKey.generate()
"""The development signing key the stack's gateway trusts (written into its data folder before it starts)."""
STACK_SERVICES = (
    "fairness",
    "clock",
    "rules-chess",
    "rules-gin",
    "rules-go",
    "rules-generals",
    "matchmaking",
    "gateway",
)

try:
    import matplotlib  # noqa: F401

    HAVE_MATPLOTLIB = True
except ImportError:
    HAVE_MATPLOTLIB = False


# -- the histogram ---------------------------------------------------------------------------------------


def true_percentile(ordered: list[int], percentile: float) -> int:
    """The sample of rank ceil(p/100 * n) (at least 1) of sorted samples."""
    rank = max(1, math.ceil(percentile / 100 * len(ordered) - 1e-9))
    return ordered[rank - 1]


def assert_within_precision(histogram: Histogram, ordered: list[int], percentile: float) -> None:
    expected = true_percentile(ordered, percentile)
    low, high = histogram.equivalent_range(expected)
    reported = histogram.value_at_percentile(percentile)
    assert expected <= reported <= min(high, ordered[-1]), (percentile, expected, reported, low, high)
    assert (reported - expected) <= expected * histogram.relative_precision + 1


def test_small_values_are_exact() -> None:
    histogram = Histogram()
    for value in range(1, 1001):
        histogram.record(value)
    assert histogram.total == 1000
    assert histogram.minimum == 1
    assert histogram.maximum == 1000
    assert histogram.value_at_percentile(50) == 500
    assert histogram.value_at_percentile(99) == 990
    assert histogram.value_at_percentile(99.9) == 999
    assert histogram.value_at_percentile(100) == 1000
    assert histogram.mean == pytest.approx(500.5)


@pytest.mark.parametrize("figures", [2, 3])
def test_percentiles_match_sorted_samples_within_the_bucket_precision(figures: int) -> None:
    rng = random.Random(figures)
    samples = [int(math.exp(rng.uniform(0, math.log(5_000_000)))) for _ in range(20_000)]
    histogram = Histogram(significant_figures=figures)
    for value in samples:
        histogram.record(value)
    ordered = sorted(samples)
    assert histogram.relative_precision <= (0.01 if figures == 2 else 0.001)
    for percentile in (0.0, 1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0):
        assert_within_precision(histogram, ordered, percentile)
    many = histogram.percentiles((50.0, 90.0, 99.0, 99.9))
    assert many == {p: histogram.value_at_percentile(p) for p in (50.0, 90.0, 99.0, 99.9)}
    assert histogram.maximum == ordered[-1]
    assert histogram.minimum == ordered[0]
    assert histogram.total_value == sum(samples)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=10**9), min_size=1, max_size=300),
    st.floats(min_value=0, max_value=100),
)
def test_any_percentile_is_within_precision(samples: list[int], percentile: float) -> None:
    histogram = Histogram()
    for value in samples:
        histogram.record(value)
    assert_within_precision(histogram, sorted(samples), percentile)


def test_merging_equals_recording_everything_in_one() -> None:
    rng = random.Random(7)
    samples = [rng.randrange(1, 2_000_000) for _ in range(5_000)]
    whole, left, right = Histogram(), Histogram(), Histogram()
    for index, value in enumerate(samples):
        whole.record(value)
        (left if index % 3 else right).record(value)
    merged = left.copy()
    merged.merge(right)
    assert merged.to_dict() == whole.to_dict()
    wanted = (50.0, 90.0, 99.0, 99.9, 100.0)
    assert merged.percentiles(wanted) == whole.percentiles(wanted)
    empty = Histogram()
    empty.merge(Histogram())
    assert empty.total == 0
    empty.merge(whole)
    assert empty.to_dict() == whole.to_dict()


def test_merging_different_settings_is_refused() -> None:
    with pytest.raises(ValueError, match="different settings"):
        Histogram(significant_figures=2).merge(Histogram(significant_figures=3))


def test_memory_is_constant_and_big_values_are_clamped() -> None:
    histogram = Histogram(highest=1_000_000)
    size = histogram.memory_bytes
    for value in range(0, 5_000_000, 37):
        histogram.record(value)
    assert histogram.memory_bytes == size
    assert histogram.clamped > 0
    assert histogram.maximum == 4_999_995  # exact, although counted at the highest bucket
    assert histogram.value_at_percentile(100) == histogram.maximum
    assert Histogram().memory_bytes < 256 * 1024


def test_round_trip_through_json() -> None:
    histogram = Histogram()
    for value in (1, 5, 5, 900, 123_456, 7_000_000):
        histogram.record(value)
    again = Histogram.from_dict(json.loads(json.dumps(histogram.to_dict())))
    assert again.to_dict() == histogram.to_dict()
    assert again.percentiles((50.0, 99.0)) == histogram.percentiles((50.0, 99.0))
    broken = histogram.to_dict()
    broken["total"] += 1
    with pytest.raises(ValueError, match="add up"):
        Histogram.from_dict(broken)


def test_distribution_for_the_plot() -> None:
    histogram = Histogram()
    assert histogram.distribution() == []
    for value in range(1, 10_001):
        histogram.record(value * 10)
    points = histogram.distribution()
    percentiles = [p for p, _ in points]
    values = [v for _, v in points]
    assert percentiles[0] == 0.0
    assert percentiles == sorted(percentiles)
    assert values == sorted(values)
    assert points[-1] == (100.0, 100_000)
    assert any(99.9 <= p < 100 for p in percentiles)  # dense towards the tail
    assert len(points) < 200


def test_recording_nothing_and_reset() -> None:
    histogram = Histogram()
    assert histogram.value_at_percentile(99) == 0
    assert histogram.percentiles((50.0,)) == {50.0: 0}
    histogram.record(-5)  # counted as 0
    histogram.record(10, count=0)  # nothing
    assert histogram.total == 1
    assert histogram.maximum == 0
    histogram.reset()
    assert histogram.total == 0
    assert list(histogram.buckets()) == []


# -- options and schedules -------------------------------------------------------------------------------


def test_families_are_parsed() -> None:
    plans = parse_families("chess=3, gin=2")
    assert [(plan.name, plan.concurrency) for plan in plans] == [("chess", 3), ("gin", 2)]
    assert parse_families("gin")[0].concurrency == 1
    for bad, reason in (
        ("", "at least one"),
        ("chess=0", "at least 1"),
        ("chess=x", "whole number"),
        ("chess=1,chess=2", "twice"),
    ):
        with pytest.raises(ValueError, match=reason):
            parse_families(bad)


def args_for(*argv: str) -> Any:
    return build_parser().parse_args(list(argv))


def test_options_make_a_config() -> None:
    config = config_from_args(
        args_for(
            "--families",
            "chess=20,gin=10",
            "--minutes",
            "gin=10",
            "--increment",
            "gin=5",
            "--option",
            "gin.variant=oklahoma",
            "--strategy",
            "gin=greedy",
            "--think-ms",
            "50",
            "--think-jitter-ms",
            "20",
            "--matches",
            "100",
            "--ramp-up",
            "10",
            "--max-plies",
            "0",
        ),
        {"GATEWAY_ADDRESS": "10.0.0.1:1"},
    )
    chess, gin = config.families
    assert (chess.name, chess.concurrency, chess.minutes, chess.strategy) == ("chess", 20, None, "random")
    assert (gin.minutes, gin.increment_s, dict(gin.options), gin.strategy) == (
        10.0,
        5.0,
        {"variant": "oklahoma"},
        "greedy",
    )
    assert config.matches == 100
    assert config.duration_s is None  # --matches alone: no time limit
    assert config.max_plies is None
    assert config.gateway == "10.0.0.1:1"
    assert config.think_ms == 50
    assert config.think_jitter_ms == 20
    assert config_from_args(args_for(), {}).duration_s == 60.0
    assert "closed loop" in config.describe()


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--families", "poker=1"], "unknown game family"),
        (["--mode", "open"], "rate"),
        (["--minutes", "go=3"], "does not play"),
        (["--option", "gin.colour=red"], "no option"),
        (["--option", "variant=x"], "FAMILY.NAME=VALUE"),
        (["--strategy", "clever"], "strategies"),
        (["--connections", "0"], "connection"),
    ],
)
def test_bad_options_are_usage_errors(argv: list[str], reason: str) -> None:
    with pytest.raises(UsageError, match=reason):
        config_from_args(args_for(*argv), {})


def test_skirmish_chess_through_the_options_and_the_locust_files_bridges() -> None:
    config = config_from_args(
        args_for("--families", "chess=3", "--option", "chess.variant=skirmish", "--strategy", "duelist"), {}
    )
    (chess,) = config.families
    assert (dict(chess.options), chess.strategy) == ({"variant": "skirmish"}, "duelist")
    with pytest.raises(UsageError, match="preset must be"):
        config_from_args(
            args_for(
                "--families", "chess=1", "--option", "chess.variant=skirmish", "--option", "chess.preset=x"
            ),
            {},
        )
    # The Locust file's SkirmishPair: a bridge of its own, playing chess with variant=skirmish.
    families = "chess=2,gin=1,skirmish=3"
    argv = [
        f"--families={families}",
        "--option",
        "gin.variant=oklahoma",
        "--option=skirmish.preset=wings",
        "--strategy",
        "gin=greedy,skirmish=duelist",
        "--max-plies",
        "30",
    ]
    assert families_argument(argv) == families
    assert bridge_arguments(argv, None, families) == [
        *("--families", "chess=2,gin=1", "--option", "gin.variant=oklahoma"),
        *("--strategy", "gin=greedy", "--max-plies", "30"),
    ]
    skirmish = bridge_arguments(argv, "skirmish", families)
    assert skirmish == [
        *("--families", "chess=3", "--option", "chess.preset=wings", "--strategy", "chess=duelist"),
        *("--max-plies", "30", "--option", "chess.variant=skirmish"),
    ]
    (plan,) = config_from_args(args_for(*skirmish), {}).families
    assert dict(plan.options) == {"preset": "wings", "variant": "skirmish"}
    assert bridge_arguments([], "skirmish", "chess=2,gin=2") is None


def test_arrivals_ramp_up_then_keep_the_rate() -> None:
    assert arrival_time(10, 5, 0) == pytest.approx(2.0)
    times = [arrival_time(k, 4, 10) for k in range(200)]
    assert times == sorted(times)
    # The expected count by the end of the ramp is rate * R / 2 = 20 arrivals, then 4 per second.
    assert arrival_time(20, 4, 10) == pytest.approx(10.0)
    assert arrival_time(60, 4, 10) == pytest.approx(20.0)
    assert times[1] - times[0] > times[199] - times[198]


def test_families_are_mixed_in_proportion() -> None:
    robin = _WeightedRoundRobin({"chess": 3, "gin": 2})
    picks = [robin.next() for _ in range(50)]
    assert picks.count("chess") == 30
    assert picks.count("gin") == 20
    assert "chess" in picks[:2]
    assert "gin" in picks[:3]


def test_the_wait_and_the_label_come_from_the_refusal_details_not_its_words() -> None:
    limited = GatewayError.from_problem(
        Problem(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "slow down; retry in 999 ms",  # the words say otherwise: the details win
            reason="RATE_LIMITED",
            retry_after_ms=37,
        )
    )
    assert exhausted_wait_s(limited) == pytest.approx(0.037)
    assert error_label(limited) == "RESOURCE_EXHAUSTED/RATE_LIMITED"
    wordy = GatewayError.from_problem(Problem(grpc.StatusCode.RESOURCE_EXHAUSTED, "retry in 37 ms"))
    assert exhausted_wait_s(wordy) == pytest.approx(0.2)  # no details: the default wait
    assert error_label(wordy) == "RESOURCE_EXHAUSTED"


# -- /proc -----------------------------------------------------------------------------------------------


def test_reading_this_process() -> None:
    sample = read_sample(os.getpid())
    assert sample is not None
    assert sample.cpu_s > 0
    assert sample.rss_bytes > 10 * 1024 * 1024
    assert read_sample(2**22 + 12345) is None
    monitor = ProcessMonitor({"nobody": 2**22 + 12345}, include_self=True)
    monitor.start()
    sum(range(2_000_000))
    usages = monitor.finish()
    assert [usage.name for usage in usages] == [ProcessMonitor.SELF]
    assert usages[0].cpu_s >= 0
    assert usages[0].rss_peak_mib >= usages[0].rss_start_mib * 0.5
    assert monitor.unreadable == ["nobody"]


def test_services_by_name() -> None:
    assert parse_services("gateway=12, rules-chess=34") == {"gateway": 12, "rules-chess": 34}
    for bad, reason in (("gateway", "NAME=PID"), ("gateway=x", "NAME=PID"), ("", "no services")):
        with pytest.raises(ValueError, match=reason):
            parse_services(bad)


def fake_process(proc: Path, pid: int, cmdline: list[str], env: dict[str, str] | None) -> None:
    folder = proc / str(pid)
    folder.mkdir()
    (folder / "cmdline").write_bytes(b"\0".join(part.encode() for part in cmdline) + b"\0")
    if env is not None:
        (folder / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()))
    (folder / "stat").write_text(f"{pid} (python) S 1 " + " ".join(["0"] * 9) + " 250 50 0 0 20 0 1")
    (folder / "status").write_text("Name:\tpython\nVmRSS:\t  2048 kB\n")


def test_discovering_the_launchers_processes(tmp_path: Path) -> None:
    python = "/srv/.venv/bin/python"
    fake_process(tmp_path, 100, [python, "-m", "services.gateway"], {"GRPC_PORT": "50050"})
    fake_process(tmp_path, 101, [python, "-m", "services.rules_chess"], {"GRPC_PORT": "50060"})
    fake_process(tmp_path, 200, [python, "-m", "services.gateway"], {"GRPC_PORT": "51050"})  # another stack
    fake_process(tmp_path, 201, [python, "-m", "services.rules_chess"], {"GRPC_PORT": "51060"})
    fake_process(tmp_path, 300, [python, "-m", "services.clock"], None)  # environment unreadable
    fake_process(tmp_path, 400, [python, "-m", "pytest"], {})
    fake_process(tmp_path, 401, ["bash"], {})
    (tmp_path / "self").mkdir()
    assert discover_services("127.0.0.1:50050", tmp_path) == {
        "clock": 300,
        "rules-chess": 101,
        "gateway": 100,
    }
    assert discover_services("127.0.0.1:51050", tmp_path) == {
        "clock": 300,
        "rules-chess": 201,
        "gateway": 200,
    }
    sample = read_sample(100, tmp_path)
    assert sample is not None
    assert sample.rss_bytes == 2048 * 1024
    assert sample.cpu_s == pytest.approx(300 / os.sysconf("SC_CLK_TCK"))


# -- the report ------------------------------------------------------------------------------------------


def synthetic_result() -> RunResult:
    config = LoadConfig(families=parse_families("chess=2,gin=1"), duration_s=10, run_id="load-test")
    metrics = Metrics(["chess", "gin"])
    rng = random.Random(3)
    for family_name in ("chess", "gin"):
        for _ in range(3):
            metrics.match_started(family_name)
        metrics.match_finished(family_name, rules_pb2.Result(termination=rules_pb2.TERMINATION_RESIGNATION))
        for _ in range(500):
            metrics.latency(family_name, "submit_action", rng.randrange(1_000_000, 30_000_000))
            metrics.latency(family_name, "opponent_update", rng.randrange(1_500_000, 40_000_000))
        metrics.latency(family_name, "match_setup", 250_000_000)
    metrics.match_cut("chess")
    metrics.error("SubmitAction", "RESOURCE_EXHAUSTED")
    metrics.error("SubmitAction", "RESOURCE_EXHAUSTED")
    lag = Histogram()
    lag.record(900)
    usage = ServiceUsage("gateway", 42, 3.0, 30.0, 50.0, 55.0, 56.0, True)
    me = ServiceUsage(ProcessMonitor.SELF, 43, 1.0, 10.0, 60.0, 61.0, 62.0, True)
    return RunResult(config, metrics, 1_800_000_000.0, 10.0, "duration", [usage], me, lag, ["a note"])


def test_the_json_report_has_its_shape(tmp_path: Path) -> None:
    built = build_report(synthetic_result())
    write_json(built, tmp_path / "run.json")
    report = json.loads((tmp_path / "run.json").read_text())
    assert report == json.loads(json.dumps(built))
    assert report["schema"] == SCHEMA
    assert report["run_id"] == "load-test"
    assert report["started_at"] == "2027-01-15T08:00:00Z"
    assert report["config"]["transport"] == "play"
    assert report["config"]["families"][0] == {
        "name": "chess",
        "concurrency": 2,
        "minutes": None,
        "increment_s": 0.0,
        "options": {},
        "strategy": "random",
    }
    matches = report["matches"]
    assert (matches["started"], matches["finished"], matches["failed"], matches["cut"]) == (6, 2, 0, 1)
    assert matches["by_family"]["chess"]["terminations"] == {"resignation": 1}
    assert report["actions"] == {
        "count": 1000,
        "per_second": 100.0,
        "by_family": {"chess": {"count": 500, "per_second": 50.0}, "gin": {"count": 500, "per_second": 50.0}},
    }
    submit = report["latency_ms"]["submit_action"]
    assert set(submit) == {"all", "by_family"}
    assert set(submit["all"]) == {"count", "min", "mean", "p50", "p90", "p99", "p99_9", "max"}
    assert submit["all"]["count"] == 1000
    assert 1 <= submit["all"]["p50"] <= submit["all"]["p99"] <= submit["all"]["max"] <= 30
    assert report["latency_ms"]["match_setup"]["by_family"]["gin"]["p50"] == pytest.approx(250, rel=0.001)
    assert report["errors"] == [{"operation": "SubmitAction", "code": "RESOURCE_EXHAUSTED", "count": 2}]
    assert report["services"][0]["name"] == "gateway"
    assert report["load_generator"]["pid"] == 43
    assert report["load_generator"]["loop_lag_ms"]["count"] == 1
    assert report["histograms"]["unit"] == "us"
    merged = Histogram()
    for histogram in histograms_of(report, "submit_action").values():
        merged.merge(histogram)
    assert latency_summary(merged) == submit["all"]
    table = render_table(report)
    for text in ("chess", "gin", "SubmitAction", "RESOURCE_EXHAUSTED", "gateway", "p99.9", "note: a note"):
        assert text in table


def test_the_plot(tmp_path: Path) -> None:
    report = build_report(synthetic_result())
    path = tmp_path / "plot.png"
    skipped = write_png(report, path)
    if not HAVE_MATPLOTLIB:
        assert skipped is not None
        assert "matplotlib" in skipped
        return
    assert skipped is None
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- against a real stack --------------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    env = {
        "SKILLCLASSICS_ENV": "development",
        "GRPC_HOST": "127.0.0.1",
        "MIGRATE_ON_START": "true",
        "LOG_FORMAT": "json",
        "DATABASE_URL": "",
        # What docs/load-testing.md asks of a stack under load: no per-player rate limit in the way.
        "GATEWAY_CALL_RATE": "100000",
        "GATEWAY_CALL_BURST": "100000",
    }
    services = [spec for spec in available_services() if spec.name in STACK_SERVICES]
    assert {spec.name for spec in services} == set(STACK_SERVICES)
    data = tmp_path_factory.mktemp("load-stack")
    write_development_key(data, SIGNING_KEY)  # the gateway trusts it; the minters sign with it
    for attempt in range(3):
        running = Stack(
            services,
            port_offset=stack_port_offset(),
            data_dir=data,
            echo=False,
            env=env,
            start_timeout=60,
        )
        try:
            await running.start()
        except StartError as error:
            if "already in use" in error.reason and attempt < 2:
                continue
            raise
        break
    try:
        yield running
    finally:
        exits = await running.stop()
        assert all(code == 0 for code in exits.values()), exits


def tokens(stack: Stack) -> TokenMinter:
    """Tokens signed with the stack's development key (read from its data folder, as ``make run``'s)."""
    return TokenMinter({"DATA_DIR": str(stack.data_dir)})


async def test_a_run_of_chess_gin_go_and_generals_through_the_command(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out_json = tmp_path / "run.json"
    out_png = tmp_path / "run.png"
    args = args_for(
        "--gateway",
        stack.address("gateway"),
        "--families",
        "chess=2,gin=2,go=2,generals=2",
        "--option",
        "go.size=9",
        "--matches",
        "8",
        "--max-plies",
        "40",
        "--seed",
        "5",
        "--services",
        "auto",
        "--json",
        str(out_json),
        "--png",
        str(out_png),
        "--quiet",
        "--fail-on-errors",
    )
    monkeypatch.setenv("DATA_DIR", str(stack.data_dir))
    assert await run_command(args) == 0
    report = json.loads(out_json.read_text())
    matches = report["matches"]
    assert report["stopped_by"] == "matches"
    assert matches["failed"] == 0
    assert matches["cut"] == 0
    assert matches["finished"] >= 8
    for family_name in ("chess", "gin", "go", "generals"):
        assert matches["by_family"][family_name]["finished"] >= 1
    assert report["errors"] == []
    assert report["actions"]["count"] >= 6 * 20
    for kind in ("submit_action", "opponent_update", "match_setup"):
        figures = report["latency_ms"][kind]["all"]
        assert figures["count"] > 0
        assert 0 < figures["min"] <= figures["p50"] <= figures["p99"] <= figures["max"] < 20_000, kind
    # Every accepted action reached the opponent's stream and was timed.
    assert report["latency_ms"]["opponent_update"]["all"]["count"] == report["actions"]["count"]
    measured = {usage["name"]: usage["pid"] for usage in report["services"]}
    assert measured == {name: stack.pid(name) for name in STACK_SERVICES}
    assert all(usage["rss_mib_peak"] > 10 for usage in report["services"])
    assert sum(usage["cpu_seconds"] for usage in report["services"]) > 0
    if HAVE_MATPLOTLIB:
        assert out_png.read_bytes()[:4] == b"\x89PNG"
    else:
        assert not out_png.exists()


async def test_a_run_of_skirmish_chess(stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out_json = tmp_path / "skirmish.json"
    args = args_for(
        *(
            "--gateway",
            stack.address("gateway"),
            "--families",
            "chess=2",
            "--option",
            "chess.variant=skirmish",
        ),
        *("--strategy", "duelist", "--matches", "2", "--max-plies", "40", "--seed", "3"),
        *("--json", str(out_json), "--quiet", "--fail-on-errors"),
    )
    monkeypatch.setenv("DATA_DIR", str(stack.data_dir))
    assert await run_command(args) == 0
    report = json.loads(out_json.read_text())
    assert report["matches"]["failed"] == 0
    assert report["matches"]["by_family"]["chess"]["finished"] >= 2
    assert report["errors"] == []


async def test_a_duration_run_cuts_the_matches_still_going(stack: Stack) -> None:
    config = LoadConfig(
        families=(FamilyPlan("chess", 3),),
        gateway=stack.address("gateway"),
        duration_s=2.5,
        think_ms=40,
        think_jitter_ms=10,
        ramp_up_s=0.5,
        max_plies=None,
        progress_s=0.5,
        seed=11,
    )
    progress = _Lines()
    result = await LoadRun(config, tokens=tokens(stack), progress=progress).run()  # type: ignore[arg-type]
    metrics = result.metrics
    assert result.stopped_by == "duration"
    assert result.elapsed_s == pytest.approx(2.5, abs=0.5)
    chess = metrics.families["chess"]
    assert chess.cut >= 1  # random games of this seed do not end in 2.5 s
    assert chess.started == chess.cut + chess.finished
    assert metrics.total("failed") == 0
    assert not metrics.errors
    assert metrics.total("actions") > 10
    assert any("matches" in line and "actions" in line for line in progress.lines)
    assert any("cut" in note for note in result.notes)
    # The cut matches are over on the server (resigned), not left running.
    async with PlayerSession(stack.address("gateway"), tokens(stack)(f"{config.run_id}-chess-1-a")) as player:
        history = await player.match_history()
        assert len(history) == 1
        match = await player.get_match(history[0].match_id)
    assert match.update.status == rules_pb2.MATCH_STATUS_FINISHED


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, text: str) -> int:
        self.lines += [line for line in text.splitlines() if line]
        return len(text)

    def flush(self) -> None:
        return None


async def test_queue_pairing_and_the_open_loop(stack: Stack) -> None:
    config = LoadConfig(
        families=parse_families("chess=1,gin=1"),
        gateway=stack.address("gateway"),
        mode="open",
        rate=3,
        duration_s=None,
        matches=4,
        pairing="queue",
        max_plies=20,
        progress_s=0,
    )
    result = await run_load(config, tokens=tokens(stack))
    metrics = result.metrics
    assert result.stopped_by == "matches"
    assert not metrics.errors
    assert metrics.total("failed") == 0
    assert metrics.total("finished") >= 4
    assert metrics.families["chess"].started >= 1
    assert metrics.families["gin"].started >= 1


async def test_the_rate_limit_is_counted_and_waited_out(stack: Stack) -> None:
    """A second gateway with low limits (5 calls/s, bursts of 10) in front of the same stack."""
    wiring = {
        name: stack.environment("gateway")[name]
        for name in (
            "MATCHMAKING_ADDRESS",
            "FAIRNESS_ADDRESS",
            "RULES_CHESS_ADDRESSES",
            "RULES_GIN_ADDRESSES",
        )
    }
    env = {
        **wiring,
        "GATEWAY_CALL_RATE": "5",
        "GATEWAY_CALL_BURST": "10",
        "LOG_FORMAT": "json",
    }
    gateway_spec = stack.spec("gateway")
    async with Stack(
        [gateway_spec], port_offset=stack_port_offset(), data_dir=stack.data_dir, echo=False, env=env
    ) as limited:
        config = LoadConfig(
            families=(FamilyPlan("chess", 1),),
            gateway=limited.address("gateway"),
            duration_s=None,
            matches=1,
            max_plies=60,
            progress_s=0,
            seed=2,
        )
        result = await run_load(config, tokens=tokens(stack))
    metrics = result.metrics
    assert metrics.total("finished") == 1
    assert metrics.total("failed") == 0
    refused = metrics.errors[("SubmitAction", "RESOURCE_EXHAUSTED/RATE_LIMITED")]
    assert refused > 0
    assert set(metrics.errors) == {("SubmitAction", "RESOURCE_EXHAUSTED/RATE_LIMITED")}
    assert dict(metrics.families["chess"].terminations) == {"resignation": 1}, metrics.families
    assert metrics.total("actions") >= 60


async def test_a_misconfigured_run_stops_with_the_reason(stack: Stack) -> None:
    config = LoadConfig(
        families=(FamilyPlan("chess", 2, minutes=7),),  # not a lobby clock
        gateway=stack.address("gateway"),
        duration_s=20,
        progress_s=0,
    )
    result = await run_load(config, tokens=tokens(stack))
    assert result.stopped_by == "error"
    assert result.elapsed_s < 10
    assert any("INVALID_ARGUMENT" in note for note in result.notes)
    assert result.metrics.errors[("CreateTable", "INVALID_ARGUMENT/TIME_CONTROL_NOT_OFFERED")] >= 1


async def test_a_wrong_key_fails_the_probe(stack: Stack, tmp_path: Path) -> None:
    from clients.load.harness import LoadError

    config = LoadConfig(families=(FamilyPlan("chess", 1),), gateway=stack.address("gateway"), progress_s=0)
    write_development_key(tmp_path, SigningKey.generate())  # a development key of another stack
    other = TokenMinter({"DATA_DIR": str(tmp_path)})
    with pytest.raises(LoadError, match="UNAUTHENTICATED"):
        await run_load(config, tokens=other)


async def test_the_bridge_the_locust_file_drives(stack: Stack) -> None:
    """``python -m clients.load.bridge``: pairs on request, timings out as JSON lines, a pair stopped
    halfway resigned, a clean exit on ``stop``."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "clients.load.bridge",
        "--gateway",
        stack.address("gateway"),
        "--families",
        "chess=1,gin=1",
        "--max-plies",
        "30",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "DATA_DIR": str(stack.data_dir)},
        cwd=ROOT,
    )
    assert process.stdin is not None
    assert process.stdout is not None

    def send(command: dict[str, object]) -> None:
        assert process.stdin is not None
        process.stdin.write(json.dumps(command).encode() + b"\n")

    async def next_event() -> dict[str, Any]:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        assert line, "the bridge ended early"
        event: dict[str, Any] = json.loads(line)
        return event

    try:
        assert await next_event() == {"ev": "ready"}
        send({"op": "pair", "id": 1, "family": "chess"})
        send({"op": "pair", "id": 2, "family": "gin"})
        done: dict[int, dict[str, Any]] = {}
        names: set[str] = set()
        while len(done) < 2:
            event = await next_event()
            if event["ev"] == "done":
                done[event["id"]] = event
            elif event["ev"] == "request":
                assert event["error"] is None, event
                assert event["ms"] > 0
                names.add(event["name"])
        assert not done[1]["failed"]
        assert not done[2]["failed"]
        assert len(done[1]["matches"]) == 1
        assert done[2]["family"] == "gin"
        for name in (
            "SubmitAction chess",
            "SubmitAction gin",
            "submit to opponent update gin",
            "match setup chess",
        ):
            assert name in names
        # A Locust user stopped mid-match: the pair's match is resigned and the pair ends.
        send({"op": "pair", "id": 3, "family": "chess"})
        event = await next_event()
        while event["ev"] != "request" or not event["name"].startswith("SubmitAction"):
            event = await next_event()
        send({"op": "cancel", "id": 3})
        while event["ev"] != "done":
            event = await next_event()
        assert event["id"] == 3
        assert not event["failed"]
        send({"op": "stop"})
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_the_locust_file(stack: Stack) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(ROOT / "clients" / "load" / "locustfile.py"),
        "--host",
        stack.address("gateway"),
        "--headless",
        "-u",
        "2",
        "-r",
        "2",
        "-t",
        "6s",
        "--only-summary",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={
            **os.environ,
            "DATA_DIR": str(stack.data_dir),
            "LOAD_OPTIONS": "--families chess=1,gin=1,go=1,generals=1 --option go.size=9 --max-plies 30",
        },
        cwd=ROOT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), 60)
    text = output.decode()
    assert process.returncode == 0, text
    assert "SubmitAction" in text


async def test_pace_slows_the_matches_being_played(stack: Stack) -> None:
    config = LoadConfig(
        families=(FamilyPlan("chess", 1),), gateway=stack.address("gateway"), max_plies=None, seed=5
    )
    metrics = Metrics(["chess"])
    async with Engine(config, metrics, tokens(stack)) as engine:
        pair = asyncio.create_task(engine.play_pair("chess"))
        try:
            async with asyncio.timeout(20):
                while metrics.total("actions") < 10:  # noqa: ASYNC110 - the players move on their own
                    await asyncio.sleep(0.05)
            with pytest.raises(ValueError, match="think"):
                engine.pace(-1.0)
            engine.pace(400.0)
            await asyncio.sleep(0.5)  # a move already thinking or in flight lands meanwhile
            before = metrics.total("actions")
            await asyncio.sleep(1.0)
            # One match makes one move at a time, each after 400 ms of thought: at most three in a
            # second (at think time 0 it made ten in well under a second on the same stack).
            assert metrics.total("actions") - before <= 3
            assert engine.config.think_ms == 400.0
        finally:
            engine.stop_all()
            await engine.cut(engine.unfinished(), 5.0)
            pair.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pair
