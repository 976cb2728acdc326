"""Server seeds sealed at rest (``services/fairness/seed_vault.py``): the key, its rotation, production and
development, and what a wrong or missing key does, in the vault and in the running service."""

from __future__ import annotations

import asyncio
import base64
import os
import stat
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from skillclassics.fairness.v1 import fairness_pb2 as pb
from skillclassics.fairness.v1 import fairness_pb2_grpc
from sqlalchemy import select

from libs.fairness.proof import Proof, verify
from libs.persistence import Database
from libs.persistence.schema import fairness_commitments
from libs.runtime import RunningServer
from libs.runtime.config import ConfigError, sqlite_url
from libs.runtime.pki import development_certificates
from services.fairness.seed_vault import DEV_KEY_FILE, SeedVault, SeedVaultError, key_id
from services.fairness.service import FairnessService
from tests.callers import Callers, fairness_callers
from tests.support import ROOT, start_in_process, tls_dir

KEY_A = bytes(range(32))
KEY_B = bytes(range(100, 132))
KEY_C = bytes(range(200, 232))
SEED = bytes(range(7, 39))

Stub = fairness_pb2_grpc.FairnessServiceStub
CALLERS = fairness_callers("rules-gin-0")
"""Each method as its real caller calls it (rules-gin-0 owns the matches ``gin.0.*`` named below)."""


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def vault(env: dict[str, str], data_dir: Path, *, production: bool = False) -> SeedVault:
    return SeedVault.from_env(env, data_dir, production=production)


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# -- the vault ----------------------------------------------------------------------------------------


def test_a_sealed_seed_opens_to_the_same_bytes_and_does_not_show_them() -> None:
    sealer = SeedVault(KEY_A)
    nonce, ciphertext, sealed_with = sealer.seal("m-1", SEED)
    assert sealed_with == key_id(KEY_A) == sealer.key_id
    assert SEED not in ciphertext
    assert sealer.open("m-1", nonce, ciphertext, sealed_with) == SEED
    assert SeedVault(KEY_A).open("m-1", nonce, ciphertext, sealed_with) == SEED  # another process
    again = sealer.seal("m-1", SEED)
    assert again[0] != nonce  # a fresh nonce every time
    assert again[1] != ciphertext


def test_a_sealed_seed_opens_only_for_its_own_match() -> None:
    sealer = SeedVault(KEY_A)
    nonce, ciphertext, sealed_with = sealer.seal("m-1", SEED)
    with pytest.raises(SeedVaultError, match="sealed seed of match m-2 failed authentication"):
        sealer.open("m-2", nonce, ciphertext, sealed_with)
    altered = bytes([ciphertext[0] ^ 1]) + ciphertext[1:]
    with pytest.raises(SeedVaultError, match="failed authentication"):
        sealer.open("m-1", nonce, altered, sealed_with)
    with pytest.raises(SeedVaultError, match="failed authentication"):
        sealer.open("m-1", bytes(len(nonce)), ciphertext, sealed_with)


def test_rotation_keeps_old_seeds_open_and_seals_new_ones_with_the_new_key(tmp_path: Path) -> None:
    before = vault({"FAIRNESS_SEED_KEY": b64(KEY_A)}, tmp_path)
    old = before.seal("old-match", SEED)

    rotated = vault(
        {"FAIRNESS_SEED_KEY": b64(KEY_B), "FAIRNESS_OLD_SEED_KEYS": f"{b64(KEY_C)}, {b64(KEY_A)}"}, tmp_path
    )
    assert rotated.open("old-match", *old) == SEED
    new = rotated.seal("new-match", SEED)
    assert new[2] == key_id(KEY_B) != old[2]
    assert rotated.open("new-match", *new) == SEED
    with pytest.raises(SeedVaultError, match=f"sealed with key {key_id(KEY_B)}, not configured"):
        before.open("new-match", *new)  # the old key alone cannot open what the new one sealed

    # Dropping the old key too early: a seed it sealed names the missing key instead of opening wrongly.
    dropped = vault({"FAIRNESS_SEED_KEY": b64(KEY_B)}, tmp_path)
    with pytest.raises(SeedVaultError, match=f"seed of match old-match was sealed with key {key_id(KEY_A)}"):
        dropped.open("old-match", *old)
    assert dropped.open("new-match", *new) == SEED


def test_a_wrong_key_under_the_right_name_fails_authentication() -> None:
    nonce, ciphertext, _ = SeedVault(KEY_A).seal("m-1", SEED)
    wrong = SeedVault(KEY_B)
    with pytest.raises(SeedVaultError, match="failed authentication"):
        wrong.open("m-1", nonce, ciphertext, wrong.key_id)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FAIRNESS_SEED_KEY": "not base64!"}, "FAIRNESS_SEED_KEY must be base64"),
        ({"FAIRNESS_SEED_KEY": b64(bytes(16))}, "FAIRNESS_SEED_KEY must decode to 32 bytes, got 16"),
        (
            {"FAIRNESS_SEED_KEY": b64(KEY_A), "FAIRNESS_OLD_SEED_KEYS": f"{b64(KEY_B)},{b64(bytes(31))}"},
            "FAIRNESS_OLD_SEED_KEYS must decode to 32 bytes, got 31",
        ),
    ],
)
def test_a_malformed_key_is_a_configuration_error_naming_the_variable(
    env: dict[str, str], message: str, tmp_path: Path
) -> None:
    for production in (False, True):
        with pytest.raises(ConfigError, match=message):
            vault(env, tmp_path, production=production)
    assert _entries(tmp_path) == []  # no development key was made instead


def test_production_refuses_to_run_without_a_key_even_with_a_development_key_at_hand(tmp_path: Path) -> None:
    for env in ({}, {"FAIRNESS_SEED_KEY": "  "}, {"FAIRNESS_OLD_SEED_KEYS": b64(KEY_A)}):
        with pytest.raises(ConfigError, match="FAIRNESS_SEED_KEY must be set in production"):
            vault(env, tmp_path, production=True)
    assert _entries(tmp_path) == []
    vault({}, tmp_path)  # development writes its key file ...
    assert (tmp_path / DEV_KEY_FILE).is_file()
    with pytest.raises(ConfigError, match="FAIRNESS_SEED_KEY must be set in production"):
        vault({}, tmp_path, production=True)  # ... which production never falls back to
    assert vault({"FAIRNESS_SEED_KEY": b64(KEY_A)}, tmp_path, production=True).key_id == key_id(KEY_A)


def test_the_development_key_is_made_once_private_and_kept_across_restarts(tmp_path: Path) -> None:
    first = vault({}, tmp_path)
    key_file = tmp_path / DEV_KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert first.key_id == key_id(base64.b64decode(key_file.read_text()))
    sealed = first.seal("m-1", SEED)
    contents = key_file.read_text()

    second = vault({}, tmp_path)
    assert second.key_id == first.key_id
    assert second.open("m-1", *sealed) == SEED
    assert key_file.read_text() == contents
    assert vault({}, tmp_path / "elsewhere").key_id != first.key_id  # a key per data folder, not a constant


# -- the service --------------------------------------------------------------------------------------


async def _start(url: str, data_dir: Path, env: dict[str, str]) -> RunningServer:
    return await start_in_process("fairness", FairnessService, url, env, DATA_DIR=str(data_dir))


async def _sealed_with(url: str) -> dict[str, str]:
    db = Database(url)
    try:
        async with db.connect() as conn:
            rows = await conn.execute(
                select(fairness_commitments.c.match_id, fairness_commitments.c.seed_key_id)
            )
            return {match_id: key for match_id, key in rows}
    finally:
        await db.dispose()


def _dice(match_id: str, index: int | None = None) -> pb.DrawRequest:
    request = pb.DrawRequest(match_id=match_id, stream="dice", kind=pb.DRAW_KIND_DICE, count=2)
    if index is not None:
        request.index = index
    return request


async def test_the_service_keeps_drawing_and_revealing_across_a_key_rotation(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "fairness.db")
    first = await _start(url, tmp_path, {"FAIRNESS_SEED_KEY": b64(KEY_A)})
    try:
        async with Callers(first.address) as callers:
            stub = callers.stub(Stub, CALLERS)
            await stub.Commit(pb.CommitRequest(match_id="gin.0.old", idempotency_key="k"))
            old_first = (await stub.Draw(_dice("gin.0.old"))).draw
    finally:
        await first.stop(grace=1)

    rotated = await _start(
        url, tmp_path, {"FAIRNESS_SEED_KEY": b64(KEY_B), "FAIRNESS_OLD_SEED_KEYS": b64(KEY_A)}
    )
    try:
        async with Callers(rotated.address) as callers:
            stub = callers.stub(Stub, CALLERS)
            await stub.Commit(pb.CommitRequest(match_id="gin.0.new", idempotency_key="k"))
            await stub.Draw(_dice("gin.0.new"))
            assert (await stub.Draw(_dice("gin.0.old", index=0))).draw == old_first
            assert (await stub.Draw(_dice("gin.0.old"))).draw.index == 1  # the old seed still opens
            for match_id in ("gin.0.old", "gin.0.new"):
                await stub.Finish(pb.FinishRequest(match_id=match_id))
                revealed = await stub.Reveal(pb.RevealRequest(match_id=match_id))
                assert verify(Proof.from_json(revealed.proof_json)).ok, match_id
    finally:
        await rotated.stop(grace=1)
    assert await _sealed_with(url) == {"gin.0.old": key_id(KEY_A), "gin.0.new": key_id(KEY_B)}


async def test_a_service_missing_the_old_key_issues_nothing_for_its_matches(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "fairness.db")
    first = await _start(url, tmp_path, {"FAIRNESS_SEED_KEY": b64(KEY_A)})
    try:
        async with Callers(first.address) as callers:
            stub = callers.stub(Stub, CALLERS)
            await stub.Commit(pb.CommitRequest(match_id="gin.0.m", idempotency_key="k"))
            issued = (await stub.Draw(_dice("gin.0.m"))).draw
    finally:
        await first.stop(grace=1)

    dropped = await _start(url, tmp_path, {"FAIRNESS_SEED_KEY": b64(KEY_B)})
    try:
        async with Callers(dropped.address) as callers:
            stub = callers.stub(Stub, CALLERS)
            before = await stub.GetCommitment(pb.GetCommitmentRequest(match_id="gin.0.m"))
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.Draw(_dice("gin.0.m"))
            assert caught.value.code() == grpc.StatusCode.INTERNAL
            assert (await stub.Draw(_dice("gin.0.m", index=0))).draw == issued  # the record needs no key
            assert await stub.GetCommitment(pb.GetCommitmentRequest(match_id="gin.0.m")) == before
    finally:
        await dropped.stop(grace=1)


async def test_the_service_in_development_keeps_its_generated_key_across_restarts(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "fairness.db")
    first = await _start(url, tmp_path, {})
    try:
        async with Callers(first.address) as callers:
            stub = callers.stub(Stub, CALLERS)
            await stub.Commit(pb.CommitRequest(match_id="gin.0.dev", idempotency_key="k"))
            await stub.Draw(_dice("gin.0.dev"))
    finally:
        await first.stop(grace=1)
    key = (tmp_path / DEV_KEY_FILE).read_text()

    second = await _start(url, tmp_path, {})
    try:
        async with Callers(second.address) as callers:
            stub = callers.stub(Stub, CALLERS)
            assert (await stub.Draw(_dice("gin.0.dev"))).draw.index == 1  # the seed opens after the restart
            await stub.Finish(pb.FinishRequest(match_id="gin.0.dev"))
            revealed = await stub.Reveal(pb.RevealRequest(match_id="gin.0.dev"))
            assert verify(Proof.from_json(revealed.proof_json)).ok
    finally:
        await second.stop(grace=1)
    assert (tmp_path / DEV_KEY_FILE).read_text() == key


async def test_the_service_process_refuses_to_start_in_production_without_a_key(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRNESS_")}
    certificates = development_certificates(tls_dir(), "fairness")
    env.update(
        SKILLCLASSICS_ENV="production",  # how a service knows it is in production (libs/runtime/config.py)
        DATABASE_URL=sqlite_url(tmp_path / "fairness.db"),
        DATA_DIR=str(tmp_path),
        GRPC_PORT="0",
        METRICS_PORT="-1",
        LOG_FORMAT="json",
        # Production's certificate files (mounted in production; here the session PKI's), so that the
        # service gets as far as its seed key.
        TLS_CA_FILE=str(certificates.ca),
        TLS_CERT_FILE=str(certificates.certificate),
        TLS_KEY_FILE=str(certificates.key),
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "services.fairness"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "FAIRNESS_SEED_KEY must be set in production" in done.stdout + done.stderr
    assert _entries(tmp_path) == []  # neither a database nor a development key
