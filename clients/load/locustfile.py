# mypy: ignore-errors
# (Locust is optional and not installed with the project: this file is for the ``locust`` command only,
# and is kept out of the type check and of the tests' imports.)
"""Locust: the harness's players under Locust's control. One Locust user is one pair of players that
plays matches one after another (Locust's ``wait_time`` between them, none by default).

    pip install locust
    GATEWAY_CALL_RATE=100000 GATEWAY_CALL_BURST=100000 make run          # in another terminal
    LOAD_OPTIONS="--families chess=3,gin=2 --think-ms 200 --max-plies 200" \\
        locust -f clients/load/locustfile.py --host 127.0.0.1:50050 --headless -u 20 -r 2 -t 60s

``LOAD_OPTIONS`` takes the options of ``skillclassics load`` that shape a match (``--families``, whose
counts become the Locust user classes' weights; ``--think-ms``, ``--think-jitter-ms``, ``--max-plies``,
``--pairing``, ``--minutes``, ``--increment``, ``--option``, ``--strategy``, ``--connections``,
``--stall``, ``--seed``, ``--data-dir``); how many pairs play and for how long is Locust's (``-u``,
``-r``, ``-t``). Each family is a user class (``ChessPair``, ``GinPair``, ``GoPair``...) that can also be
picked by name on the command line.

``skirmish`` in ``--families`` (``--families chess=2,gin=2,skirmish=1``; in the default mix) is the
``SkirmishPair`` user class: pairs that play chess with ``variant=skirmish`` (Skirmish Chess). They are
played by a harness process of their own (the same options, with ``--option skirmish.preset=wings`` or
``--strategy skirmish=duelist`` for theirs; :data:`clients.load.cli.PAIR_VARIANTS`), so their requests
are named ``SubmitAction chess`` like standard chess's, and ``match skirmish`` per pair.

Locust runs on gevent, which monkey-patches threads, sockets and selectors; ``grpc.aio`` cannot run
under it. So each Locust process starts the harness as a child process (``python -m
clients.load.bridge``, :mod:`clients.load.bridge`), asks it to play pairs and turns what it measures
into Locust requests: ``SubmitAction <family>`` and the refusals by operation (type ``grpc``),
``submit to opponent update <family>`` and ``match setup <family>`` (type ``latency``), and one
``match <family>`` per pair (its whole length; a failure if a player failed). The players, their
pairing, play and timing are the same code as ``skillclassics load``'s, except that they play over
the unary transport (``--transport unary``: a ``WatchMatch`` stream and a ``SubmitAction`` call per
action), as Locust's gRPC model is one timed request and its response.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import gevent
from gevent.event import AsyncResult
from locust import User, constant, events, task

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # locust imports this file by path
    sys.path.insert(0, str(ROOT))

from clients.load.cli import PAIR_VARIANTS, bridge_arguments, families_argument  # noqa: E402
from clients.load.harness import parse_families  # noqa: E402

OPTIONS = shlex.split(os.environ.get("LOAD_OPTIONS", ""))
"""The harness options for the bridge (the match's shape; see the module docstring)."""
DEFAULT_FAMILIES = "chess=2,gin=2,skirmish=1"

FAMILIES = families_argument(OPTIONS, DEFAULT_FAMILIES)
PLANS = parse_families(FAMILIES)
"""Every kind of pair: the families, and the variants of :data:`PAIR_VARIANTS` (``skirmish``)."""
BRIDGE_OPTIONS = {kind: bridge_arguments(OPTIONS, kind, FAMILIES) for kind in (None, *PAIR_VARIANTS)}
"""The options of each harness process: ``None`` plays the families, ``"skirmish"`` Skirmish Chess."""


class BridgeFailed(Exception):
    """The harness child process could not start playing (its reason)."""


class Refused(Exception):
    """A call the gateway refused (the status code), as a Locust failure."""


class _Bridge:
    """The harness child process of this Locust process, shared by its users."""

    def __init__(self, environment, options: list[str]) -> None:
        self.environment = environment
        host = environment.host or os.environ.get("GATEWAY_ADDRESS") or "127.0.0.1:50050"
        host = host.split("://", 1)[-1].rstrip("/")
        bridge = [sys.executable, "-m", "clients.load.bridge", "--gateway", host, "--quiet"]
        argv = [*bridge, "--transport", "unary", *options]
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
        self.ready = AsyncResult()
        self.waiting: dict[int, AsyncResult] = {}
        self.ids = itertools.count(1)
        self.reader = gevent.spawn(self._read)

    def _read(self) -> None:
        fire = self.environment.events.request.fire
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            kind = event.get("ev")
            if kind == "request":
                error = event.get("error")
                fire(
                    request_type=event["type"],
                    name=event["name"],
                    response_time=event["ms"],
                    response_length=0,
                    exception=Refused(error) if error else None,
                    context={},
                )
            elif kind == "done":
                waiting = self.waiting.pop(event["id"], None)
                if waiting is not None:
                    waiting.set(event)
            elif kind == "ready":
                self.ready.set(True)
            elif kind == "fatal":
                failure = BridgeFailed(event.get("error", "the harness stopped"))
                if not self.ready.ready():
                    self.ready.set_exception(failure)
                for waiting in self.waiting.values():
                    waiting.set_exception(failure)
                self.waiting.clear()
        failure = BridgeFailed(f"the harness process ended (exit status {self.process.wait()})")
        if not self.ready.ready():
            self.ready.set_exception(failure)
        for waiting in self.waiting.values():
            waiting.set_exception(failure)
        self.waiting.clear()

    def _send(self, command: dict) -> None:
        try:
            self.process.stdin.write(json.dumps(command).encode() + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as error:
            raise BridgeFailed(f"the harness process is gone: {error}") from None

    def play(self, family: str) -> dict:
        """One pair's match(es) of ``family``, to the end: the bridge's ``done`` event."""
        self.ready.get(timeout=60)
        pair_id = next(self.ids)
        result = AsyncResult()
        self.waiting[pair_id] = result
        self._send({"op": "pair", "id": pair_id, "family": family})
        try:
            return result.get()
        except gevent.GreenletExit:  # the user is being stopped: its match is resigned
            self.waiting.pop(pair_id, None)
            with contextlib.suppress(BridgeFailed):
                self._send({"op": "cancel", "id": pair_id})
            raise

    def stop(self) -> None:
        """Resign every match still being played and end the child process."""
        try:
            self._send({"op": "stop"})
            self.process.stdin.close()
        except (BridgeFailed, OSError, ValueError):
            pass
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.kill(block=False)


_bridges: dict[str | None, _Bridge] = {}


def bridge(environment, kind: str | None = None) -> _Bridge:
    """The harness process of ``kind`` of pair (``None``: the families; ``"skirmish"``)."""
    found = _bridges.get(kind)
    if found is None or found.process.poll() is not None:
        found = _bridges[kind] = _Bridge(environment, BRIDGE_OPTIONS[kind] or [])
    return found


@events.test_stop.add_listener
def _stop_bridge(environment, **_kwargs) -> None:
    for kind in list(_bridges):
        _bridges.pop(kind).stop()


@events.quitting.add_listener
def _quit_bridge(environment, **_kwargs) -> None:
    _stop_bridge(environment)


class PairOfPlayers(User):
    """Two fresh players that pair up and play a match to the end, again and again."""

    abstract = True
    family = "chess"
    kind: str | None = None
    """A pair variant of :data:`PAIR_VARIANTS` (``"skirmish"``), or ``None`` for a family as it is."""
    wait_time = constant(0)

    @task
    def play_a_match(self) -> None:
        outcome = bridge(self.environment, self.kind).play(self.family)
        failed = outcome.get("failed", False)
        self.environment.events.request.fire(
            request_type="match",
            name=f"match {self.kind or self.family}",
            response_time=outcome.get("ms", 0),
            response_length=len(outcome.get("matches", ())),
            exception=Refused("a player failed (see the other failures)") if failed else None,
            context={"matches": outcome.get("matches", [])},
        )


for _plan in PLANS:
    _name = f"{_plan.name.capitalize()}Pair"
    _variant = PAIR_VARIANTS.get(_plan.name)
    _family = _variant[0] if _variant is not None else _plan.name
    _what = f"{_family} with {_variant[1]}" if _variant is not None else _plan.name
    globals()[_name] = type(
        _name,
        (PairOfPlayers,),
        {
            "family": _family,
            "kind": _plan.name if _variant is not None else None,
            "weight": _plan.concurrency,
            "abstract": False,
            "__module__": __name__,
            "__doc__": f"A pair of players playing {_what} (weight {_plan.concurrency}).",
        },
    )
