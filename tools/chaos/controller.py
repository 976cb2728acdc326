"""The controller: injects the schedule's faults into a running stack and its PostgreSQL server, brings
each target back, and keeps the outage windows (Unix milliseconds) the checks judge the clients by.

A service that ends without being asked (a crash, or an exit because its database went away) is an
outage too: it is restarted once nothing else is being done to the stack, and reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from libs.launcher import Stack, StartError
from tools.chaos.schedule import POSTGRES, Fault
from tools.pgcluster import PrivatePostgres, StopMode

RESTART_ATTEMPTS = 5


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class Outage:
    """A target that was down: from the signal (or stop, or unasked exit) until it was back."""

    target: str
    how: str
    start_ms: int
    end_ms: int | None = None
    """When it was SERVING (accepting connections) again; ``None``: it never came back."""
    exit_code: int | None = None
    down_s: float = 0.0
    """How long the schedule kept it down once it had ended."""
    exited_ms: int | None = None
    """When the process had ended (the database: was stopped)."""
    unasked: bool = False
    """It ended by itself (not one of the schedule's faults)."""
    problem: str = ""
    """What went wrong bringing it back (or injecting the fault)."""

    def window(self, until_ms: int) -> tuple[int, int]:
        return self.start_ms, self.end_ms if self.end_ms is not None else until_ms


class Controller:
    """Runs a fault schedule against ``stack`` and ``cluster``; :attr:`outages` is what happened."""

    def __init__(self, stack: Stack, cluster: PrivatePostgres, say: Callable[[str], None] = print) -> None:
        self.stack = stack
        self.cluster = cluster
        self.say = say
        self.outages: list[Outage] = []
        self._lock = asyncio.Lock()
        """Held while a fault or a restart is under way: one change to the stack at a time."""

    async def run(self, faults: list[Fault], started: float, stop: asyncio.Event) -> None:
        """Inject each fault at its time (``started``: the run's ``time.monotonic()`` origin) until
        ``stop``."""
        for fault in faults:
            delay = started + fault.at_s - time.monotonic()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                return
            async with self._lock:
                await self.inject(fault)

    async def inject(self, fault: Fault) -> Outage:
        outage = Outage(fault.target, fault.how, now_ms(), down_s=fault.down_s)
        self.outages.append(outage)
        self.say(f"chaos: {fault.how} {fault.target} for {fault.down_s:.1f} s")
        if fault.target == POSTGRES:
            mode: StopMode = "immediate" if fault.how == "stop-immediate" else "fast"
            try:
                await asyncio.to_thread(self.cluster.stop, mode)
            except Exception as error:  # the server may already be gone: start it all the same
                outage.problem = f"stop: {error}"
            outage.exited_ms = now_ms()
            await asyncio.sleep(fault.down_s)
            for attempt in range(RESTART_ATTEMPTS):
                try:
                    await asyncio.to_thread(self.cluster.start)
                    break
                except Exception as error:
                    outage.problem = f"start (attempt {attempt + 1}): {error}"
                    await asyncio.sleep(1.0)
            else:
                return outage
            outage.end_ms = now_ms()
            return outage
        sig = signal.SIGKILL if fault.how == "SIGKILL" else signal.SIGTERM
        try:
            outage.exit_code = await self.stack.kill(fault.target, sig)
        except RuntimeError as error:  # not running: an unasked exit is being dealt with
            outage.problem = str(error)
        outage.exited_ms = now_ms()
        await asyncio.sleep(fault.down_s)
        await self._restart(outage)
        return outage

    async def _restart(self, outage: Outage) -> None:
        for attempt in range(RESTART_ATTEMPTS):
            try:
                await self.stack.restart(outage.target)
            except StartError as error:
                outage.problem = f"restart (attempt {attempt + 1}): {error.reason}"
                self.say(f"chaos: {outage.target} did not come back: {error.reason}")
                await asyncio.sleep(1.0)
                continue
            outage.end_ms = now_ms()
            return

    async def watch_crashes(self) -> None:
        """Restart every service that ends without being asked (run as a task; cancel it at the end)."""
        while True:
            exited = await self.stack.wait_for_crash()
            at = now_ms()
            outage = Outage(
                exited.service, "exited", at, exit_code=exited.returncode, exited_ms=at, unasked=True
            )
            outage.problem = exited.reason
            self.outages.append(outage)
            self.say(f"chaos: {exited.service} exited unasked: {exited.reason}")
            async with self._lock:
                await self._restart(outage)

    def windows(self, targets: set[str] | None = None, *, until_ms: int) -> list[tuple[int, int]]:
        """The outage windows of ``targets`` (all when ``None``)."""
        return [o.window(until_ms) for o in self.outages if targets is None or o.target in targets]
