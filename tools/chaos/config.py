"""What a chaos run does: the families it plays, how long, how hard it shakes the stack, and the bounds its
checks hold the platform to.

Each family is one entry of :data:`FAMILIES`; a new family is one more line, once its
rules service is in the launcher's registry and its client in :mod:`clients.families`.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from tools.chaos.schedule import Fault

DOWNTIME_CHARGE_BOUND_MS: Final = 1_000
"""The most a player's clock may be charged for time the platform could not take their move (their rules
shard, the gateway or the database down, or the fairness service for a family that draws): the downtime
credit (docs/match-runtime.md) must give the rest back."""
STREAM_SILENCE_BOUND_S: Final = 8.0
"""A match stream that delivers nothing for longer than this while its match is live and nothing it
depends on is down (outage windows widened by :data:`RECOVERY_GRACE_S`) is hung."""
RECOVERY_GRACE_S: Final = 3.0
"""After a service is SERVING again, how long clients and the services that call it may take to find it
(reconnect backoff, a shard re-reading its matches): silence within this is not a hang."""
WATCHDOG_S: Final = 15.0
"""A player whose stream stays silent this long gives up on it and opens another (and the silence is
judged by the hung-stream check)."""
OUTBOX_WAIT_S: Final = 30.0
"""At the end, how long to wait for every finished match's result to reach matchmaking and fairness."""


@dataclass(frozen=True, slots=True)
class FamilyPlan:
    """How a chaos run plays one game family."""

    name: str
    """The family (``clients.families``)."""
    service: str
    """The rules service (shard) that runs its matches (``libs.launcher.registry``)."""
    max_plies: int
    """The ply cap: the player to move resigns past it, so random bots finish."""
    minutes: float
    """Main time per player (no increment, so the clock history tells exactly what was charged)."""
    draws: bool = False
    """Whether its matches draw from the fairness service (then a fairness outage holds them up)."""


FAMILIES: Final[Mapping[str, FamilyPlan]] = {
    "chess": FamilyPlan("chess", "rules-chess", max_plies=60, minutes=5),
    "gin": FamilyPlan("gin", "rules-gin", max_plies=60, minutes=5, draws=True),
    "backgammon": FamilyPlan("backgammon", "rules-backgammon", max_plies=60, minutes=5, draws=True),
    "go": FamilyPlan("go", "rules-go", max_plies=60, minutes=5),
    # Generals' clock is per move (minutes=1: a fresh minute a move, the third strike losing).
    "generals": FamilyPlan("generals", "rules-generals", max_plies=60, minutes=1, draws=True),
}
"""Every family a chaos run plays: one entry each."""


@dataclass(frozen=True, slots=True)
class ChaosConfig:
    """One chaos run (``python -m tools.chaos`` reads it from ``CHAOS_*`` variables: :meth:`from_env`)."""

    seed: int
    seconds: float = 300.0
    """How long matches are started and faults injected; then every match is played out (resigned)."""
    matches_per_family: int = 3
    """Matches of each family in play at once (each pair of players plays match after match)."""
    kill_rate_per_min: float = 6.0
    """Faults per minute (a service killed or stopped, or the database stopped), on average."""
    families: tuple[str, ...] = tuple(FAMILIES)
    move_delay_s: float = 0.15
    """Each player's think time, so that matches last long enough for faults to hit them mid-play."""
    faults: tuple[Fault, ...] | None = None
    """A fixed schedule instead of the seeded random one (the short test's)."""
    drain_s: float = 60.0
    """After ``seconds``, how long the matches still being played may take to end (their players resign)."""
    extra_env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ChaosConfig:
        env = os.environ if env is None else env
        seed_text = env.get("CHAOS_SEED", "").strip()
        families = tuple(
            f.strip() for f in env.get("CHAOS_FAMILIES", ",".join(FAMILIES)).split(",") if f.strip()
        )
        for name in families:
            if name not in FAMILIES:
                raise ValueError(f"CHAOS_FAMILIES: unknown family {name!r} (known: {', '.join(FAMILIES)})")
        return cls(
            seed=int(seed_text) if seed_text else secrets.randbelow(2**31),
            seconds=float(env.get("CHAOS_SECONDS", "300")),
            matches_per_family=int(env.get("CHAOS_MATCHES", "3")),
            kill_rate_per_min=float(env.get("CHAOS_KILL_RATE", "6")),
            families=families,
            move_delay_s=float(env.get("CHAOS_MOVE_DELAY", "0.15")),
        )

    @property
    def plans(self) -> tuple[FamilyPlan, ...]:
        return tuple(FAMILIES[name] for name in self.families)

    def describe(self) -> str:
        return (
            f"seed {self.seed} (CHAOS_SEED={self.seed} repeats this schedule), {self.seconds:g} s, "
            f"{self.matches_per_family} matches at once per family ({', '.join(self.families)}), "
            f"{self.kill_rate_per_min:g} faults/min"
        )
