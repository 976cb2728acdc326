"""A PostgreSQL outage under running services: every call that needs the database is refused
``UNAVAILABLE`` with a readable reason and retry guidance (``retry-after-ms`` and a ``google.rpc.RetryInfo``
status detail), directly and through the gateway, never ``INTERNAL``; and once the database is back the
same calls succeed without restarting any service (issue #17: a load run's every live match failed during
a PostgreSQL restart because the services answered ``INTERNAL``, which clients do not retry).

The stack runs in this process on a private PostgreSQL server of the test's own (never the shared one):
fairness, clock, a chess rules shard, matchmaking and the gateway, with mutual TLS as in production.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from skillclassics.clock.v1 import clock_pb2, clock_pb2_grpc
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc
from skillclassics.gateway.v1 import gateway_pb2 as gw
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.rules.v1 import rules_pb2

from clients.load.harness import FamilyPlan, LoadConfig, LoadRun, TokenMinter
from clients.player import PlayerSession, development_token
from libs.runtime import RunningServer
from libs.runtime.config import sqlite_url
from services.clock.service import ClockService
from services.gateway.service import GatewayService
from services.matchmaking.service import MatchmakingService
from services.rules_chess.service import chess_rules_service
from tests.support import backend_channel, free_port, start_fairness, start_in_process, stop_servers
from tools.pgcluster import PrivatePostgres

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

RECOVERY_S = 45.0
"""How long the services may take to serve again once the database is back (generous: a 2-core machine
running other tests; they normally do within a second or two)."""
Call = Callable[[], Awaitable[Any]]


async def _start_stack(pg: PrivatePostgres, tmp: Path) -> tuple[list[RunningServer], RunningServer]:
    """Fairness, clock, rules-chess and matchmaking on the private server, each with a database of its
    own, and a gateway in front (its development key under ``tmp``)."""
    servers: list[RunningServer] = []
    try:
        fairness = await start_fairness(pg.create_database("fairness"), tmp)
        servers.append(fairness)
        clock = await start_in_process("clock", ClockService, pg.create_database("clock"))
        servers.append(clock)
        mm_port = free_port()
        rules_env = {
            "MATCHMAKING_ADDRESS": f"127.0.0.1:{mm_port}",
            "CLOCK_ADDRESS": clock.address,
            "FAIRNESS_ADDRESS": fairness.address,
        }
        chess = await start_in_process(
            "rules-chess", chess_rules_service, pg.create_database("rules_chess"), rules_env
        )
        servers.append(chess)
        mm_env = {"RULES_CHESS_ADDRESSES": chess.address, "FAIRNESS_ADDRESS": fairness.address}
        matchmaking = await start_in_process(
            "matchmaking",
            MatchmakingService,
            pg.create_database("matchmaking"),
            mm_env,
            GRPC_PORT=str(mm_port),
        )
        servers.append(matchmaking)
        gateway_env = {
            "MATCHMAKING_ADDRESS": matchmaking.address,
            "RULES_CHESS_ADDRESSES": chess.address,
            "FAIRNESS_ADDRESS": fairness.address,
        }
        gateway = await start_in_process(
            "gateway", GatewayService, sqlite_url(tmp / "gateway.db"), gateway_env, DATA_DIR=str(tmp)
        )
        servers.append(gateway)
    except BaseException:
        await stop_servers(servers)
        raise
    return servers, gateway


def _retry_info_ms(error: grpc.aio.AioRpcError) -> int | None:
    """The ``google.rpc.RetryInfo`` delay of the status, read the standard way (``grpc_status``)."""
    status = rpc_status.from_call(error)  # also checks that its code and message are the call's
    if status is None:
        return None
    for detail in status.details:
        info = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            return int(info.retry_delay.seconds * 1000 + info.retry_delay.nanos // 1_000_000)
    return None


async def _refused(name: str, call: Call, *, sharded: bool = False) -> grpc.aio.AioRpcError:
    """``call`` fails UNAVAILABLE with a reason saying the database is unavailable and the retry guidance
    in both forms. A ``sharded`` service (clock, rules) may instead refuse because the outage ended its
    shard lock's session ("lost its ownership; retry"): UNAVAILABLE too, never INTERNAL."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call()
    error = caught.value
    assert error.code() == grpc.StatusCode.UNAVAILABLE, f"{name}: {error.code()} {error.details()}"
    details = error.details() or ""
    assert "internal error" not in details, f"{name}: {details}"
    if sharded and "the database is unavailable" not in details:
        assert "retry" in details, f"{name}: {details}"
        return error
    assert "the database is unavailable" in details, f"{name}: {details}"
    assert "retry in 1000 ms" in details, f"{name}: {details}"
    trailers = dict(error.trailing_metadata() or ())
    assert trailers.get("retry-after-ms") == "1000", f"{name}: {trailers}"
    assert trailers.get("x-request-id"), f"{name}: the request id is kept beside the guidance"
    assert _retry_info_ms(error) == 1000, name
    return error


async def _eventually(name: str, call: Call) -> Any:
    """``call``'s answer once it succeeds; until then only UNAVAILABLE is an acceptable refusal."""
    deadline = time.monotonic() + RECOVERY_S
    while True:
        try:
            return await call()
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise AssertionError(f"{name}: {error.code()} {error.details()}") from None
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} refused {RECOVERY_S:g} s after the restart: {error}") from None
            await asyncio.sleep(0.2)


async def test_a_database_outage_is_unavailable_with_retry_guidance_and_the_services_recover(
    private_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    servers, gateway = await _start_stack(private_postgres, tmp_path)
    env = {"DATA_DIR": str(tmp_path)}
    alice = f"alice-{uuid.uuid4().hex[:8]}"
    bob = f"bob-{uuid.uuid4().hex[:8]}"
    carol = f"carol-{uuid.uuid4().hex[:8]}"  # not seated: free to open a table
    channels: list[grpc.aio.Channel] = []
    try:
        fairness_server, clock_server = servers[0], servers[1]
        fairness_channel = backend_channel(fairness_server.address, "matchmaking")
        clock_channel = backend_channel(clock_server.address, "rules-chess-0")
        gateway_channel = grpc.aio.insecure_channel(gateway.address)
        channels += [fairness_channel, clock_channel, gateway_channel]
        fairness = fairness_pb2_grpc.FairnessServiceStub(fairness_channel)
        clock = clock_pb2_grpc.ClockServiceStub(clock_channel)
        stub = gateway_pb2_grpc.GatewayServiceStub(gateway_channel)
        as_alice = (("authorization", f"Bearer {development_token(alice, env)}"),)
        as_carol = (("authorization", f"Bearer {development_token(carol, env)}"),)
        time_control = rules_pb2.TimeControl(base_ms=180_000)

        # A live match between alice and bob, before the outage.
        async with (
            PlayerSession(gateway.address, development_token(alice, env)) as host,
            PlayerSession(gateway.address, development_token(bob, env)) as guest,
        ):
            table = await host.create_table("chess", time_control=time_control)
            joined = await guest.join_table(table.table_id)
            await host.get_match(joined.match_id, wait_s=10)
        match_id = joined.match_id

        commit_id = f"outage-{uuid.uuid4().hex[:8]}"
        calls: dict[str, Call] = {
            "fairness Commit": lambda: fairness.Commit(
                fairness_pb2.CommitRequest(match_id=commit_id, idempotency_key=commit_id), timeout=10
            ),
            "clock Arm": lambda: clock.Arm(
                clock_pb2.ArmRequest(
                    owner="rules-chess-0", timer_id="outage", deadline_ms=int(time.time() * 1000) + 3_600_000
                ),
                timeout=10,
            ),
            "gateway CreateTable (matchmaking)": lambda: stub.CreateTable(
                gw.CreateTableRequest(
                    family="chess", time_control=time_control, currency="USD", idempotency_key=commit_id
                ),
                metadata=as_carol,
                timeout=10,
            ),
            "gateway ListTables (matchmaking)": lambda: stub.ListTables(
                gw.ListTablesRequest(family="chess"), metadata=as_carol, timeout=10
            ),
        }
        resign = gw.SubmitActionRequest(
            match_id=match_id,
            idempotency_key=f"resign-{commit_id}",
            action=rules_pb2.Action(resign=rules_pb2.Resign()),
        )

        async def resign_call() -> gw.SubmitActionResponse:
            answer: gw.SubmitActionResponse = await stub.SubmitAction(resign, metadata=as_alice, timeout=10)
            return answer

        private_postgres.stop(mode="fast")
        for name, call in calls.items():
            await _refused(name, call, sharded=name.startswith("clock"))
        await _refused("gateway SubmitAction (rules-chess)", resign_call, sharded=True)

        private_postgres.start()
        for name, call in calls.items():
            await _eventually(name, call)
        answer = await _eventually("gateway SubmitAction (rules-chess)", resign_call)
        assert answer.sequence > 0
    finally:
        for channel in channels:
            await channel.close()
        await stop_servers(servers)


async def test_the_load_harness_rides_out_a_database_restart_without_failing_a_match(
    private_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    """Live matches of a load run through a PostgreSQL restart: their moves are refused UNAVAILABLE for a
    while and retried, and every match finishes (before: 4 of 4 failed)."""
    servers, gateway = await _start_stack(private_postgres, tmp_path)
    try:
        config = LoadConfig(
            families=(FamilyPlan("chess", 2),),
            gateway=gateway.address,
            matches=2,
            duration_s=None,
            think_ms=60,
            max_plies=80,
            progress_s=0,
            seed=7,
            outage_s=30,
            stall_s=15,
        )
        run = asyncio.ensure_future(LoadRun(config, tokens=TokenMinter({"DATA_DIR": str(tmp_path)})).run())
        await asyncio.sleep(1.5)  # the matches are under way
        assert not run.done()
        await asyncio.to_thread(private_postgres.restart, 2.0)
        result = await asyncio.wait_for(run, 120)
    finally:
        await stop_servers(servers)
    metrics = result.metrics
    chess = metrics.families["chess"]
    assert (chess.finished, chess.failed) == (2, 0), dict(metrics.errors)
    # The restart was felt: a move refused UNAVAILABLE, or a match stream cut and reopened (when the
    # shard takes its shard back fast, between two moves, only the streams notice).
    felt = any(code == "UNAVAILABLE" for (_, code) in metrics.errors) or metrics.reconnects > 0
    assert felt, "the restart was not felt"
    assert not [key for key in metrics.errors if key[1] in ("INTERNAL", "UNKNOWN", "STALLED")]
