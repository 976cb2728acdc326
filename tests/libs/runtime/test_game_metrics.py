"""The game metrics (libs/runtime/game_metrics.py): the names the platform exports, and the rules shard's
metrics moving as matches are played over real gRPC in this process.

The registry is process-global (every test of the session shares it), so each test compares values
before and after what it does.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from prometheus_client import REGISTRY
from skillclassics.chess.v1 import chess_pb2
from skillclassics.rules.v1 import rules_pb2 as pb
from skillclassics.rules.v1 import rules_pb2_grpc

from libs.runtime import RunningServer
from libs.runtime.game_metrics import GAME_METRIC_NAMES, platform_version
from services.rules_chess.service import chess_rules_service
from tests.callers import RULES_CALLERS, Callers
from tests.support import free_port, start_in_process

Stub = rules_pb2_grpc.RulesServiceStub
CHESS = {"family": "chess"}
SHARD = {"family": "chess", "shard": "0"}


def value(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


def finished(termination: str) -> float:
    return value("skillclassics_matches_finished_total", {**CHESS, "termination": termination})


def live() -> float:
    return value("skillclassics_matches_live", SHARD)


def actions() -> float:
    return value("skillclassics_actions_total", CHESS)


async def until(condition: Callable[[], bool], within: float = 10.0) -> None:
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110 - a metric has no event to wait on
            await asyncio.sleep(0.01)


async def start_rules(url: str, env: dict[str, str] | None = None) -> RunningServer:
    return await start_in_process("rules-chess", chess_rules_service, url, env)


@pytest.fixture
async def server(database_url: str) -> AsyncIterator[RunningServer]:
    running = await start_rules(database_url)
    yield running
    await running.stop(grace=0.5)


def stub_of(callers: Callers) -> Stub:
    return callers.stub(Stub, RULES_CALLERS)


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[Stub]:
    async with Callers(server.address) as callers:
        yield stub_of(callers)


async def create(stub: Stub, *, base_ms: int = 300_000, first_move_timeout_ms: int = 0) -> str:
    match_id = f"chess.0.{uuid.uuid4().hex[:12]}"
    await stub.CreateMatch(
        pb.CreateMatchRequest(
            match_id=match_id,
            seats=[pb.SeatAssignment(seat=0, player_id="alice"), pb.SeatAssignment(seat=1, player_id="bob")],
            options=pb.MatchOptions(chess=chess_pb2.ChessOptions(ruleset=chess_pb2.RULESET_CONTEST)),
            time_control=pb.TimeControl(base_ms=base_ms),
            idempotency_key=f"create-{match_id}",
            first_move_timeout_ms=first_move_timeout_ms,
        )
    )
    return match_id


def move(match_id: str, seat: int, notation: str, key: str | None = None) -> pb.SubmitActionRequest:
    return pb.SubmitActionRequest(
        match_id=match_id,
        seat=seat,
        idempotency_key=key or uuid.uuid4().hex,
        action=pb.Action(chess=chess_pb2.ChessAction(move=notation)),
    )


async def resign(stub: Stub, match_id: str, seat: int = 0) -> None:
    await stub.SubmitAction(
        pb.SubmitActionRequest(
            match_id=match_id,
            seat=seat,
            idempotency_key=uuid.uuid4().hex,
            action=pb.Action(resign=pb.Resign()),
        )
    )


# -- names ----------------------------------------------------------------------------------------------


def exported_names() -> set[str]:
    """The platform's metrics in this process's registry, named as Prometheus exposes them."""
    import services.clock.scheduler
    import services.fairness.servicer
    import services.gateway.limits
    import services.matchmaking.matchmaker  # noqa: F401 - their metrics are declared on import

    names = set()
    for metric in REGISTRY.collect():
        name = f"{metric.name}_total" if metric.type == "counter" else metric.name
        if name.startswith(("skillclassics_", "grpc_server_")):
            names.add(name)
    return names


def test_every_exported_metric_is_listed_and_every_listed_one_exported() -> None:
    assert len(set(GAME_METRIC_NAMES)) == len(GAME_METRIC_NAMES)
    assert exported_names() == set(GAME_METRIC_NAMES)


def test_the_names_operators_watch_are_exactly_these() -> None:
    # Dashboards and alert rules are written against these names: a rename must fail here first.
    assert {
        "skillclassics_build_info",
        "skillclassics_matches_live",
        "skillclassics_matches_finished_total",
        "skillclassics_actions_total",
        "skillclassics_first_move_seconds",
        "skillclassics_queue_depth",
        "skillclassics_pairing_wait_seconds",
        "skillclassics_fairness_draws_total",
        "skillclassics_fairness_reveals_total",
        "skillclassics_clock_timers_armed",
        "skillclassics_clock_expiry_lateness_seconds",
        "skillclassics_result_outbox_backlog",
        "skillclassics_group_commit_seconds",
        "grpc_server_handled_total",
        "skillclassics_gateway_shed_total",
    } <= set(GAME_METRIC_NAMES)


async def test_build_info_names_the_service_and_version(server: RunningServer) -> None:
    labels = {"service": "rules-chess", "version": platform_version()}
    assert value("skillclassics_build_info", labels) == 1.0
    assert platform_version() == importlib.metadata.version("skillclassics-platform")


# -- a rules shard ----------------------------------------------------------------------------------------


async def test_a_checkmate_counts_actions_live_first_move_and_the_end_once(stub: Stub) -> None:
    live_before, actions_before, mates_before = live(), actions(), finished("checkmate")
    first_moves = value("skillclassics_first_move_seconds_count", CHESS)
    waited = value("skillclassics_first_move_seconds_sum", CHESS)
    match_id = await create(stub)
    assert live() == live_before + 1  # waiting for its first move counts
    assert value("skillclassics_first_move_seconds_count", CHESS) == first_moves
    await asyncio.sleep(0.05)
    first = move(match_id, 0, "f3")
    await stub.SubmitAction(first)
    assert value("skillclassics_first_move_seconds_count", CHESS) == first_moves + 1
    assert 0.05 <= value("skillclassics_first_move_seconds_sum", CHESS) - waited < 5
    await stub.SubmitAction(first)  # a retry, answered from the log: not a second action
    assert actions() == actions_before + 1
    refused_before = actions()
    with pytest.raises(Exception, match="legal"):
        await stub.SubmitAction(move(match_id, 1, "Qh4"))  # not a legal move: nothing counted
    assert actions() == refused_before
    for ply, notation in enumerate(["e5", "g4", "Qh4#"], start=1):
        await stub.SubmitAction(move(match_id, ply % 2, notation))
    assert actions() == actions_before + 4
    assert finished("checkmate") == mates_before + 1
    assert live() == live_before
    assert value("skillclassics_first_move_seconds_count", CHESS) == first_moves + 1


async def test_a_no_show_is_aborted_and_a_flag_is_a_timeout(stub: Stub) -> None:
    aborted_before, timeouts_before, live_before = finished("aborted"), finished("timeout"), live()
    first_moves = value("skillclassics_first_move_seconds_count", CHESS)
    await create(stub, first_move_timeout_ms=300)  # nobody moves
    flagged = await create(stub, base_ms=400)
    assert live() == live_before + 2
    await stub.SubmitAction(move(flagged, 0, "e4"))  # Black never answers
    await until(
        lambda: finished("aborted") == aborted_before + 1 and finished("timeout") == timeouts_before + 1
    )
    assert live() == live_before
    assert value("skillclassics_first_move_seconds_count", CHESS) == first_moves + 1  # the aborted had none


async def test_a_restart_counts_live_matches_again_and_ends_nothing_twice(database_url: str) -> None:
    live_before, resigned_before, mates_before = live(), finished("resignation"), finished("checkmate")
    running = await start_rules(database_url)
    try:
        async with Callers(running.address) as callers:
            stub = stub_of(callers)
            mated = await create(stub)
            for ply, notation in enumerate(["f3", "e5", "g4", "Qh4#"]):
                await stub.SubmitAction(move(mated, ply % 2, notation))
            ongoing = await create(stub)
            await stub.SubmitAction(move(ongoing, 0, "e4"))
            assert live() == live_before + 1
    finally:
        await running.stop(grace=0.5)
    assert live() == live_before  # a stopped shard holds nothing
    actions_before = actions()
    running = await start_rules(database_url)  # recovers both from the log
    try:
        assert live() == live_before + 1  # the ongoing match again; the mated one is over
        assert finished("checkmate") == mates_before + 1  # replaying the mate did not count it again
        assert actions() == actions_before  # nor its moves
        async with Callers(running.address) as callers:
            await resign(stub_of(callers), ongoing, seat=1)
        assert finished("resignation") == resigned_before + 1
        assert actions() == actions_before + 1  # a resignation is an action
        assert live() == live_before
    finally:
        await running.stop(grace=0.5)


async def test_the_outbox_backlog_grows_while_matchmaking_is_down_and_drains(database_url: str) -> None:
    from services.matchmaking.service import MatchmakingService

    mm_port = free_port()  # nobody listens there yet
    rules = await start_rules(database_url, {"MATCHMAKING_ADDRESS": f"127.0.0.1:{mm_port}"})
    matchmaking = None
    try:
        async with Callers(rules.address) as callers:
            stub = stub_of(callers)
            for _ in range(2):
                await resign(stub, await create(stub))
        await until(lambda: value("skillclassics_result_outbox_backlog", SHARD) == 2)
        matchmaking = await start_in_process(
            "matchmaking",
            MatchmakingService,
            database_url,
            {"RULES_CHESS_ADDRESSES": rules.address},
            GRPC_PORT=str(mm_port),
        )
        # Matchmaking never made these matches: it answers NOT_FOUND, which settles them.
        await until(lambda: value("skillclassics_result_outbox_backlog", SHARD) == 0, within=20)
    finally:
        if matchmaking is not None:
            await matchmaking.stop(grace=0.5)
        await rules.stop(grace=0.5)
