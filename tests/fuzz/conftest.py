"""The fuzz suite's settings and the platform it fuzzes.

Hypothesis runs under the ``fuzz`` profile, applied test by test (never loaded globally, so the rest of
the suite keeps its own settings): ``derandomize=True`` and no example database, so CI draws the same
examples every run and a failure reproduces; each test's ``max_examples`` is modest so the whole suite
takes about a minute. ``FUZZ_EXAMPLES=N`` runs N examples per test instead, and ``FUZZ_RANDOM=1`` draws
fresh random examples every run, saving failures in Hypothesis's database (``make fuzz`` sets both).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings

from tests.fuzz.harness import Platform, differences, in_flight, settled, start_platform

RANDOM = os.environ.get("FUZZ_RANDOM") == "1"
EXAMPLES = int(os.environ["FUZZ_EXAMPLES"]) if os.environ.get("FUZZ_EXAMPLES") else None

settings.register_profile(
    "fuzz",
    deadline=None,
    derandomize=not RANDOM,
    database=settings.get_profile("default").database if RANDOM else None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)

F = TypeVar("F", bound=Callable[..., Any])


def fuzz(examples: int) -> Callable[[F], F]:
    """The ``fuzz`` profile with ``examples`` examples (``FUZZ_EXAMPLES`` overrides it)."""
    return settings(settings.get_profile("fuzz"), max_examples=EXAMPLES or examples)


@pytest.fixture(scope="package")
async def platform(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Platform]:
    """Every service in this event loop with a live chess and a live gin match (one for the package)."""
    running = await start_platform(Path(tmp_path_factory.mktemp("fuzz-platform")))
    yield running
    await running.close()


@pytest.fixture
async def platform_intact(platform: Platform) -> AsyncIterator[None]:
    """After the test: every service SERVING, no call the fuzzer made or hung up on still being handled
    (a handler that outlives its caller hangs), and the live matches exactly as they were."""
    before = in_flight()
    yield
    assert await settled(before), f"calls still being handled: before {before}, now {in_flight()}"
    assert await platform.all_serving() == dict.fromkeys(platform.servers(), True)
    changed = differences(platform.baseline, await platform.snapshot())
    assert not changed, f"the live matches changed: {changed}"
