"""Run the benchmarks: ``python -m benchmarks [NAME ...]`` (all of them by default)."""

from __future__ import annotations

import argparse
import importlib
import sys

from libs.runtime import eventloop

BENCHMARKS = {
    "grpc": "benchmarks.grpc_baseline",
    "ceiling": "benchmarks.ceiling",
    "fairness": "benchmarks.fairness",
    "clock": "benchmarks.clock",
    "chess": "benchmarks.chess",
    "gin": "benchmarks.gin_engine",
    "backgammon": "benchmarks.backgammon",
    "backgammon-native": "benchmarks.backgammon_native",
    "go": "benchmarks.go",
    "generals": "benchmarks.generals",
    "skirmish": "benchmarks.skirmish",
    "matchmaking": "benchmarks.matchmaking",
    "gateway_e2e": "benchmarks.gateway_e2e",
    "platform_load": "benchmarks.platform_load",
    "mtls": "benchmarks.mtls",
    "contracts": "benchmarks.contracts",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", choices=[*BENCHMARKS, []], help="which benchmarks (default: all)")
    args = parser.parse_args(argv)
    for name in args.names or list(BENCHMARKS):
        module = importlib.import_module(BENCHMARKS[name])
        print(f"\n## {name}")
        eventloop.run(module.run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
