"""The runner every process uses: the loop ``EVENT_LOOP`` names, and a bad value before anything runs."""

from __future__ import annotations

import asyncio
import inspect

import pytest
import uvloop

from libs.runtime import ConfigError, eventloop


async def _loop_class() -> type[asyncio.AbstractEventLoop]:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop())


def test_runs_on_uvloop_by_default_and_on_asyncio_when_asked() -> None:
    assert eventloop.run(_loop_class(), {}) is uvloop.Loop
    assert eventloop.run(_loop_class(), {"EVENT_LOOP": "uvloop"}) is uvloop.Loop
    assert not issubclass(eventloop.run(_loop_class(), {"EVENT_LOOP": "asyncio"}), uvloop.Loop)


def test_a_bad_value_fails_before_the_coroutine_starts_and_leaves_nothing_unawaited() -> None:
    started: list[bool] = []

    async def main() -> None:
        started.append(True)

    coroutine = main()
    with pytest.raises(ConfigError, match="EVENT_LOOP must be one of"):
        eventloop.run(coroutine, {"EVENT_LOOP": "tokio"})
    assert not started
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED  # no "never awaited" warning
