"""``skillclassics load`` (also ``python -m clients.load``): drive a running stack through its gateway
with pairs of players, print progress each second and a table at the end, and write JSON and a PNG.

See ``docs/load-testing.md``. :func:`register` adds the command to the ``skillclassics`` parser (the
``_register_*`` convention of :mod:`clients.cli.main`); :func:`main` is the stand-alone entry point.

Exit status: 0 the run completed, 1 it could not start or stopped on an error (or ``--fail-on-errors``
and something was refused), 2 usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final, TypeAlias

from clients.families import InputError, family, family_names
from clients.load.harness import (
    TRANSPORTS,
    LoadConfig,
    LoadError,
    LoadRun,
    TokenMinter,
    new_run_id,
    parse_families,
)
from clients.load.procstat import discover_services, parse_services
from clients.load.report import build_report, render_table, write_json, write_png
from clients.player import DEFAULT_GATEWAY, DevKeyMissing
from libs.runtime import eventloop
from libs.runtime.config import DEFAULT_GC_THRESHOLDS
from libs.runtime.server import garbage_collector_settled

SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What ``register`` adds its sub-parser to (as in :mod:`clients.cli.main`)."""

__all__ = [
    "PAIR_VARIANTS",
    "add_arguments",
    "bridge_arguments",
    "config_from_args",
    "families_argument",
    "main",
    "register",
    "run_command",
]

PROG: Final = "skillclassics load"
EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
GATEWAY_VARIABLE: Final = "GATEWAY_ADDRESS"


class UsageError(Exception):
    """Options that do not make a run."""


def _per_family(text: str | None, what: str, convert: type[float] | type[str]) -> dict[str, object]:
    """``chess=3,gin=5`` → by family; a bare value applies to every family (key ``*``)."""
    found: dict[str, object] = {}
    if not text:
        return found
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition("=")
        if not sep:
            name, value = "*", part
        try:
            found[name.strip()] = convert(value.strip())
        except ValueError:
            raise UsageError(f"--{what}: {part!r} is not FAMILY=VALUE") from None
    return found


def _options(items: Sequence[str] | None) -> dict[str, dict[str, str]]:
    """``--option gin.variant=oklahoma`` (repeatable) → by family."""
    found: dict[str, dict[str, str]] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        name, dot, setting = key.partition(".")
        if not sep or not dot or not name or not setting:
            raise UsageError(f"--option {item!r}: give FAMILY.NAME=VALUE, e.g. gin.variant=oklahoma")
        found.setdefault(name.strip(), {})[setting.strip()] = value.strip()
    return found


PAIR_VARIANTS: Final[Mapping[str, tuple[str, Mapping[str, str]]]] = {
    "skirmish": ("chess", {"variant": "skirmish"}),
}
"""Kinds of pair the Locust file offers beside the families (``--families chess=2,skirmish=1``): a
family played with fixed options, by a harness process of its own (``SkirmishPair``: Skirmish Chess).
``--option skirmish.preset=wings`` and ``--strategy skirmish=duelist`` set its other options."""

_PER_FAMILY_FLAGS = ("--minutes", "--increment", "--strategy")


def families_argument(argv: Sequence[str], default: str = "chess=2,gin=2") -> str:
    """The value of ``--families`` in ``argv`` (the harness's options), or ``default``."""
    for index, item in enumerate(argv):
        if item == "--families" and index + 1 < len(argv):
            return argv[index + 1]
        if item.startswith("--families="):
            return item.split("=", 1)[1]
    return default


def bridge_arguments(argv: Sequence[str], variant: str | None, families: str) -> list[str] | None:
    """The harness options of one bridge process of the Locust file: ``argv`` with the pair variants of
    :data:`PAIR_VARIANTS` taken out (``variant`` ``None``: the families' bridge) or for only ``variant``
    (its family, with the variant's options and the ones ``argv`` names it by; ``--option skirmish.X=V``
    becomes ``--option chess.X=V``). ``families``: the ``--families`` value the Locust file reads. ``None``
    when that bridge has no pairs to play."""
    wanted: dict[str, str] = {}
    for part in families.split(","):
        name, _, count = part.strip().partition("=")
        name = name.strip()
        if name and (name == variant if variant is not None else name not in PAIR_VARIANTS):
            wanted[name] = count.strip()
    if not wanted:
        return None
    if variant is not None:
        wanted = {PAIR_VARIANTS[variant][0]: wanted[variant]}
    out_families = ",".join(f"{name}={count}" if count else name for name, count in wanted.items())
    out: list[str] = ["--families", out_families]
    items = list(argv)
    index = 0
    while index < len(items):
        item = items[index]
        flag, eq, value = item.partition("=")
        takes_value = flag in ("--families", "--option", *_PER_FAMILY_FLAGS)
        if not takes_value:
            out.append(item)
            index += 1
            continue
        if not eq:
            value = items[index + 1] if index + 1 < len(items) else ""
            index += 2
        else:
            index += 1
        kept = _bridge_value(flag, value, variant)
        if kept is not None:
            out += [flag, kept]
    if variant is not None:
        family_name, fixed = PAIR_VARIANTS[variant]
        for name, value in fixed.items():
            out += ["--option", f"{family_name}.{name}={value}"]
    return out


def _bridge_value(flag: str, value: str, variant: str | None) -> str | None:
    """What a bridge keeps of one ``flag value`` (see :func:`bridge_arguments`); ``None``: nothing."""
    if flag == "--families":
        return None
    if flag == "--option":
        owner, _, rest = value.partition(".")
        if variant is None:
            return None if owner.strip() in PAIR_VARIANTS else value
        return f"{PAIR_VARIANTS[variant][0]}.{rest}" if owner.strip() == variant else None
    parts = []
    for part in value.split(","):
        name, eq, setting = part.partition("=")
        if not eq or (variant is None and name.strip() not in PAIR_VARIANTS):
            parts.append(part)
        elif variant is not None and name.strip() == variant:
            parts.append(f"{PAIR_VARIANTS[variant][0]}={setting}")
    return ",".join(parts) or None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option of the command (shared by ``skillclassics load`` and ``python -m clients.load``)."""
    what = parser.add_argument_group("what to play")
    what.add_argument(
        "--families",
        default="chess=2,gin=2",
        metavar="NAME=N,...",
        help="matches at once per family, mixable (open loop: shares of the arrivals); "
        f"default chess=2,gin=2; families: {', '.join(family_names())}",
    )
    what.add_argument(
        "--minutes",
        metavar="[FAMILY=]M,...",
        help="main time per player (a lobby clock; default: "
        + ", ".join(f"{name} {family(name).quick_minutes:g}" for name in family_names())
        + ")",
    )
    what.add_argument(
        "--increment", metavar="[FAMILY=]S,...", help="seconds added per move (gin: 0, 5 or 10; default 0)"
    )
    what.add_argument(
        "--option",
        action="append",
        metavar="FAMILY.NAME=VALUE",
        help="a family option (repeatable): gin.variant=standard|straight|oklahoma, chess.ruleset=fide, "
        "chess.variant=skirmish (Skirmish Chess; with chess.preset, chess.odds, chess.draw_rule, "
        "chess.duel_clock...), backgammon.match_to=5, backgammon.cube=on, go.size=9",
    )
    what.add_argument(
        "--strategy",
        metavar="[FAMILY=]NAME,...",
        help="the players' bot strategy: random (default) or greedy (chess also duelist)",
    )
    what.add_argument(
        "--max-plies",
        type=int,
        default=200,
        metavar="N",
        help="the player to move resigns once the match is N moves long (0: no cap; default 200)",
    )
    what.add_argument(
        "--pairing",
        choices=("table", "queue"),
        default="table",
        help="table: one creates a table, the other lists and joins it (default); queue: both queue",
    )
    what.add_argument(
        "--transport",
        choices=TRANSPORTS,
        default="play",
        help="play: one Play stream per player for its updates and actions (default); "
        "unary: a WatchMatch stream and a SubmitAction call per action",
    )
    how = parser.add_argument_group("how hard")
    how.add_argument(
        "--mode",
        choices=("closed", "open"),
        default="closed",
        help="closed: keep N matches going, a new one when one ends (default); open: --rate new matches/s",
    )
    how.add_argument(
        "--rate", type=float, default=0.0, metavar="PER_S", help="open loop: new matches per second"
    )
    how.add_argument(
        "--poisson", action="store_true", help="open loop: random (exponential) gaps between arrivals"
    )
    how.add_argument(
        "--max-in-flight",
        type=int,
        default=10_000,
        metavar="N",
        help="open loop: arrivals while N matches are in flight are dropped and counted (default 10000)",
    )
    how.add_argument(
        "--think-ms", type=float, default=0.0, metavar="MS", help="think time before each move (default 0)"
    )
    how.add_argument(
        "--think-jitter-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="think time uniform in think-ms ± this (default 0)",
    )
    how.add_argument(
        "--ramp-up",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="reach full concurrency (or the full rate) over this long (default 0)",
    )
    how.add_argument(
        "--duration",
        type=float,
        metavar="SECONDS",
        help="stop after this long; matches still going are resigned (default 60 unless --matches)",
    )
    how.add_argument("--matches", type=int, metavar="N", help="stop once N matches have ended")
    how.add_argument(
        "--connections",
        type=int,
        default=8,
        metavar="N",
        help="HTTP/2 connections to the gateway shared by the players (default 8)",
    )
    how.add_argument(
        "--stall",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="a player whose stream brings nothing for this long fails its match (default 30)",
    )
    how.add_argument(
        "--outage-tolerance",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long a call refused UNAVAILABLE (a service or its database restarting) is retried "
        "before its match fails (default 30)",
    )
    how.add_argument("--seed", type=int, help="seed the players' choices (default: random)")
    how.add_argument("--run-id", help="prefix of the players' ids (default: load-<random>)")
    out = parser.add_argument_group("where and what to report")
    out.add_argument(
        "--gateway",
        metavar="HOST:PORT",
        help=f"the gateway (default: ${GATEWAY_VARIABLE} or {DEFAULT_GATEWAY})",
    )
    out.add_argument(
        "--data-dir",
        metavar="DIR",
        help="where the stack keeps its token key, for development tokens (default: $DATA_DIR or ./data)",
    )
    out.add_argument("--json", metavar="OUT.json", help="write the report as JSON")
    out.add_argument("--png", metavar="OUT.png", help="draw the HDR latency plot (needs matplotlib)")
    out.add_argument(
        "--services",
        metavar="auto|NAME=PID,...",
        help="report CPU and memory of the stack's services: auto finds make run's processes",
    )
    out.add_argument("--quiet", action="store_true", help="no progress line each second")
    out.add_argument(
        "--fail-on-errors", action="store_true", help="exit 1 when any call was refused or a match failed"
    )


def register(subparsers: SubParsers) -> None:
    """Add ``load`` to the ``skillclassics`` command line."""
    parser = subparsers.add_parser(
        "load",
        help="load-test a running stack through its gateway with pairs of bot players",
        description=(
            "Pairs of fresh players sign in, pair up through matchmaking and play real matches through "
            "the gateway; prints progress each second and a table of figures at the end "
            "(docs/load-testing.md). Run the stack with raised rate limits: "
            "GATEWAY_CALL_RATE=100000 GATEWAY_CALL_BURST=100000 make run."
        ),
    )
    add_arguments(parser)
    parser.set_defaults(async_handler=run_command)


def config_from_args(args: argparse.Namespace, env: Mapping[str, str]) -> LoadConfig:
    """The run the options describe; :class:`UsageError` with the reason."""
    try:
        plans = parse_families(args.families)
    except ValueError as error:
        raise UsageError(f"--families: {error}") from None
    minutes = _per_family(args.minutes, "minutes", float)
    increments = _per_family(args.increment, "increment", float)
    strategies = _per_family(args.strategy, "strategy", str)
    options = _options(args.option)
    names = {plan.name for plan in plans}
    for what, given in (("minutes", minutes), ("increment", increments), ("strategy", strategies)):
        unknown = sorted(set(given) - names - {"*"})
        if unknown:
            raise UsageError(f"--{what} names {', '.join(unknown)}, which --families does not play")
    unknown = sorted(set(options) - names)
    if unknown:
        raise UsageError(f"--option names {', '.join(unknown)}, which --families does not play")

    def pick(given: dict[str, object], name: str) -> object | None:
        return given.get(name, given.get("*"))

    resolved = []
    for plan in plans:
        chosen_minutes = pick(minutes, plan.name)
        chosen_increment = pick(increments, plan.name)
        chosen_strategy = pick(strategies, plan.name)
        resolved.append(
            replace(
                plan,
                minutes=float(chosen_minutes) if isinstance(chosen_minutes, float) else None,
                increment_s=float(chosen_increment) if isinstance(chosen_increment, float) else 0.0,
                options=options.get(plan.name, {}),
                strategy=str(chosen_strategy) if chosen_strategy is not None else "random",
            )
        )
    duration = args.duration if args.duration is not None else (None if args.matches else 60.0)
    config = LoadConfig(
        families=tuple(resolved),
        gateway=args.gateway or env.get(GATEWAY_VARIABLE) or DEFAULT_GATEWAY,
        mode=args.mode,
        rate=args.rate,
        poisson=args.poisson,
        duration_s=duration,
        matches=args.matches,
        ramp_up_s=args.ramp_up,
        think_ms=args.think_ms,
        think_jitter_ms=args.think_jitter_ms,
        max_plies=args.max_plies or None,
        pairing=args.pairing,
        transport=args.transport,
        connections=args.connections,
        stall_s=args.stall,
        outage_s=args.outage_tolerance,
        max_in_flight=args.max_in_flight,
        run_id=args.run_id or new_run_id(),
        seed=args.seed,
        progress_s=0.0 if args.quiet else 1.0,
    )
    try:
        config.validate()
    except (ValueError, InputError) as error:
        raise UsageError(str(error)) from None
    return config


def _error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)


def _note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def run_command(args: argparse.Namespace) -> int:
    """The command: run, print the table, write the files; the exit status."""
    env = dict(os.environ)
    if args.data_dir:
        env["DATA_DIR"] = args.data_dir
    try:
        config = config_from_args(args, env)
        services: dict[str, int] = {}
        if args.services:
            if args.services.strip() == "auto":
                services = discover_services(config.gateway)
                if not services:
                    _note("no service processes found for this gateway (python -m services.*): not measured")
            else:
                services = parse_services(args.services)
    except (UsageError, ValueError) as error:
        _error(str(error))
        return EXIT_USAGE
    try:
        tokens = TokenMinter(env)
    except (DevKeyMissing, ValueError) as error:
        _error(str(error))
        return EXIT_FAILED
    run = LoadRun(config, tokens=tokens, services=services, progress=sys.stderr)
    _note(f"load run {config.describe()}")
    if services:
        _note("measuring " + ", ".join(f"{name} (pid {pid})" for name, pid in services.items()))
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, run.request_stop)
    try:
        with garbage_collector_settled(DEFAULT_GC_THRESHOLDS):  # as the services do: no long pauses
            result = await run.run()
    except LoadError as error:
        _error(str(error))
        return EXIT_FAILED
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
    report = build_report(result)
    print(render_table(report), flush=True)
    if args.json:
        write_json(report, args.json)
        _note(f"wrote {args.json}")
    if args.png:
        skipped = write_png(report, args.png)
        _note(f"skipped the PNG: {skipped}" if skipped else f"wrote {args.png}")
    if result.stopped_by == "error":
        return EXIT_FAILED
    if args.fail_on_errors and (report["errors"] or report["matches"]["failed"]):
        return EXIT_FAILED
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m clients.load",
        description="Load-test a running SkillClassics stack through its gateway (docs/load-testing.md).",
    )
    add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m clients.load [OPTIONS]``."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return eventloop.run(run_command(args))
    except KeyboardInterrupt:
        return 130
