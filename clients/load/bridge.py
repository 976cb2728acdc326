"""The harness as a child process that another program drives over pipes: what the Locust file uses.

Locust runs on gevent and monkey-patches threads, sockets and selectors, under which ``grpc.aio`` (and
so the harness's players) cannot run. The Locust file therefore starts this module as an ordinary
process, ``python -m clients.load.bridge [the harness's options]``, and talks to it in JSON lines:

* in (standard input): ``{"op": "pair", "id": 7, "family": "chess"}`` plays one pair's match
  (:meth:`~clients.load.harness.Engine.play_pair`); ``{"op": "cancel", "id": 7}`` stops that pair (its
  match is resigned, so its players end on the final update; a pair still pairing is cancelled after
  a few seconds); ``{"op": "stop"}`` (or the end of the input) does that for every pair and exits;
* out (standard output): ``{"ev": "ready"}`` once the gateway answered the probe;
  ``{"ev": "request", "type": ..., "name": ..., "ms": ..., "error": ...}`` for each timed call, each
  submit-to-opponent-update and each refusal (``type`` ``grpc`` or ``latency``, ``name`` such as
  ``SubmitAction chess``, ``error`` the status code name or ``null``); ``{"ev": "done", "id": 7,
  "failed": false, "ms": ..., "matches": [...]}`` when a pair ended; ``{"ev": "fatal", "error": ...}``
  when the run cannot work (then it exits 1).

The players, their pairing and play, the measurements and the rate-limit handling are the harness's
own (:mod:`clients.load.harness`); only the scheduling is the driver's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import IO, Any

from clients.load.cli import UsageError, build_parser, config_from_args
from clients.load.harness import Engine, LoadConfig, LoadError, Metrics, TokenMinter
from clients.player import DevKeyMissing
from libs.runtime import eventloop

__all__ = ["BridgeMetrics", "main", "serve"]

_REQUEST_TYPES = {"submit_action": "grpc", "opponent_update": "latency", "match_setup": "latency"}
_REQUEST_NAMES = {
    "submit_action": "SubmitAction",
    "opponent_update": "submit to opponent update",
    "match_setup": "match setup",
}


class _Out:
    """JSON lines to a binary stream, flushed at most every few milliseconds (or at once on demand)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.pending: list[bytes] = []

    def emit(self, event: dict[str, Any], *, now: bool = False) -> None:
        self.pending.append(json.dumps(event, separators=(",", ":")).encode() + b"\n")
        if now:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            data, self.pending = b"".join(self.pending), []
            with contextlib.suppress(BrokenPipeError, ValueError):
                self.stream.write(data)
                self.stream.flush()

    async def keep_flushing(self, every_s: float = 0.02) -> None:
        while True:
            await asyncio.sleep(every_s)
            self.flush()


class BridgeMetrics(Metrics):
    """The harness's metrics, each timing and refusal also sent out as a ``request`` event."""

    def __init__(self, families: Sequence[str], out: _Out) -> None:
        super().__init__(families)
        self.out = out

    def latency(self, family_name: str, kind: str, nanoseconds: int) -> None:
        super().latency(family_name, kind, nanoseconds)
        if self.recording:
            self.out.emit(
                {
                    "ev": "request",
                    "type": _REQUEST_TYPES.get(kind, "latency"),
                    "name": f"{_REQUEST_NAMES.get(kind, kind)} {family_name}",
                    "ms": round(nanoseconds / 1e6, 3),
                    "error": None,
                }
            )

    def error(self, operation: str, code: str) -> None:
        super().error(operation, code)
        if self.recording:
            self.out.emit({"ev": "request", "type": "grpc", "name": operation, "ms": 0, "error": code})


async def _lines(stream: IO[bytes]) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stream)
    return reader


async def serve(config: LoadConfig, tokens: TokenMinter, commands: asyncio.StreamReader, out: _Out) -> int:
    """Play pairs as ``commands`` ask until ``stop`` or the end of the input; the exit status."""
    metrics = BridgeMetrics([plan.name for plan in config.families], out)
    pairs: dict[int, asyncio.Task[None]] = {}
    stopping: set[asyncio.Task[None]] = set()
    flusher = asyncio.create_task(out.keep_flushing())
    async with Engine(config, metrics, tokens) as engine:
        try:
            await engine.probe()
        except LoadError as error:
            out.emit({"ev": "fatal", "error": str(error)}, now=True)
            flusher.cancel()
            return 1
        out.emit({"ev": "ready"}, now=True)

        async def play(pair_id: int, family_name: str) -> None:
            began = time.monotonic()
            failed = True
            cancelled = False
            match_ids: tuple[str, ...] = ()
            try:
                outcome = await engine.play_pair(family_name, pair_id)
                failed, match_ids = outcome.failed, outcome.match_ids
            except asyncio.CancelledError:
                cancelled = True
                raise
            finally:
                pairs.pop(pair_id, None)
                out.emit(
                    {
                        "ev": "done",
                        "id": pair_id,
                        "family": family_name,
                        "failed": failed and not cancelled,
                        "cancelled": cancelled,
                        "ms": round((time.monotonic() - began) * 1000, 1),
                        "matches": list(match_ids),
                    },
                    now=True,
                )
                if engine.fatal is not None:
                    out.emit({"ev": "fatal", "error": str(engine.fatal)}, now=True)

        try:
            while True:
                line = await commands.readline()
                if not line:
                    break
                try:
                    command = json.loads(line)
                    op = command["op"]
                except (ValueError, KeyError, TypeError):
                    out.emit({"ev": "error", "error": f"unreadable command {line[:200]!r}"}, now=True)
                    continue
                if op == "stop":
                    break
                if op == "pair":
                    pair_id = int(command["id"])
                    family_name = str(command.get("family") or config.families[0].name)
                    if family_name not in engine.adapters:
                        out.emit({"ev": "done", "id": pair_id, "failed": True, "ms": 0, "matches": []})
                        out.emit({"ev": "error", "error": f"{family_name} is not one of --families"})
                        continue
                    pairs[pair_id] = asyncio.create_task(play(pair_id, family_name), name=f"pair-{pair_id}")
                elif op == "cancel":
                    pair_id = int(command["id"])
                    task = pairs.get(pair_id)
                    if task is not None:
                        stopper = asyncio.create_task(_stop_pair(engine, pair_id, task))
                        stopping.add(stopper)
                        stopper.add_done_callback(stopping.discard)
                else:
                    out.emit({"ev": "error", "error": f"unknown op {op!r}"})
        finally:
            metrics.recording = False
            await engine.cut(engine.stop_all(), config.drain_s)
            tasks = list(pairs.values())
            if tasks:
                await asyncio.wait(tasks, timeout=3)
            unfinished = engine.unfinished()
            for task in [*tasks, *stopping]:
                task.cancel()
            await asyncio.gather(*tasks, *stopping, return_exceptions=True)
            await engine.cut(unfinished, config.drain_s)
            flusher.cancel()
            out.flush()
    return 0


async def _stop_pair(engine: Engine, pair_id: int, task: asyncio.Task[None]) -> None:
    """Resign the pair's match so that its players end on the final update; cancel the pair if that
    does not happen within a few seconds (one still pairing)."""
    await engine.cut(engine.stop_pair(pair_id), 5)
    done, _ = await asyncio.wait({task}, timeout=5)
    if not done:
        task.cancel()


async def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    parser.prog = "python -m clients.load.bridge"
    args = parser.parse_args(argv)
    args.quiet = True
    env = dict(os.environ)
    if args.data_dir:
        env["DATA_DIR"] = args.data_dir
    out = _Out(sys.stdout.buffer)
    try:
        config = config_from_args(args, env)
        tokens = TokenMinter(env)
    except (UsageError, DevKeyMissing, ValueError) as error:
        out.emit({"ev": "fatal", "error": str(error)}, now=True)
        return 2
    commands = await _lines(sys.stdin.buffer)
    return await serve(config, tokens, commands, out)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m clients.load.bridge [the options of skillclassics load]``."""
    try:
        return eventloop.run(_main(argv))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
