"""A bounded, localhost-only chaos run (``make chaos``, ``python -m tools.chaos``; docs/chaos.md).

Recording players play matches of every family through the gateway of a whole stack (on a private
PostgreSQL server, :mod:`tools.pgcluster`) while a controller kills its services with SIGKILL and
SIGTERM, restarts them and stops the database for seconds at a time, on a seeded schedule. Then the
checks (:mod:`tools.chaos.checks`) hold what the players were told against what the database holds.
"""

from tools.chaos.config import FAMILIES, ChaosConfig, FamilyPlan
from tools.chaos.report import ChaosReport
from tools.chaos.run import run_chaos
from tools.chaos.schedule import POSTGRES, Fault, make_schedule

__all__ = [
    "FAMILIES",
    "POSTGRES",
    "ChaosConfig",
    "ChaosReport",
    "FamilyPlan",
    "Fault",
    "make_schedule",
    "run_chaos",
]
