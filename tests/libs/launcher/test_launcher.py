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
    Stack,
    StartError,
    check_health,
    exit_reason,
    failure_reason,
    find_free_port_offset,
    service_spec,
)
from libs.runtime.ports import DEFAULT_PORTS
from tests.support import backend_channel

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
    return find_free_port_offset([FAIRNESS])


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
        with pytest.raises(StartError, match="already in use"):
            await stack.start()
    assert stack.pid("fairness") is None


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


async def read_until(process: asyncio.subprocess.Process, marker: str) -> list[str]:
    """The output lines up to and including the first that contains ``marker``."""
    assert process.stdout is not None
    lines: list[str] = []
    async with asyncio.timeout(TIMEOUT):
        while not lines or marker not in lines[-1]:
            raw = await process.stdout.readline()
            if not raw:
                pytest.fail(f"the launcher ended before printing {marker!r}:\n" + "\n".join(lines))
            lines.append(raw.decode().rstrip("\n"))
    return lines


async def finish(process: asyncio.subprocess.Process) -> tuple[int, list[str]]:
    """Wait for the launcher to exit: its exit status and remaining output lines."""
    output, _ = await asyncio.wait_for(process.communicate(), TIMEOUT)
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
