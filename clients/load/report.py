"""A run's figures: the JSON document (:func:`build_report`), the table people read (:func:`render_table`)
and the HDR-style latency plot (:func:`write_png`).

Everything is derived from the JSON document, which carries the histograms themselves (sparse bucket
counts, microseconds), so a saved report can be rendered again or merged with others later
(``python -m clients.load.report run.json [--png run.png]`` prints its table again). The schema is
described in ``docs/load-testing.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from clients.load.harness import LATENCIES, RunResult
from clients.load.histogram import Histogram

__all__ = [
    "LATENCY_TITLES",
    "PERCENTILES",
    "SCHEMA",
    "build_report",
    "histograms_of",
    "latency_summary",
    "main",
    "render_table",
    "write_json",
    "write_png",
]

SCHEMA: Final = "skillclassics-load-report/1"
PERCENTILES: Final = (50.0, 90.0, 99.0, 99.9)
LATENCY_TITLES: Final = {
    "submit_action": "SubmitAction",
    "opponent_update": "submit to opponent update",
    "match_setup": "match setup",
}
_SUMMARY_KEYS = ("p50", "p90", "p99", "p99_9")


def _ms(micros: float) -> float:
    return round(micros / 1000, 3)


def latency_summary(histogram: Histogram) -> dict[str, float | int]:
    """Count, min, mean, p50, p90, p99, p99.9 and max in milliseconds."""
    values = histogram.percentiles(PERCENTILES)
    summary: dict[str, float | int] = {"count": histogram.total, "min": _ms(histogram.minimum)}
    summary["mean"] = _ms(histogram.mean)
    for key, percentile in zip(_SUMMARY_KEYS, PERCENTILES, strict=True):
        summary[key] = _ms(values[percentile])
    summary["max"] = _ms(histogram.maximum)
    return summary


def _iso(unix_s: float) -> str:
    return datetime.fromtimestamp(unix_s, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def build_report(result: RunResult) -> dict[str, Any]:
    """The run as a JSON-ready document (schema :data:`SCHEMA`)."""
    config = result.config
    metrics = result.metrics
    elapsed = max(result.elapsed_s, 1e-9)
    families = metrics.families
    by_family_matches = {
        name: {
            "started": stats.started,
            "finished": stats.finished,
            "failed": stats.failed,
            "cut": stats.cut,
            "terminations": dict(sorted(stats.terminations.items())),
        }
        for name, stats in families.items()
    }
    actions = {
        "count": metrics.total("actions"),
        "per_second": round(metrics.total("actions") / elapsed, 2),
        "by_family": {
            name: {"count": stats.actions, "per_second": round(stats.actions / elapsed, 2)}
            for name, stats in families.items()
        },
    }
    latency: dict[str, Any] = {}
    histograms: dict[str, Any] = {"unit": "us"}
    for kind in LATENCIES:
        latency[kind] = {
            "all": latency_summary(metrics.merged(kind)),
            "by_family": {name: latency_summary(stats.latency[kind]) for name, stats in families.items()},
        }
        histograms[kind] = {name: stats.latency[kind].to_dict() for name, stats in families.items()}
    generator: dict[str, Any] | None = None
    if result.generator is not None:
        generator = result.generator.to_dict()
        generator.pop("name", None)
    else:
        generator = {}
    generator["loop_lag_ms"] = latency_summary(result.loop_lag)
    return {
        "schema": SCHEMA,
        "run_id": config.run_id,
        "description": config.describe(),
        "started_at": _iso(result.started_at),
        "elapsed_s": round(result.elapsed_s, 3),
        "stopped_by": result.stopped_by,
        "config": {
            "gateway": config.gateway,
            "mode": config.mode,
            "transport": config.transport,
            "families": [
                {
                    "name": plan.name,
                    "concurrency": plan.concurrency,
                    "minutes": plan.minutes,
                    "increment_s": plan.increment_s,
                    "options": dict(plan.options),
                    "strategy": plan.strategy,
                }
                for plan in config.families
            ],
            "rate": config.rate,
            "poisson": config.poisson,
            "duration_s": config.duration_s,
            "matches": config.matches,
            "ramp_up_s": config.ramp_up_s,
            "think_ms": config.think_ms,
            "think_jitter_ms": config.think_jitter_ms,
            "max_plies": config.max_plies,
            "pairing": config.pairing,
            "connections": config.connections,
            "stall_s": config.stall_s,
            "outage_s": config.outage_s,
            "seed": config.seed,
        },
        "matches": {
            "started": metrics.total("started"),
            "finished": metrics.total("finished"),
            "failed": metrics.total("failed"),
            "cut": metrics.total("cut"),
            "dropped": metrics.dropped,
            "by_family": by_family_matches,
        },
        "actions": actions,
        "latency_ms": latency,
        "errors": [
            {"operation": operation, "code": code, "count": count}
            for (operation, code), count in sorted(
                metrics.errors.items(), key=lambda item: (-item[1], item[0])
            )
        ],
        "stream_reconnects": metrics.reconnects,
        "services": [usage.to_dict() for usage in result.services],
        "load_generator": generator,
        "notes": list(result.notes),
        "histograms": histograms,
    }


def histograms_of(report: Mapping[str, Any], kind: str) -> dict[str, Histogram]:
    """The histograms of latency ``kind`` by family, read back from a report."""
    return {name: Histogram.from_dict(data) for name, data in report["histograms"][kind].items()}


# -- the table -------------------------------------------------------------------------------------------


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]], align: str) -> list[str]:
    """Columns padded to width, each aligned as ``align`` says (``l`` or ``r`` per column)."""
    cells = [[str(value) for value in row] for row in [headers, *rows]]
    widths = [max(len(row[index]) for row in cells) for index in range(len(headers))]
    lines = []
    for row in cells:
        parts = [
            cell.ljust(width) if side == "l" else cell.rjust(width)
            for cell, width, side in zip(row, widths, align, strict=True)
        ]
        lines.append("  " + "  ".join(parts).rstrip())
    return lines


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def render_table(report: Mapping[str, Any]) -> str:
    """The report as the text table printed at the end of a run."""
    lines = [f"load run {report['description']}"]
    lines.append(
        f"started {report['started_at']}, measured {report['elapsed_s']:.1f} s, "
        f"stopped by {report['stopped_by']}"
    )
    lines.append("")
    matches = report["matches"]
    rows: list[list[object]] = []
    actions_by_family = report["actions"]["by_family"]
    for name, stats in matches["by_family"].items():
        ended = ", ".join(f"{how} {count}" for how, count in stats["terminations"].items()) or "-"
        acted = actions_by_family.get(name, {"count": 0, "per_second": 0})
        rows.append(
            [
                name,
                stats["started"],
                stats["finished"],
                stats["failed"],
                stats["cut"],
                acted["count"],
                _number(acted["per_second"]),
                ended,
            ]
        )
    if len(rows) > 1:
        rows.append(
            [
                "all",
                matches["started"],
                matches["finished"],
                matches["failed"],
                matches["cut"],
                report["actions"]["count"],
                _number(report["actions"]["per_second"]),
                "",
            ]
        )
    headers = ["matches", "started", "finished", "failed", "cut", "actions", "actions/s", "how they ended"]
    lines += _table(headers, rows, "lrrrrrrl")
    if matches.get("dropped"):
        lines.append(f"  open-loop arrivals dropped (too many in flight): {matches['dropped']}")
    lines.append("")
    rows = []
    for kind, title in LATENCY_TITLES.items():
        figures = report["latency_ms"][kind]
        entries = [("all", figures["all"])] if len(figures["by_family"]) > 1 else []
        entries += list(figures["by_family"].items())
        for index, (name, summary) in enumerate(entries):
            rows.append(
                [
                    title if index == 0 else "",
                    name,
                    summary["count"],
                    *(_number(summary[key]) for key in (*_SUMMARY_KEYS, "max")),
                ]
            )
    lines += _table(["latency (ms)", "", "count", "p50", "p90", "p99", "p99.9", "max"], rows, "llrrrrrr")
    lines.append("")
    errors = report["errors"]
    if errors:
        lines += _table(
            ["errors", "code", "count"], [[e["operation"], e["code"], e["count"]] for e in errors], "llr"
        )
    else:
        lines.append("  errors: none")
    if report.get("stream_reconnects"):
        lines.append(f"  match streams reopened: {report['stream_reconnects']}")
    lines.append("")
    rows = []
    for usage in report["services"]:
        rows.append(_usage_row(usage["name"], usage))
    generator = report.get("load_generator") or {}
    if "pid" in generator:
        rows.append(_usage_row("load generator (this process)", generator))
    if rows:
        lines += _table(
            ["process", "pid", "CPU s", "CPU %", "RSS start MiB", "RSS end MiB", "RSS peak MiB"],
            rows,
            "lrrrrrr",
        )
    else:
        lines.append("  services: not measured (--services auto, or NAME=PID,...)")
    lag = generator.get("loop_lag_ms")
    if lag and lag.get("count"):
        lines.append(
            f"  load generator event loop lag: p50 {_number(lag['p50'])} ms, p99 {_number(lag['p99'])} ms, "
            f"max {_number(lag['max'])} ms"
        )
        if lag["p99"] > 10:
            lines.append(
                "  note: the load generator's own event loop was late by over 10 ms at p99: the latencies "
                "above include its queueing (fewer matches per process, or more processes)"
            )
    for note in report.get("notes", []):
        lines.append(f"  note: {note}")
    return "\n".join(lines)


def _usage_row(name: str, usage: Mapping[str, Any]) -> list[object]:
    alive = "" if usage.get("alive", True) else " (gone)"
    return [
        name + alive,
        usage["pid"],
        f"{usage['cpu_seconds']:.1f}",
        f"{usage['cpu_percent']:.0f}",
        f"{usage['rss_mib_start']:.0f}",
        f"{usage['rss_mib_end']:.0f}",
        f"{usage['rss_mib_peak']:.0f}",
    ]


def write_json(report: Mapping[str, Any], path: str | Path) -> None:
    """The report, indented for people, with the histograms' bucket counts on one line each."""
    marker = '"@histograms@"'
    text = json.dumps({**report, "histograms": marker.strip('"')}, indent=1)
    histograms = report.get("histograms", {})
    compact = (
        "{\n"
        + ",\n".join(
            f"  {json.dumps(kind)}: {json.dumps(value, separators=(',', ':'))}"
            for kind, value in histograms.items()
        )
        + "\n }"
    )
    Path(path).write_text(text.replace(marker, compact) + "\n", encoding="utf-8")


# -- the plot --------------------------------------------------------------------------------------------


def _x(percentile: float, total: int) -> float:
    """Where ``percentile`` goes on the ``1 / (1 - p)`` axis; 100 % (the maximum) goes to ``total``
    (the rank of the last sample)."""
    if percentile >= 100:
        return float(max(total, 2))
    return 1 / (1 - percentile / 100)


def write_png(report: Mapping[str, Any], path: str | Path) -> str | None:
    """Draw the HDR-style latency plot (percentile on a log ``1/(1-p)`` axis, latency in ms) to
    ``path``; returns ``None``, or why nothing was drawn (matplotlib is not installed)."""
    try:
        import matplotlib
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib): no PNG"
    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

    kinds = list(LATENCY_TITLES)
    figure, axes = pyplot.subplots(1, len(kinds), figsize=(6 * len(kinds), 5), squeeze=False)
    widest = 10.0
    for axis, kind in zip(axes[0], kinds, strict=True):
        by_family = histograms_of(report, kind)
        series: list[tuple[str, Histogram]] = []
        if len(by_family) > 1:
            merged = Histogram()
            for histogram in by_family.values():
                merged.merge(histogram)
            series.append(("all", merged))
        series += list(by_family.items())
        for label, histogram in series:
            points = histogram.distribution()
            if not points:
                continue
            xs = [_x(p, histogram.total) for p, _ in points]
            ys = [value / 1000 for _, value in points]
            widest = max(widest, xs[-1])
            axis.plot(xs, ys, label=f"{label} ({histogram.total:,})", linewidth=2 if label == "all" else 1.2)
        axis.set_xscale("log")
        axis.set_title(LATENCY_TITLES[kind])
        axis.set_xlabel("percentile")
        axis.set_ylabel("latency (ms)")
        axis.grid(True, which="major", alpha=0.4)
        if axis.lines:
            axis.legend(loc="upper left", fontsize="small")
    ticks = [1.0, 10.0, 100.0, 1_000.0, 10_000.0, 100_000.0, 1_000_000.0]
    labels = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"]
    shown = [index for index, tick in enumerate(ticks) if tick <= widest * 1.01] or [0, 1]
    for axis in axes[0]:
        axis.set_xlim(1, max(10.0, widest))
        axis.xaxis.set_major_locator(FixedLocator([ticks[i] for i in shown]))
        axis.xaxis.set_major_formatter(FixedFormatter([labels[i] for i in shown]))
        axis.xaxis.set_minor_locator(NullLocator())
        axis.set_ylim(bottom=0)
    figure.suptitle(
        f"{report['description']}\n{report['started_at']}, {report['elapsed_s']:.0f} s", fontsize=9
    )
    figure.tight_layout()
    figure.savefig(Path(path), dpi=110)
    pyplot.close(figure)
    return None


# -- a saved report --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m clients.load.report RUN.json [--png OUT.png]``: print a saved report's table again."""
    parser = argparse.ArgumentParser(prog="python -m clients.load.report", description=main.__doc__)
    parser.add_argument("report", metavar="RUN.json")
    parser.add_argument("--png", metavar="OUT.png", help="draw its latency plot too")
    args = parser.parse_args(argv)
    try:
        report = json.loads(Path(args.report).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        print(f"error: cannot read {args.report}: {error}", file=sys.stderr)
        return 2
    if report.get("schema") != SCHEMA:
        print(f"error: {args.report} is not a {SCHEMA} report", file=sys.stderr)
        return 2
    print(render_table(report))
    if args.png:
        skipped = write_png(report, args.png)
        if skipped:
            print(f"note: {skipped}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
