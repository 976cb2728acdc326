"""The faults of a chaos run, drawn from a seed: the same seed and settings give the same schedule."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

POSTGRES: Final = "postgres"
"""The target that stands for the run's PostgreSQL server."""

How = Literal["SIGKILL", "SIGTERM", "stop-fast", "stop-immediate"]


@dataclass(frozen=True, slots=True)
class Fault:
    """At ``at_s`` seconds into the run, end ``target`` (``how``) and bring it back ``down_s`` later."""

    at_s: float
    target: str
    """A service of the stack, or :data:`POSTGRES`."""
    how: How
    down_s: float

    def describe(self) -> str:
        return f"{self.at_s:6.1f} s  {self.how:<14} {self.target:<12} down {self.down_s:.1f} s"


WARMUP_S: Final = 4.0
"""No fault in the first seconds: matches get going first."""
QUIET_END_S: Final = 3.0
"""No fault in the last seconds of the run."""


def make_schedule(seed: int, seconds: float, rate_per_min: float, services: Sequence[str]) -> list[Fault]:
    """Faults at random instants between the warm-up and the quiet end, ``rate_per_min`` on average (each
    gap between half and one and a half times the mean, so that the run is shaken evenly). Targets come
    from a shuffled round of every service and the database, round after round, so that a long enough run
    hits each of them; each fault is SIGKILL or SIGTERM (for the database: a fast or an immediate stop),
    down for 0.5-3 s (the database 2-6 s)."""
    rng = random.Random(seed)
    targets = [*services, POSTGRES]
    faults: list[Fault] = []
    at = WARMUP_S
    end = seconds - QUIET_END_S
    pending: list[str] = []
    if rate_per_min <= 0:
        return faults
    mean_gap = 60.0 / rate_per_min
    while True:
        at += mean_gap * rng.uniform(0.5, 1.5)
        if at >= end:
            return faults
        if not pending:
            pending = list(targets)
            rng.shuffle(pending)
        target = pending.pop()
        how: How
        if target == POSTGRES:
            how = rng.choice(("stop-fast", "stop-immediate"))
            down = rng.uniform(2.0, 6.0)
        else:
            how = rng.choice(("SIGKILL", "SIGTERM"))
            down = rng.uniform(0.5, 3.0)
        faults.append(Fault(round(at, 2), target, how, round(down, 2)))
