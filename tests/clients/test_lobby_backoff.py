"""The lobby's history fallback backs off: a player waiting long for a match does not ask the lobby for
its whole history every second (with hundreds waiting, that load slowed the pairing they waited for)."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from clients.player import Lobby, RetryPolicy


class _QuietStream:
    """A lobby stream that stays open and brings nothing (the MatchReady was missed)."""

    def __aiter__(self) -> _QuietStream:
        return self

    async def __anext__(self) -> Any:
        await asyncio.Event().wait()

    def cancel(self) -> None:
        return None


class _Session:
    retry = RetryPolicy()
    address = "test"

    def __init__(self) -> None:
        self.history_asks: list[float] = []

    def _open_lobby_stream(self) -> _QuietStream:
        return _QuietStream()

    async def match_history(self, family: str = "") -> list[Any]:
        self.history_asks.append(asyncio.get_running_loop().time())
        return []


async def test_the_history_is_asked_less_and_less_often() -> None:
    session = _Session()
    lobby = Lobby(session, poll_s=0.05, max_poll_s=0.2)  # type: ignore[arg-type]
    async with lobby:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.2):
                await lobby.match_ready(table_id="t1")
    asks = session.history_asks
    gaps = [later - earlier for earlier, later in itertools.pairwise(asks)]
    # The first after 0.05 s, then 0.1, 0.2, 0.2, ... s apart: about seven asks in 1.2 s (a fixed
    # 0.05 s poll would make 24).
    assert 4 <= len(asks) <= 10, asks
    assert gaps[0] < gaps[1], gaps
    assert gaps[1] > 0.15, gaps
    assert max(gaps) < 0.2 + 0.15, gaps  # capped at max_poll_s (plus scheduling slack)
