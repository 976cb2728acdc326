"""The contract from a second language: the TypeScript client in ``typescript/`` (docs/clients.md, "A
TypeScript client") is built from the repository's protos and run against a real stack.

The build: ``npm ci`` (only when ``node_modules`` is missing or older than ``package-lock.json``), ``buf
generate`` (protoc-gen-es from ``node_modules``; the repository's ``protos/`` and the google.rpc protos
of the googleapis-common-protos wheel installed here) and ``tsc``. Then ``node dist/client.js`` plays a
whole lobby-to-checkmate game as two players through the gateway and prints one JSON line per step, which
this test checks, and checks again through the Python stubs. Skipped, naming what is missing, where
``node`` or ``npm`` is not on ``PATH``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from google.rpc import status_pb2
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.rules.v1 import rules_pb2

from tests.fullstack.helpers import Platform, Player

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "typescript"
FOOLS_MATE = ["f3", "e5", "g4", "Qh4#"]
BUILD_TIMEOUT_S = 300.0
"""``npm ci`` on a first run downloads the pinned packages (seconds); repeat runs skip it."""
RUN_TIMEOUT_S = 60.0
COMMITTED_SITE_PACKAGES = "../../../.venv/lib/python3.11/site-packages"
"""Where ``typescript/buf.gen.yaml`` reads the google.rpc protos from (the repository's ``.venv``)."""

MISSING = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
NODE_MAJOR = 20
"""The oldest Node.js its packages support (``engines`` in package.json)."""


def _node_major() -> int:
    node = shutil.which("node")
    if node is None:
        return 0
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout
    return int(version.strip().lstrip("v").split(".")[0] or 0) if version.strip() else 0


if MISSING:
    _SKIP = f"{' and '.join(MISSING)} not on PATH: the TypeScript client example needs Node.js and npm"
elif _node_major() < NODE_MAJOR:
    _SKIP = f"Node.js {_node_major()} is too old: the TypeScript client example needs {NODE_MAJOR} or newer"
else:
    _SKIP = ""
pytestmark = pytest.mark.skipif(bool(_SKIP), reason=_SKIP)


async def _run(*command: str, limit_s: float, env: dict[str, str] | None = None) -> str:
    """Run ``command`` in the client's folder (without blocking the event loop the stack lives on); its
    stdout. Fails the test with the output when it fails or outlives ``limit_s``."""
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=CLIENT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), limit_s)
    except TimeoutError:
        process.kill()
        stdout, stderr = await process.communicate()
        pytest.fail(
            f"{' '.join(command)} took more than {limit_s:.0f} s\n"
            f"stdout:\n{stdout.decode()}\nstderr:\n{stderr.decode()}"
        )
    if process.returncode != 0:
        pytest.fail(
            f"{' '.join(command)} exited with {process.returncode}\n"
            f"stdout:\n{stdout.decode()}\nstderr:\n{stderr.decode()}"
        )
    return stdout.decode()


def _needs_npm_ci() -> bool:
    """``node_modules`` is missing, or older than ``package.json`` or ``package-lock.json`` (npm keeps
    ``node_modules/.package-lock.json`` as the record of its last install)."""
    installed = CLIENT / "node_modules" / ".package-lock.json"
    if not installed.exists():
        return True
    at = installed.stat().st_mtime
    return any((CLIENT / name).stat().st_mtime > at for name in ("package.json", "package-lock.json"))


def _buf_template() -> str:
    """``buf.gen.yaml``, with the google.rpc protos read from this Python's googleapis-common-protos where
    that is not the repository's ``.venv`` with python3.11 (the committed path)."""
    template = (CLIENT / "buf.gen.yaml").read_text()
    site_packages = Path(status_pb2.__file__).resolve().parents[2]
    assert (site_packages / "google" / "rpc" / "status.proto").exists(), (
        f"googleapis-common-protos in {site_packages} ships no status.proto"
    )
    if (CLIENT / COMMITTED_SITE_PACKAGES).resolve() != site_packages:
        template = template.replace(COMMITTED_SITE_PACKAGES, os.path.relpath(site_packages, CLIENT))
    return template


def _buf() -> str:
    beside_python = Path(sys.executable).parent / "buf"
    found = str(beside_python) if beside_python.exists() else shutil.which("buf")
    assert found, "buf is not installed: make setup installs it (buf-bin) into .venv"
    return found


async def _build() -> None:
    if _needs_npm_ci():
        await _run("npm", "ci", "--prefer-offline", "--no-audit", "--no-fund", limit_s=BUILD_TIMEOUT_S)
    await _run(_buf(), "generate", "--template", _buf_template(), limit_s=BUILD_TIMEOUT_S)
    await _run("npm", "exec", "--offline", "--", "tsc", "-p", "tsconfig.json", limit_s=BUILD_TIMEOUT_S)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def client_js() -> str:
    """The client, built once for the session (both backends run the same build). Session-scoped, not
    module-scoped: the tests are grouped by the shared stack's backend, so the full-stack tests run
    between this module's two tests, and a module-scoped build was torn down and redone for the second."""
    await _build()
    return "dist/client.js"


def _token(player: Player) -> str:
    (key, value), *_ = player.metadata
    assert key == "authorization"
    return value.removeprefix("Bearer ")


def _steps(stdout: str) -> dict[str, list[dict[str, Any]]]:
    """The client's JSON lines by step, in order."""
    steps: dict[str, list[dict[str, Any]]] = {}
    for line in stdout.splitlines():
        record = json.loads(line)
        steps.setdefault(record["step"], []).append(record)
    return steps


def _assert_refused_as_invalid_argument(refusal: dict[str, Any], reason: str, fields: list[str]) -> None:
    """A refusal as the TypeScript client decoded it: INVALID_ARGUMENT, and in the status details an
    ErrorInfo with the catalogue's reason (docs/errors.md) and a BadRequest naming exactly ``fields``."""
    assert refusal["code"] == "INVALID_ARGUMENT", refusal
    assert refusal["message"], refusal
    assert refusal["details_trailer"], refusal
    status = refusal["status"]
    assert status["code"] == 3, status  # google.rpc.Code INVALID_ARGUMENT
    by_type = {detail["type"]: detail["value"] for detail in status["details"]}
    assert by_type["google.rpc.ErrorInfo"]["reason"] == reason, status
    assert by_type["google.rpc.ErrorInfo"]["domain"] == "skillclassics.io", status
    violations = by_type["google.rpc.BadRequest"]["fieldViolations"]
    assert [v["field"] for v in violations] == fields, status


async def test_a_typescript_client_plays_a_whole_game_through_the_gateway(
    client_js: str, platform: Platform
) -> None:
    alice, bob = platform.player("ts-alice"), platform.player("ts-bob")
    env = os.environ | {
        "SC_GATEWAY": platform.stack.address("gateway"),
        "SC_TOKEN_A": _token(alice),
        "SC_TOKEN_B": _token(bob),
        "SC_TIMEOUT_MS": "15000",
    }
    stdout = await _run("node", client_js, env=env, limit_s=RUN_TIMEOUT_S)
    print(stdout)  # shown with the failure of any assertion below (or with pytest -s)
    steps = _steps(stdout)
    assert list(steps)[-1] == "done", stdout

    # Signed in as the tokens' subjects.
    assert [(s["player"], s["player_id"]) for s in steps["whoami"]] == [("a", alice.id), ("b", bob.id)]
    assert all(s["expires_at_ms"] > 0 for s in steps["whoami"])
    assert [s["player"] for s in steps["lobby_subscribed"]] == ["a", "b"]

    # The lobby: A's table, announced to A, listed for B, joined by B; both told the match is ready.
    (created,) = steps["create_table"]
    table_id = created["table_id"]
    assert table_id
    assert (created["creator_id"], created["status"], created["family"]) == (
        alice.id,
        "TABLE_STATUS_OPEN",
        "chess",
    )
    (updated,) = steps["table_updated"]
    assert (updated["player"], updated["table_id"]) == ("a", table_id)
    (listed,) = steps["list_tables"]
    assert (listed["found"], listed["table_id"]) == (True, table_id)
    (joined,) = steps["join_table"]
    match_id = joined["match_id"]
    assert match_id.startswith("chess.")
    assert joined["table_id"] == table_id
    assert joined["seats"] == [{"seat": 0, "player_id": alice.id}, {"seat": 1, "player_id": bob.id}]
    assert [
        (r["player"], r["match_id"], r["family"], r["seat"], r["opponent_id"], r["table_id"])
        for r in steps["match_ready"]
    ] == [
        ("a", match_id, "chess", 0, bob.id, table_id),
        ("b", match_id, "chess", 1, alice.id, table_id),
    ]

    # The game over two Play streams: each player opened as their seat, moved on their turn only, every
    # move accepted; both saw the same final update, checkmate with Black (B, seat 1) the winner.
    assert sorted((o["player"], o["match_id"], o["seat"]) for o in steps["play_opened"]) == [
        ("a", match_id, 0),
        ("b", match_id, 1),
    ]
    assert [(m["player"], m["seat"], m["ply"], m["san"]) for m in steps["move"]] == [
        ("a", 0, 0, "f3"),
        ("b", 1, 1, "e5"),
        ("a", 0, 2, "g4"),
        ("b", 1, 3, "Qh4#"),
    ]
    assert all(m["legal_actions"] > 0 for m in steps["move"])
    answers = {a["idempotency_key"]: a for a in steps["answer"]}
    assert set(answers) == {m["idempotency_key"] for m in steps["move"]}
    assert all(a["code"] == 0 and a["sequence"] > 0 for a in answers.values()), answers
    for final in steps["final_update"]:
        assert (final["status"], final["termination"], final["winner"], final["moves"]) == (
            "MATCH_STATUS_FINISHED",
            "TERMINATION_CHECKMATE",
            1,
            FOOLS_MATE,
        ), final
    assert sorted(c["player"] for c in steps["play_closed"]) == ["a", "b"]
    for player in ("a", "b"):  # every update once, in order, on each stream
        sequences = [u["sequence"] for u in steps["update"] if u["player"] == player]
        assert sequences == list(range(1, len(sequences) + 1)), (player, sequences)
        assert sequences[-1] == steps["game_over"][0]["sequence"]
    (over,) = steps["game_over"]
    assert (over["match_id"], over["winner"], over["winner_player_id"]) == (match_id, 1, bob.id)
    assert over["same_final_for_both"] is True
    (got,) = steps["get_match"]
    assert (got["match_id"], got["seat"], got["status"], got["termination"], got["winner"], got["moves"]) == (
        match_id,
        0,
        "MATCH_STATUS_FINISHED",
        "TERMINATION_CHECKMATE",
        1,
        FOOLS_MATE,
    )
    assert got["sequence"] == over["sequence"]

    # The same match read through the Python stubs: what the TypeScript client saw is what the server holds.
    match = await platform.gateway.GetMatch(pb.GetMatchRequest(match_id=match_id), metadata=bob.metadata)
    assert list(match.update.view.chess.moves_san) == FOOLS_MATE
    assert match.update.result.termination == rules_pb2.TERMINATION_CHECKMATE
    assert (match.update.result.winner, match.seat, match.update.sequence) == (1, 1, over["sequence"])

    # The bad requests: refused as INVALID_ARGUMENT, the status details decoded in TypeScript.
    (bad_list,) = steps["bad_list_tables"]
    _assert_refused_as_invalid_argument(bad_list, "INVALID_FIELDS", ["family"])
    (bad_submit,) = steps["bad_submit_action"]
    _assert_refused_as_invalid_argument(bad_submit, "INVALID_FIELDS", ["match_id"])
    # And inside a stream: each player's unreadable first action, refused in its answer with the typed
    # reason (PlayAnswer.details), while the stream went on to the end of the game.
    refused = sorted(steps["answer_refused"], key=lambda r: str(r["player"]))
    assert [(r["player"], r["code"], r["reason"]) for r in refused] == [
        ("a", 3, "MALFORMED_ACTION"),
        ("b", 3, "MALFORMED_ACTION"),
    ]
