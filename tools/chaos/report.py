"""The report of a chaos run: what was done to the stack, what the players did, and each check's verdict."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from tools.chaos.players import DOORS, PLAY, WATCH

if TYPE_CHECKING:
    from tools.chaos.checks import CheckResult, Evidence
    from tools.chaos.config import ChaosConfig
    from tools.chaos.controller import Outage
    from tools.chaos.players import Recorder
    from tools.chaos.schedule import Fault


DOOR_NAMES: Final = {WATCH: "WatchMatch + SubmitAction", PLAY: "Play"}


@dataclass(slots=True)
class ChaosReport:
    config: ChaosConfig
    faults: list[Fault]
    outages: list[Outage]
    recorder: Recorder
    evidence: Evidence
    checks: list[CheckResult]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def figures(self) -> dict[str, Any]:
        """The run's figures (what docs/chaos.md tabulates)."""
        kills: Counter[str] = Counter(f"{o.target} {o.how}" for o in self.outages if not o.unasked)
        down_ms: Counter[str] = Counter()
        for outage in self.outages:
            lo, hi = outage.window(self.evidence.finished_ms)
            down_ms[outage.target] += hi - lo
        stopping: dict[str, list[float]] = {}
        starting: dict[str, list[float]] = {}
        for outage in self.outages:
            if outage.exited_ms is None:
                continue
            stopping.setdefault(outage.target, []).append((outage.exited_ms - outage.start_ms) / 1000)
            if outage.end_ms is not None:
                started = (outage.end_ms - outage.exited_ms) / 1000 - outage.down_s
                starting.setdefault(outage.target, []).append(started)
        statuses: Counter[str] = Counter()
        for row in self.evidence.matches.values():
            statuses[f"{row['family']} {row['status']}"] += 1
        doors: dict[str, dict[str, Any]] = {}
        for door in DOORS:
            streams = [s for s in self.recorder.streams if s.door == door]
            doors[door] = {
                "streams": len(streams),
                "stream_ends": dict(sorted(Counter(s.end or "open" for s in streams).items())),
                "unexplained_ends": [
                    f"{s.end} {s.ended_ms} {s.match_id}: {s.detail}" for s in streams if s.detail
                ],
                "actions_acknowledged": sum(1 for a in self.recorder.acks if a.door == door),
            }
        return {
            "seed": self.config.seed,
            "seconds": round(self.seconds, 1),
            "faults": dict(sorted(kills.items())),
            "unasked_exits": sum(1 for o in self.outages if o.unasked),
            "downtime_s": {k: round(v / 1000, 1) for k, v in sorted(down_ms.items())},
            "slowest_stop_s": {k: round(max(v), 1) for k, v in sorted(stopping.items())},
            "slowest_start_s": {k: round(max(v), 1) for k, v in sorted(starting.items())},
            "matches": dict(sorted(statuses.items())),
            "matches_played": len(self.recorder.matches),
            "actions_acknowledged": len(self.recorder.acks),
            "streams": len(self.recorder.streams),
            "doors": doors,
            "refusals": {f"{op} {code}": n for (op, code), n in sorted(self.recorder.refusals.items())},
            "checks": {check.name: "PASS" if check.ok else "FAIL" for check in self.checks},
        }

    def details(self) -> dict[str, Any]:
        """The figures, every outage (Unix ms) and every check, for ``CHAOS_JSON``."""
        return {
            "figures": self.figures(),
            "outages": [
                {
                    "target": o.target,
                    "how": o.how,
                    "start_ms": o.start_ms,
                    "exited_ms": o.exited_ms,
                    "end_ms": o.end_ms,
                    "down_s": o.down_s,
                    "unasked": o.unasked,
                    "problem": o.problem,
                }
                for o in self.outages
            ],
            "checks": [
                {"name": c.name, "ok": c.ok, "summary": c.summary, "details": c.details} for c in self.checks
            ],
            "player_failures": self.recorder.failures,
            "unexplained_refusals": self.recorder.odd_refusals,
        }

    def text(self) -> str:
        figures = self.figures()
        lines = [
            f"chaos run: seed {self.config.seed} (CHAOS_SEED={self.config.seed} repeats it), "
            f"{figures['seconds']} s",
            "",
            "faults (target, how: count):",
        ]
        lines += [f"  {name}: {count}" for name, count in figures["faults"].items()] or ["  none"]
        if figures["unasked_exits"]:
            lines.append(f"  unasked exits: {figures['unasked_exits']}")
        lines.append(
            "downtime by target (s): " + ", ".join(f"{k} {v}" for k, v in figures["downtime_s"].items())
        )
        slowest = ", ".join(
            f"{k} {v}/{figures['slowest_start_s'].get(k, '-')}" for k, v in figures["slowest_stop_s"].items()
        )
        lines.append(f"slowest to stop/to come back (s): {slowest}")
        lines.append("matches: " + ", ".join(f"{k} {v}" for k, v in figures["matches"].items()))
        lines.append(
            f"played by the recording players: {figures['matches_played']}; actions acknowledged: "
            f"{figures['actions_acknowledged']}; match streams opened: {figures['streams']}"
        )
        for door, counted in figures["doors"].items():
            ends = ", ".join(f"{n} {end}" for end, n in counted["stream_ends"].items()) or "none"
            lines.append(
                f"  door {DOOR_NAMES[door]}: {counted['streams']} streams opened ({ends}); "
                f"{counted['actions_acknowledged']} actions acknowledged"
            )
        if figures["refusals"]:
            lines.append("refusals: " + ", ".join(f"{k} x{v}" for k, v in figures["refusals"].items()))
        for odd in self.recorder.odd_refusals[:10]:
            lines.append(f"unexplained refusal: {odd}")
        for stream in [s for s in self.recorder.streams if s.detail][:10]:
            lines.append(
                f"stream ended {stream.end} ({DOOR_NAMES[stream.door]}, {stream.match_id}, "
                f"{stream.ended_ms}): {stream.detail}"
            )
        for failure in self.recorder.failures[:10]:
            lines.append(f"player failure: {failure}")
        lines.append("")
        lines.append("checks:")
        for check in self.checks:
            lines.append(f"  {'PASS' if check.ok else 'FAIL'}  {check.name}: {check.summary}")
            lines += [f"        {detail}" for detail in check.details]
        lines.append("")
        failed = [check.name for check in self.checks if not check.ok]
        lines.append("chaos: every check held" if not failed else f"chaos: FAILED: {', '.join(failed)}")
        return "\n".join(lines)
