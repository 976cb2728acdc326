"""The event loop every process of the platform runs on: uvloop by default, asyncio's own on request.

``EVENT_LOOP`` chooses it (:func:`libs.runtime.config.event_loop_choice`): ``uvloop`` (the default) or
``asyncio``. uvloop implements the asyncio event loop on libuv; grpc.aio runs on it unchanged, and so
does everything else here (SQLAlchemy with aiosqlite or asyncpg, signal handlers, subprocesses).
Measured in docs/performance.md ("Fourth round"): under the 500-match load the platform handles about
a fifth more actions per second with the same CPU, because much of every gRPC message's cost in Python
is the event loop's own bookkeeping (callbacks, wake-ups, timers), which uvloop does in C.
``asyncio`` is there for debugging (asyncio's debug mode and tooling) and for a platform uvloop is not
built for (Windows): with ``EVENT_LOOP`` unset and uvloop not installed, a process runs on asyncio's
loop.

Tests run on pytest-asyncio's (asyncio) loop; the processes the launcher, the benchmarks and the
end-to-end tests start run on the configured one.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from libs.runtime.config import EventLoop, event_loop_choice

LoopFactory = Callable[[], asyncio.AbstractEventLoop]
_T = TypeVar("_T")


def loop_factory(choice: EventLoop) -> LoopFactory | None:
    """What :class:`asyncio.Runner` makes its loop with (``None``: asyncio's own)."""
    if choice == "asyncio":
        return None
    import uvloop  # installed: the choice checked it

    factory: LoopFactory = uvloop.new_event_loop
    return factory


def run(main: Coroutine[Any, Any, _T], environ: Mapping[str, str] | None = None) -> _T:
    """``asyncio.run(main)`` on the loop ``EVENT_LOOP`` (in ``environ``, default the process's) asks
    for. A bad value raises :class:`~libs.runtime.config.ConfigError` before ``main`` starts (and
    ``main`` is closed, so it is not left un-awaited)."""
    try:
        choice = event_loop_choice(os.environ if environ is None else environ)
    except BaseException:
        main.close()
        raise
    return run_on(choice, main)


def run_on(choice: EventLoop, main: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(main)`` on the loop ``choice`` names."""
    with asyncio.Runner(loop_factory=loop_factory(choice)) as runner:
        return runner.run(main)
