"""``python -m libs.launcher`` (what ``make run`` runs): the whole stack on localhost until Ctrl-C.

It starts the services in order, prints where they answer once all report SERVING, prefixes their log
lines with their names, and on SIGINT or SIGTERM stops them and prints each exit code. It exits 0 when
every service stopped cleanly, 1 when one failed to start, crashed or stopped badly, 2 on bad usage.
A second Ctrl-C kills the services at once.

Scale-out on one machine: ``--shards`` / ``SHARDS`` processes of every rules family (``2``, or by family,
``chess=2,gin=3``, the others 1), ``--gateways`` / ``GATEWAYS`` gateways, ``--clock-shards`` /
``CLOCK_SHARDS`` clock shards and ``--matchmakers`` / ``MATCHMAKERS`` matchmaking replicas (default 1
each). Each replica has its own ports (:mod:`libs.runtime.ports`: replica n adds n × 200) and, for a
shard, its ``RULES_SHARD`` or ``CLOCK_SHARD``; matchmaking and every gateway are given every shard's
address, and the gateways and rules shards every matchmaking replica's. Several shards of a service (or
matchmaking replicas) share its store, so they need a database server: more than one rules or clock
shard or matchmaking replica requires ``DATABASE_URL`` to name PostgreSQL (several gateways are fine on
SQLite: the gateway has no database).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from libs.launcher.registry import SERVICES, available_services, parse_shards, scale_out
from libs.launcher.stack import Stack, StartError, describe_returncode
from libs.runtime import eventloop


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m libs.launcher",
        description="Start the SkillClassics services on localhost (SQLite under the data folder).",
    )
    parser.add_argument(
        "--port-offset",
        type=int,
        default=0,
        metavar="N",
        help="add N to every gRPC and metrics port (e.g. to run a second stack)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("DATA_DIR") or "data"),
        help="folder for the SQLite files and dev keys (default: $DATA_DIR or ./data)",
    )
    parser.add_argument(
        "--start-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long each service may take to report SERVING (default: 30)",
    )
    parser.add_argument(
        "--stop-timeout",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="how long each service may take to stop before it is killed (default: 15)",
    )
    parser.add_argument(
        "--shards",
        default=os.environ.get("SHARDS") or "1",
        metavar="N|FAMILY=N,...",
        help="rules shards per family: a count for all, or e.g. chess=2,gin=2 (default: $SHARDS or 1)",
    )
    parser.add_argument(
        "--gateways",
        type=int,
        default=os.environ.get("GATEWAYS") or "1",
        metavar="M",
        help="gateway processes (default: $GATEWAYS or 1)",
    )
    parser.add_argument(
        "--clock-shards",
        type=int,
        default=os.environ.get("CLOCK_SHARDS") or "1",
        metavar="K",
        help="clock shards; rules shard n uses clock shard n mod K (default: $CLOCK_SHARDS or 1)",
    )
    parser.add_argument(
        "--matchmakers",
        type=int,
        default=os.environ.get("MATCHMAKERS") or "1",
        metavar="R",
        help="matchmaking replicas (one pairing leader, all serve the lobby; default: $MATCHMAKERS or 1)",
    )
    parser.add_argument(
        "--service",
        action="append",
        metavar="NAME",
        choices=[spec.name for spec in SERVICES],
        help="start only this service (repeatable; default: every service that exists)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the stack until SIGINT or SIGTERM; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    available = available_services()
    services = available
    if args.service:
        missing = sorted(set(args.service) - {spec.name for spec in available})
        if missing:
            parser.error(f"not written yet (no module to run): {', '.join(missing)}")
        services = tuple(spec for spec in available if spec.name in args.service)
    try:
        services = scale_out(
            services,
            shards=parse_shards(args.shards),
            gateways=args.gateways,
            clock_shards=args.clock_shards,
            matchmakers=args.matchmakers,
        )
    except ValueError as error:
        parser.error(f"bad --shards, --gateways, --clock-shards or --matchmakers: {error}")
    sharded = sorted({spec.kind for spec in services if spec.replica > 0 and spec.kind != "gateway"})
    if sharded and not os.environ.get("DATABASE_URL", "").startswith("postgresql"):
        parser.error(
            f"several processes of {', '.join(sharded)} share one store: set DATABASE_URL to a PostgreSQL "
            "database (e.g. postgresql+asyncpg://postgres@127.0.0.1:5432/skillclassics)"
        )
    try:
        stack = Stack(
            services,
            port_offset=args.port_offset,
            data_dir=args.data_dir,
            start_timeout=args.start_timeout,
            stop_timeout=args.stop_timeout,
        )
    except ValueError as error:
        parser.error(str(error))
    return eventloop.run(run(stack))


async def run(stack: Stack) -> int:
    """Start ``stack``, print its endpoints, run until a signal or a crash, stop it."""
    stop_requested = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if stop_requested.is_set():
            _say("launcher: stopping now (SIGKILL)")
            stack.kill_all()
            return
        _say("launcher: stopping (again to kill at once)")
        stop_requested.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal)
    stopping = asyncio.create_task(stop_requested.wait())
    starting = asyncio.create_task(stack.start())
    crash = asyncio.create_task(stack.wait_for_crash())
    try:
        _say(f"launcher: starting {', '.join(spec.name for spec in stack.services)}")
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():  # interrupted while starting: start() stops what it started
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, StartError):
                await starting
            return _report(await stack.stop())
        try:
            starting.result()
        except StartError as error:
            _say(f"launcher: {error}", error=True)
            _report(await stack.stop())
            return 1
        _say(endpoint_table(stack))
        await asyncio.wait({crash, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if crash.done():
            exited = crash.result()
            _say(
                f"launcher: {exited.service} stopped on its own: {exited.reason}; stopping the rest",
                error=True,
            )
            _report(await stack.stop())
            return 1
        return _report(await stack.stop())
    finally:
        for task in (stopping, crash, starting):
            task.cancel()
        await stack.stop()  # nothing left to do unless something above raised


def endpoint_table(stack: Stack) -> str:
    """The services' addresses, metrics URLs and pids, and how to call one with ``buf curl``."""
    rows = [("service", "gRPC", "metrics", "pid")]
    rows += [(e.service, e.grpc_address, e.metrics_url, str(e.pid or "-")) for e in stack.endpoints()]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    lines = [f"SkillClassics stack is up (data in {stack.data_dir}):", ""]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)]
        lines.append("  " + "  ".join([*cells, row[3]]))
    buf = f"{_buf_command()} curl --protocol grpc --http2-prior-knowledge"
    scheme = "http"
    operator = stack.operator_certificates()
    if operator is not None:  # the backends take calls only over mutual TLS: as the operator
        ca, cert, key = (_relative(path) for path in (operator.ca, operator.certificate, operator.key))
        buf = f"{_buf_command()} curl --protocol grpc --cacert {ca} --cert {cert} --key {key}"
        scheme = "https"
    first = stack.services[0]
    lines += [
        "",
        "Call a backend with buf curl, as the operator (docs/security.md says what it may call), e.g.:",
    ]
    lines.append(f"  {buf} --list-methods {scheme}://{stack.address(first.name)}")
    for spec in stack.services:
        if spec.example is not None:
            method, data = spec.example
            lines.append(f"  {buf} --data {shlex.quote(data)} {scheme}://{stack.address(spec.name)}/{method}")
    routing = routing_table(stack)
    if routing:
        lines += ["", routing]
    lines.append("Ctrl-C stops the stack.")
    return "\n".join(lines)


def routing_table(stack: Stack) -> str:
    """Where matchmaking and the gateways send each family's matches, shard by shard (nothing when every
    service runs once: the table above says it all)."""
    if all(spec.replica == 0 for spec in stack.services):
        return ""
    lines = ["Shards (matchmaking and every gateway are given each family's list, in shard order):"]
    for spec in stack.services:
        if (
            spec.replica == 0
            and len(stack.replicas(spec.kind)) > 1
            and spec.kind not in ("matchmaking", "gateway")
        ):
            addresses = [stack.address(replica.name) for replica in stack.replicas(spec.kind)]
            lines.append(f"  {spec.kind}: {', '.join(f'{n}={a}' for n, a in enumerate(addresses))}")
    matchmakers = [stack.address(spec.name) for spec in stack.replicas("matchmaking")]
    if len(matchmakers) > 1:
        lines.append(
            f"  matchmaking replicas (one pairs, all serve the lobby; callers spread calls over them): "
            f"{', '.join(matchmakers)}"
        )
    gateways = [stack.address(spec.name) for spec in stack.replicas("gateway")]
    if gateways:
        lines.append(f"  players connect to any gateway: {', '.join(gateways)}")
    return "\n".join(lines)


def _report(exit_codes: dict[str, int]) -> int:
    for name, code in exit_codes.items():
        _say(f"launcher: {name} {describe_returncode(code)}")
    return 0 if all(code == 0 for code in exit_codes.values()) else 1


def _relative(path: Path) -> str:
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else str(path)


def _buf_command() -> str:
    """``buf`` from this virtualenv (relative to the working folder when inside it), else from PATH."""
    buf = Path(sys.executable).parent / "buf"
    if not buf.exists():
        return "buf"
    relative = os.path.relpath(buf)
    return relative if not relative.startswith("..") else str(buf)


def _say(text: str, *, error: bool = False) -> None:
    stream = sys.stderr if error else sys.stdout
    with contextlib.suppress(OSError, ValueError):
        print(text, file=stream, flush=True)
