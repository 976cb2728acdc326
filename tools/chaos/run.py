"""One chaos run from start to end: a private PostgreSQL server, the whole stack on it, the recording
players, the controller's faults, then the evidence gathered and the checks run (:func:`run_chaos`)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from libs.launcher import Stack, find_free_port_offset, start_on_free_ports
from libs.persistence.schema import (
    match_events,
    match_results,
    matches,
    mm_matches,
    mm_rating_changes,
    mm_ratings,
)
from tools.chaos.checks import Evidence, run_checks
from tools.chaos.config import OUTBOX_WAIT_S, ChaosConfig
from tools.chaos.controller import Controller, now_ms
from tools.chaos.players import Players
from tools.chaos.report import ChaosReport
from tools.chaos.schedule import make_schedule
from tools.pgcluster import PrivatePostgres

Say = Callable[[str], None]


def stack_env(database_url: str) -> dict[str, str]:
    """The services' environment: the private database, and the per-player limits out of the way."""
    return {
        "SKILLCLASSICS_ENV": "development",
        "GRPC_HOST": "127.0.0.1",
        "MIGRATE_ON_START": "true",
        "LOG_FORMAT": "json",
        "DATABASE_URL": database_url,
        "GATEWAY_CALL_RATE": "100000",
        "GATEWAY_CALL_BURST": "100000",
    }


async def run_chaos(config: ChaosConfig, *, say: Say = print) -> ChaosReport:
    """Run ``config`` and return the report (its :attr:`~ChaosReport.ok` says whether every check held)."""
    say(f"chaos: {config.describe()}")
    cluster = await asyncio.to_thread(PrivatePostgres.create)
    data_dir = Path(tempfile.mkdtemp(prefix="skillclassics-chaos-"))
    try:
        database_url = await asyncio.to_thread(cluster.create_database, "chaos")
        env = {**stack_env(database_url), **config.extra_env}
        stack = await start_on_free_ports(
            lambda: Stack(port_offset=find_free_port_offset(), data_dir=data_dir, echo=False, env=env)
        )
        try:
            return await _run(config, stack, cluster, database_url, data_dir, say)
        finally:
            await stack.stop()
    finally:
        await asyncio.to_thread(cluster.remove)
        shutil.rmtree(data_dir, ignore_errors=True)


async def _run(
    config: ChaosConfig, stack: Stack, cluster: PrivatePostgres, database_url: str, data_dir: Path, say: Say
) -> ChaosReport:
    services = [spec.name for spec in stack.services]
    faults = (
        list(config.faults)
        if config.faults is not None
        else make_schedule(config.seed, config.seconds, config.kill_rate_per_min, services)
    )
    say(f"chaos: {len(faults)} faults scheduled:")
    for fault in faults:
        say(f"  {fault.describe()}")
    controller = Controller(stack, cluster, say)
    players = Players(
        stack.address("gateway"),
        data_dir,
        f"chaos{config.seed}-{uuid.uuid4().hex[:6]}",
        config.plans,
        config.matches_per_family,
        seed=config.seed,
        move_delay_s=config.move_delay_s,
        say=say,
    )
    stop = asyncio.Event()
    started = time.monotonic()
    started_ms = now_ms()
    crashes = asyncio.create_task(controller.watch_crashes())
    injecting = asyncio.create_task(controller.run(faults, started, stop))
    lanes = [asyncio.create_task(lane) for lane in players.lanes()]
    try:
        await asyncio.wait(lanes, timeout=config.seconds)
        say("chaos: time is up; the matches being played are resigned")
        stop.set()
        players.stopping.set()
        await injecting
        _, pending = await asyncio.wait(lanes, timeout=config.drain_s) if lanes else (set(), set())
        for lane in pending:
            lane.cancel()
            players.recorder.failures.append("a lane was still playing after the drain and was cut")
        await asyncio.gather(*pending, return_exceptions=True)
        for lane in lanes:
            if lane.done() and not lane.cancelled() and lane.exception() is not None:
                players.recorder.failures.append(f"a lane failed: {lane.exception()!r}")
        for stream in players.recorder.streams:
            stream.finish("open", now_ms())
        finished_ms = now_ms()
        await _wait_for_outbox(database_url)
        evidence = await _gather(players, controller, database_url, finished_ms)
    finally:
        crashes.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await crashes
        for task in (injecting, *lanes):
            task.cancel()
        await players.close()
    checks = run_checks(evidence)
    return ChaosReport(
        config=config,
        faults=faults,
        outages=controller.outages,
        recorder=players.recorder,
        evidence=evidence,
        checks=checks,
        seconds=(finished_ms - started_ms) / 1000,
    )


async def _read(database_url: str, statement: Any) -> list[dict[str, Any]]:
    engine = create_async_engine(database_url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            return [dict(row._mapping) for row in await conn.execute(statement)]
    finally:
        await engine.dispose()


async def _wait_for_outbox(database_url: str) -> None:
    """Until every result is reported and matchmaking has it (or :data:`OUTBOX_WAIT_S` passed)."""
    deadline = time.monotonic() + OUTBOX_WAIT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # the database may still be recovering
            results = await _read(
                database_url, select(match_results.c.match_id, match_results.c.reported_at_ms)
            )
            settled = {
                row["match_id"]
                for row in await _read(database_url, select(mm_matches.c.match_id, mm_matches.c.result))
                if row["result"] is not None
            }
            if all(r["reported_at_ms"] is not None and r["match_id"] in settled for r in results):
                return
        await asyncio.sleep(0.5)


async def _gather(players: Players, controller: Controller, database_url: str, finished_ms: int) -> Evidence:
    events: dict[str, list[dict[str, Any]]] = {}
    for row in await _read(
        database_url, select(match_events).order_by(match_events.c.match_id, match_events.c.sequence)
    ):
        events.setdefault(row["match_id"], []).append(row)
    match_rows = {row["match_id"]: row for row in await _read(database_url, select(matches))}
    results = {row["match_id"]: row for row in await _read(database_url, select(match_results))}
    mm_rows = {row["match_id"]: row for row in await _read(database_url, select(mm_matches))}
    changes = await _read(database_url, select(mm_rating_changes))
    stored = {(row["player_id"], row["family"]): row for row in await _read(database_url, select(mm_ratings))}

    served: dict[tuple[str, str], tuple[int, int]] = {}
    for player, session in players.sessions.items():
        try:
            reply = await session.ratings()
        except Exception as error:  # reported by the ratings check as a missing served rating
            players.recorder.failures.append(f"{player}: GetRatings failed: {error}")
            continue
        for rating in reply.ratings:
            served[(player, rating.family)] = (rating.rating, rating.games)

    proofs: dict[tuple[str, str], tuple[bool, list[str]]] = {}
    for match_id, result in results.items():
        played = players.recorder.matches.get(match_id)
        if not result["fairness_commitment"] or played is None:
            continue
        for player in played.players:
            session = players.session(player)
            try:
                check = await session.check_fairness(match_id, wait_s=10.0)
                proofs[(match_id, player)] = (check.ok, check.lines())
            except Exception as error:  # a refusal (grpc.aio.AioRpcError) or a client failure
                proofs[(match_id, player)] = (False, [f"the proof could not be checked: {error}"])
    return Evidence(
        acks=players.recorder.acks,
        streams=players.recorder.streams,
        played=players.recorder.matches,
        outages=controller.outages,
        events=events,
        matches=match_rows,
        results=results,
        mm_matches=mm_rows,
        rating_changes=changes,
        stored_ratings=stored,
        served_ratings=served,
        proofs=proofs,
        finished_ms=finished_ms,
    )
