"""The keepalive policy, live: a quiet Play stream, and the gateway's Exchange stream to its shard under
it, stay open however long they are quiet, with the gateway's channel pinging and the shard's server
accepting those pings under one policy (:class:`libs.runtime.server.KeepalivePolicy`), scaled down here
to seconds. With the server's limit as it was set before (under a name grpc does not know), the same
quiet stream is dropped with GOAWAY "too_many_pings" at its third ping."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest

from libs.runtime import server as runtime_server
from libs.runtime.config import sqlite_url
from libs.runtime.server import KeepalivePolicy
from services.gateway.service import GatewayService
from services.rules_chess.service import chess_rules_service
from tests.services.gateway.test_gateway_service import bearer, direct_match, start_gateway
from tests.services.gateway.test_play import SHARD, PlayClient, eventually, moves, own_platform
from tests.support import start_in_process

SCALED = KeepalivePolicy(ping_interval_ms=1_000, ping_timeout_ms=1_000, min_ping_interval_ms=500)
"""The platform's policy (pings every 20 s, accepted every 10 s) at a twentieth of its intervals."""
QUIET_S = 5.0
"""How long the stream stays quiet: five ping intervals (the old limit closed it at the third)."""
OLD_SERVER_OPTIONS: list[tuple[str, object]] = [
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", SCALED.min_ping_interval_ms),
]
"""The servers' keepalive options before the policy: the limit under a name grpc ignores."""


@pytest.mark.parametrize("servers", ["agreed", "before"])
async def test_a_quiet_play_stream_is_never_dropped_for_its_keepalive_pings(
    servers: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime_server, "KEEPALIVE", SCALED)
    if servers == "before":
        monkeypatch.setattr(KeepalivePolicy, "server_options", lambda self: OLD_SERVER_OPTIONS)
    rules = await start_in_process("rules-chess", chess_rules_service, sqlite_url(tmp_path / "rules.db"))
    # Presence renewals are calls to the shard on the same connection: data that would reset the
    # server's ping count. Renewed rarely here, so that the connection is really quiet.
    gateway = await start_gateway(
        tmp_path,
        {
            "RULES_CHESS_ADDRESSES": rules.address,
            "GATEWAY_PRESENCE_RENEW_MS": "30000",
            "GATEWAY_PRESENCE_LEASE_MS": "60000",
        },
    )
    try:
        async with own_platform(gateway, rules) as shard:
            match_id = await direct_match(shard, "alice", "bob")
            white = PlayClient(shard.gateway, bearer("alice"))
            await white.open(match_id)
            await white.play("e4")
            await white.update(lambda u: moves(u) == ["e4"])
            assert isinstance(gateway.service, GatewayService)
            link = gateway.service.links.link(rules.address, SHARD, "chess")
            assert link.streams_opened == 1

            # Quiet: nothing is written, and a reader waits for whatever comes (a read must not be
            # cancelled at the end of the wait: that would cancel the call).
            quiet_from = time.monotonic()
            reader = asyncio.create_task(white._read_forever())
            await asyncio.wait({reader}, timeout=QUIET_S)
            dropped = None
            if reader.done():
                error = reader.exception()
                assert isinstance(error, grpc.aio.AioRpcError), error
                dropped = (error.code(), error.details())
            if servers == "before":
                assert dropped is not None, "the old settings did not drop the quiet stream"
                assert dropped[0] == grpc.StatusCode.UNAVAILABLE, dropped
                print(f"\nbefore: dropped after {time.monotonic() - quiet_from:.1f} s: {dropped[1]}")
                return
            assert dropped is None, f"the quiet stream was dropped: {dropped}"
            # Still the same streams: the quiet Play stream and the shard link under it carry play on.
            black = PlayClient(shard.gateway, bearer("bob"))
            await black.open(match_id)
            await black.play("e5")
            await eventually(lambda: any(moves(u) == ["e4", "e5"] for u in white.updates), "no e5")
            assert link.streams_opened == 1
            white.call.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            black.call.cancel()
    finally:
        await gateway.stop(grace=0.5)
        await rules.stop(grace=0.5)
