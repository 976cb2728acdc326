"""The launcher with real service processes and real gRPC calls on localhost.

Every stack runs on a random port offset (clear of the default ports a developer's own stack may use)
with a temporary data folder.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

import pytest
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc

from libs.launcher import (
    SERVICES,
    TEST_PORT_OFFSETS,
    PortInUse,
    Stack,
    StartError,
    check_health,
    exit_reason,
    failure_reason,
    find_free_port_offset,
    parse_shards,
    scale_out,
    service_spec,
    shifted_ports,
    start_on_free_ports,
    worker_port_offsets,
)
from libs.launcher.stack import _all_or_none, _stages
from libs.runtime.ports import DEFAULT_PORTS, REPLICA_PORT_STRIDE, ServicePorts, replica_ports
from tests.conftest import create_postgres_database, drop_postgres_database
from tests.support import backend_channel, stack_port_offset

FAIRNESS = service_spec("fairness")
REPO = Path(__file__).resolve().parents[3]
TIMEOUT = 30.0
_INHERITED = ("DATABASE_URL", "SKILLCLASSICS_ENV", "LOG_FORMAT", "GRPC_HOST", "DATA_DIR", "MIGRATE_ON_START")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The services' defaults, whatever the developer's shell exports."""
    for name in _INHERITED:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def port_offset() -> int:
    return stack_port_offset([FAIRNESS])


async def commit(address: str, match_id: str) -> str:
    async with backend_channel(address, "matchmaking") as channel:
        stub = fairness_pb2_grpc.FairnessServiceStub(channel)
        reply = await stub.Commit(
            fairness_pb2.CommitRequest(match_id=match_id, idempotency_key="k"), timeout=5
        )
    assert reply.match_id == match_id
    return str(reply.commitment)


async def get_commitment(address: str, match_id: str) -> str:
    async with backend_channel(address, "operator") as channel:
        stub = fairness_pb2_grpc.FairnessServiceStub(channel)
        reply = await stub.GetCommitment(fairness_pb2.GetCommitmentRequest(match_id=match_id), timeout=5)
    return str(reply.commitment)


async def test_stack_serves_survives_kill_and_stops_cleanly(tmp_path: Path, port_offset: int) -> None:
    async with Stack([FAIRNESS], port_offset=port_offset, data_dir=tmp_path, echo=False) as stack:
        address = stack.address("fairness")
        assert address == f"127.0.0.1:{DEFAULT_PORTS['fairness'].grpc + port_offset}"
        assert await check_health(stack.health_address("fairness")) == "SERVING"
        commitment = await commit(address, "chess.0.m-1")
        assert len(commitment) == 64

        assert await stack.kill("fairness") == -signal.SIGKILL
        assert stack.pid("fairness") is None
        assert await check_health(stack.health_address("fairness")) == "UNAVAILABLE"
        await stack.restart("fairness")
        assert await get_commitment(address, "chess.0.m-1") == commitment  # committed state survives kill -9

        pid = stack.pid("fairness")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # not through the stack: a crash
        crash = await asyncio.wait_for(stack.wait_for_crash(), TIMEOUT)
        assert (crash.service, crash.returncode) == ("fairness", -signal.SIGKILL)
        assert "SIGKILL" in crash.reason
        await stack.restart("fairness")

        assert await stack.stop() == {"fairness": 0}
    assert any('"service.stopped"' in line for line in stack.lines("fairness"))
    assert (tmp_path / "fairness.db").exists()


async def test_stack_reports_a_service_that_fails_to_start(
    tmp_path: Path, port_offset: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKILLCLASSICS_ENV", "production")  # and no DATABASE_URL: a configuration error
    stack = Stack([FAIRNESS], port_offset=port_offset, data_dir=tmp_path, echo=False)
    with pytest.raises(StartError) as raised:
        await stack.start()
    assert raised.value.service == "fairness"
    assert raised.value.returncode == 2
    assert "configuration error: DATABASE_URL must be set in production" in raised.value.reason
    assert stack.exit_codes == {"fairness": 2}


async def test_stack_refuses_ports_in_use(tmp_path: Path, port_offset: int) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", DEFAULT_PORTS["fairness"].grpc + port_offset))
        taken.listen()
        stack = Stack([FAIRNESS], port_offset=port_offset, data_dir=tmp_path, echo=False)
        with pytest.raises(PortInUse, match="already in use"):
            await stack.start()
    assert stack.pid("fairness") is None


async def test_a_stack_whose_port_was_taken_is_started_again_on_other_ports(tmp_path: Path) -> None:
    offsets = [stack_port_offset([FAIRNESS])]
    while len(offsets) < 2:
        offsets += [o for o in [stack_port_offset([FAIRNESS])] if o != offsets[0]]
    built: list[Stack] = []

    def build() -> Stack:
        built.append(Stack([FAIRNESS], port_offset=offsets[len(built)], data_dir=tmp_path, echo=False))
        return built[-1]

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", DEFAULT_PORTS["fairness"].grpc + offsets[0]))
        taken.listen()
        with pytest.raises(PortInUse):  # one attempt: the taken port is the answer
            await start_on_free_ports(build, attempts=1)
        built.clear()
        stack = await start_on_free_ports(build)
    try:
        assert [s.port_offset for s in built] == offsets
        assert stack is built[1]
        assert await check_health(stack.health_address("fairness")) == "SERVING"
    finally:
        await stack.stop()


def test_failure_reason_prefers_the_services_own_words() -> None:
    lines = [
        '{"event": "service.starting", "level": "info"}',
        '{"error": "disk full", "event": "service.start_failed", "level": "error", "exception": []}',
        "Traceback (most recent call last):",
        "OSError: disk full",
    ]
    assert failure_reason("fairness", lines) == "disk full"
    assert failure_reason("fairness", ["fairness: configuration error: LOG_LEVEL must be one of"]) == (
        "configuration error: LOG_LEVEL must be one of"
    )
    assert (
        failure_reason("fairness", ["Traceback (most recent call last):", "ImportError: x"])
        == "ImportError: x"
    )
    assert exit_reason("fairness", -9, []) == "killed by SIGKILL"
    assert exit_reason("fairness", 1, ["boom"]) == "boom (exited with code 1)"


# The command line, as `make run` runs it.


async def launch(port_offset: int, data_dir: Path, **env: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "libs.launcher",
        "--service",
        "fairness",
        "--port-offset",
        str(port_offset),
        "--data-dir",
        str(data_dir),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, **env},
        cwd=REPO,
    )


async def read_until(process: asyncio.subprocess.Process, marker: str, seconds: float = TIMEOUT) -> list[str]:
    """The output lines up to and including the first that contains ``marker``."""
    assert process.stdout is not None
    lines: list[str] = []
    async with asyncio.timeout(seconds):
        while not lines or marker not in lines[-1]:
            raw = await process.stdout.readline()
            if not raw:
                pytest.fail(f"the launcher ended before printing {marker!r}:\n" + "\n".join(lines))
            lines.append(raw.decode().rstrip("\n"))
    return lines


async def finish(process: asyncio.subprocess.Process, seconds: float = TIMEOUT) -> tuple[int, list[str]]:
    """Wait for the launcher to exit: its exit status and remaining output lines."""
    output, _ = await asyncio.wait_for(process.communicate(), seconds)
    return process.returncode if process.returncode is not None else -1, output.decode().splitlines()


async def test_cli_prints_endpoints_and_stops_cleanly_on_ctrl_c(tmp_path: Path, port_offset: int) -> None:
    process = await launch(port_offset, tmp_path)
    try:
        shown = await read_until(process, "Ctrl-C stops the stack.")
    finally:
        process.send_signal(signal.SIGINT)
    returncode, rest = await finish(process)
    output = "\n".join(shown + rest)
    grpc_port = DEFAULT_PORTS["fairness"].grpc + port_offset
    metrics_port = DEFAULT_PORTS["fairness"].metrics + port_offset
    assert returncode == 0, output
    assert f"127.0.0.1:{grpc_port}" in output
    assert f"http://127.0.0.1:{metrics_port}/metrics" in output
    assert f"--list-methods https://127.0.0.1:{grpc_port}" in output  # as the operator, over mutual TLS
    assert "--cert " in output
    assert any(line.startswith("fairness | ") and "service.serving" in line for line in shown), output
    assert "launcher: fairness exited with code 0" in rest, output


async def test_cli_stops_the_stack_when_a_service_dies(tmp_path: Path, port_offset: int) -> None:
    process = await launch(port_offset, tmp_path)
    try:
        shown = await read_until(process, "Ctrl-C stops the stack.")
        row = next(line.split() for line in shown if line.startswith("  fairness "))
        os.kill(int(row[-1]), signal.SIGKILL)
    except BaseException:
        process.send_signal(signal.SIGINT)
        raise
    returncode, rest = await finish(process)
    output = "\n".join(rest)
    assert returncode == 1, output
    assert "launcher: fairness stopped on its own: killed by SIGKILL" in output


async def test_cli_names_the_service_that_fails_to_start(tmp_path: Path, port_offset: int) -> None:
    process = await launch(port_offset, tmp_path, SKILLCLASSICS_ENV="production")
    returncode, lines = await finish(process)
    output = "\n".join(lines)
    assert returncode == 1, output
    assert (
        "launcher: fairness failed to start: configuration error: DATABASE_URL must be set in production"
        in output
    )


# Scale-out: several shards of each rules family, several gateways and clock shards on one machine.


def test_scale_out_names_replicas_and_keeps_the_start_order() -> None:
    services = [service_spec(name) for name in ("fairness", "clock", "rules-chess", "rules-gin")]
    services += [service_spec("matchmaking"), service_spec("gateway")]
    scaled = scale_out(services, shards={"chess": 3}, gateways=2, clock_shards=2)
    assert [spec.name for spec in scaled] == [
        "fairness",
        "clock",
        "clock-1",
        "rules-chess",
        "rules-chess-1",
        "rules-chess-2",
        "rules-gin",
        "matchmaking",
        "gateway",
        "gateway-1",
    ]
    assert [(spec.kind, spec.replica) for spec in scaled if spec.kind == "rules-chess"] == [
        ("rules-chess", 0),
        ("rules-chess", 1),
        ("rules-chess", 2),
    ]
    assert scaled[3].example is not None
    assert scaled[4].example is None
    assert scale_out(services) == tuple(services)  # one of each: the registry's own specs
    assert [s.name for s in scale_out(services, shards=2)][2:6] == [
        "rules-chess",
        "rules-chess-1",
        "rules-gin",
        "rules-gin-1",
    ]
    with pytest.raises(ValueError, match="at least one"):
        scale_out(services, gateways=0)
    with pytest.raises(ValueError, match="no rules service for go"):
        scale_out(services, shards={"go": 2})


def test_a_stage_starts_together_after_the_stages_it_calls() -> None:
    """The clock and fairness first, then every rules shard side by side, then matchmaking, then every
    gateway: each service after the services it calls, and the services of a stage, which do not call
    each other, together."""
    scaled = scale_out(SERVICES, shards=2, gateways=2, clock_shards=2)
    stages = [[spec.name for spec in stage] for stage in _stages(scaled)]
    assert stages[0] == ["fairness", "clock", "clock-1"]
    assert stages[1] == [spec.name for spec in scaled if spec.kind.startswith("rules-")]
    assert len(stages[1]) == 2 * sum(1 for spec in SERVICES if spec.kind.startswith("rules-"))
    assert stages[2:] == [["matchmaking"], ["gateway", "gateway-1"]]
    assert [spec for stage in _stages(scaled) for spec in stage] == list(scaled)  # the order kept


async def test_a_stage_that_fails_cancels_its_other_starts() -> None:
    started: list[str] = []
    cancelled: list[str] = []

    async def start(name: str, fails: bool) -> None:
        started.append(name)
        try:
            await asyncio.sleep(0.05 if fails else 10)
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        raise RuntimeError(f"{name} did not start")

    with pytest.raises(RuntimeError, match="b did not start"):
        await _all_or_none([start("a", False), start("b", True), start("c", False)])
    assert started == ["a", "b", "c"]  # side by side
    assert sorted(cancelled) == ["a", "c"]


def test_test_workers_pick_ports_in_ranges_of_their_own_outside_the_ephemeral_range() -> None:
    """Two pytest-xdist workers never pick overlapping offsets; every port of a test stack (a scaled one
    too) lies outside Linux's ephemeral range, where outgoing connections and ``bind(0)`` take ports."""
    ranges = [worker_port_offsets(worker, 2) for worker in range(2)]
    assert ranges[0][1] <= ranges[1][0]
    assert (ranges[0][0], ranges[-1][1]) == TEST_PORT_OFFSETS
    scaled = scale_out(SERVICES, shards=2, gateways=2, clock_shards=2)
    for worker in range(2):
        offset = find_free_port_offset(scaled, within=ranges[worker])
        assert ranges[worker][0] <= offset < ranges[worker][1]
        for spec in scaled:
            ports = shifted_ports(spec.kind, offset, spec.replica)
            for port in (ports.grpc, ports.metrics, ports.health):
                assert not 32768 <= port <= 60999, (spec.name, port)
                assert port < 65536


def test_parse_shards() -> None:
    assert parse_shards("") == 1
    assert parse_shards("2") == 2
    assert parse_shards(" chess=2, GIN=3 ") == {"chess": 2, "gin": 3}
    with pytest.raises(ValueError, match="invalid literal"):
        parse_shards("chess")  # neither a count nor FAMILY=COUNT
    with pytest.raises(ValueError, match="expected FAMILY=COUNT"):
        parse_shards("chess=2,=1")


def test_replica_ports_follow_the_documented_stride() -> None:
    assert replica_ports("rules-chess", 1) == ServicePorts(grpc=50260, metrics=9360)
    assert replica_ports("rules-chess", 1).health == 50360
    assert replica_ports("gateway", 2, offset=7) == ServicePorts(grpc=50457, metrics=9557)
    # No port of any replica (up to 20 of each service) is another's.
    every = [
        port
        for name in DEFAULT_PORTS
        for replica in range(20)
        for port in (lambda p: (p.grpc, p.metrics, p.health))(replica_ports(name, replica))
    ]
    assert len(every) == len(set(every))
    assert REPLICA_PORT_STRIDE == 200


def test_a_scaled_stack_wires_every_shard() -> None:
    services = [service_spec(name) for name in ("fairness", "clock", "rules-chess", "rules-gin")]
    services += [service_spec("matchmaking"), service_spec("gateway")]
    scaled = scale_out(services, shards={"chess": 3, "gin": 2}, gateways=2, clock_shards=2, matchmakers=2)
    stack = Stack(scaled, port_offset=1000, data_dir="unused", echo=False)
    matchmakers = ",".join(stack.address(name) for name in ("matchmaking", "matchmaking-1"))
    assert matchmakers == "127.0.0.1:51051,127.0.0.1:51251"
    chess = [f"127.0.0.1:{50060 + 1000 + 200 * n}" for n in range(3)]
    gin = [f"127.0.0.1:{50062 + 1000 + 200 * n}" for n in range(2)]
    clocks = [f"127.0.0.1:{50053 + 1000 + 200 * n}" for n in range(2)]
    assert [stack.address(name) for name in ("rules-chess", "rules-chess-1", "rules-chess-2")] == chess
    assert stack.health_address("gateway-1") == "127.0.0.1:51350"
    assert stack.metrics_url("rules-gin-1") == "http://127.0.0.1:10362/metrics"
    for router in ("matchmaking", "matchmaking-1", "gateway", "gateway-1"):
        env = stack.environment(router)
        assert env["RULES_CHESS_ADDRESSES"] == ",".join(chess)
        assert env["RULES_GIN_ADDRESSES"] == ",".join(gin)
    assert stack.environment("gateway-1")["MATCHMAKING_ADDRESS"] == matchmakers  # every replica
    assert stack.environment("gateway-1")["GRPC_PORT"] == "51250"
    for shard in range(3):
        env = stack.environment("rules-chess" if shard == 0 else f"rules-chess-{shard}")
        assert env["RULES_SHARD"] == str(shard)
        assert env["CLOCK_ADDRESS"] == clocks[shard % 2]  # rules shard n: clock shard n mod 2
        assert env["MATCHMAKING_ADDRESS"] == matchmakers
    assert stack.environment("clock-1")["CLOCK_SHARD"] == "1"
    assert "RULES_SHARD" not in stack.environment("matchmaking-1")
    assert stack._identity("rules-chess-2") == "rules-chess-2"  # its certificate: the shard's pod name
    assert stack._identity("gateway-1") == "gateway"
    assert [spec.name for spec in stack.replicas("rules-gin")] == ["rules-gin", "rules-gin-1"]
    with pytest.raises(ValueError, match="replicas 0 to n-1"):
        Stack([service_spec("rules-chess").as_replica(1)], data_dir="unused", echo=False)


async def launch_args(*args: str, **env: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "libs.launcher",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, **env},
        cwd=REPO,
    )


async def test_cli_refuses_shards_on_sqlite(tmp_path: Path) -> None:
    process = await launch_args("--data-dir", str(tmp_path), SHARDS="2")
    returncode, lines = await finish(process)
    assert returncode == 2
    assert "set DATABASE_URL to a PostgreSQL database" in "\n".join(lines)
    process = await launch_args("--data-dir", str(tmp_path), MATCHMAKERS="2")
    returncode, lines = await finish(process)
    assert returncode == 2
    assert "several processes of matchmaking share one store" in "\n".join(lines)
    process = await launch_args("--data-dir", str(tmp_path), "--gateways", "x")
    returncode, lines = await finish(process)
    assert returncode == 2
    assert "invalid int value" in "\n".join(lines)


@pytest.mark.postgres
async def test_cli_starts_shards_gateways_and_clock_shards_on_postgresql(tmp_path: Path) -> None:
    services = ["fairness", "clock", "rules-chess", "matchmaking", "gateway"]
    specs = scale_out(
        [service_spec(name) for name in services], shards=2, gateways=2, clock_shards=2, matchmakers=2
    )
    offset = stack_port_offset(specs)
    name, url = await create_postgres_database("sc_launcher")
    try:
        process = await launch_args(
            *(arg for service in services for arg in ("--service", service)),
            "--port-offset",
            str(offset),
            "--data-dir",
            str(tmp_path),
            "--clock-shards",
            "2",
            SHARDS="2",
            GATEWAYS="2",
            MATCHMAKERS="2",
            DATABASE_URL=url,
            MIGRATE_ON_START="true",
        )
        try:
            shown = await read_until(process, "Ctrl-C stops the stack.", 120)  # 11 processes, in stages
            output = "\n".join(shown)
            for spec in specs:  # every process, its own ports
                ports = replica_ports(spec.kind, spec.replica, offset)
                row = next(line.split() for line in shown if line.startswith(f"  {spec.name} "))
                assert row[1:3] == [f"127.0.0.1:{ports.grpc}", f"http://127.0.0.1:{ports.metrics}/metrics"]
                assert await check_health(f"127.0.0.1:{ports.health}") == "SERVING"
            chess = [replica_ports("rules-chess", n, offset).grpc for n in range(2)]
            assert f"rules-chess: 0=127.0.0.1:{chess[0]}, 1=127.0.0.1:{chess[1]}" in output
            gateways = [replica_ports("gateway", n, offset).grpc for n in range(2)]
            assert f"any gateway: 127.0.0.1:{gateways[0]}, 127.0.0.1:{gateways[1]}" in output
            matchmakers = [replica_ports("matchmaking", n, offset).grpc for n in range(2)]
            assert f"over them): 127.0.0.1:{matchmakers[0]}, 127.0.0.1:{matchmakers[1]}" in output
        finally:
            process.send_signal(signal.SIGINT)
        returncode, rest = await finish(process, 120)
        assert returncode == 0, "\n".join(rest)
        assert "launcher: rules-chess-1 exited with code 0" in rest
    finally:
        await drop_postgres_database(name)
