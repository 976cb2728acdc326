"""``python -m tools.chaos``: one chaos run, configured by ``CHAOS_SEED``, ``CHAOS_SECONDS``,
``CHAOS_MATCHES``, ``CHAOS_KILL_RATE``, ``CHAOS_FAMILIES``, ``CHAOS_MOVE_DELAY`` (docs/chaos.md); exits 1
when a check fails, 2 when the run could not be made."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from tools.chaos.config import ChaosConfig
from tools.chaos.run import run_chaos


def main() -> int:
    try:
        config = ChaosConfig.from_env()
    except ValueError as error:
        print(f"chaos: {error}", file=sys.stderr)
        return 2
    report = asyncio.run(run_chaos(config))
    print(report.text())
    target = os.environ.get("CHAOS_JSON", "").strip()
    if target:
        with open(target, "w", encoding="utf-8") as out:
            json.dump(report.details(), out, indent=2)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
