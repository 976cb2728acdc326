"""Mutual TLS configuration, identities, the development PKI, certificate rotation and error hygiene."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc

from libs.runtime.authz import Authorizer, OwnsMatch
from libs.runtime.config import ConfigError, ServiceConfig, sqlite_url
from libs.runtime.errors import (
    MAX_REASON_CHARS,
    ErrorReason,
    InvalidArgument,
    PermissionDenied,
    Unauthenticated,
)
from libs.runtime.identity import Identity, IdentityError, identity_from_spiffe_id
from libs.runtime.pki import Authority, ensure_development_pki
from libs.runtime.tls import TransportSecurity
from tests.support import backend_channel, start_fairness


def test_identities_name_their_service_and_shard() -> None:
    shard = Identity.parse("rules-chess-3")
    assert (shard.service, shard.shard, shard.is_rules_shard) == ("rules-chess", 3, True)
    assert shard.owns_shard("chess", 3)
    assert not shard.owns_shard("chess", 0)
    assert not shard.owns_shard("gin", 3)
    assert Identity.parse("gateway").shard is None
    assert not Identity.parse("gateway").is_rules_shard
    for bad in ("", "Gateway", "rules_chess", "-gateway", "a" * 64, "rules-chess-12345"):
        with pytest.raises(IdentityError):
            Identity.parse(bad)
    assert identity_from_spiffe_id(
        "spiffe://skillclassics.local/matchmaking", "skillclassics.local"
    ) == Identity.parse("matchmaking")
    assert identity_from_spiffe_id("spiffe://elsewhere.example/matchmaking", "skillclassics.local") is None
    assert identity_from_spiffe_id("spiffe://skillclassics.local/BAD ID", "skillclassics.local") is None


def test_the_development_pki_is_made_once_with_private_keys_kept_private(tmp_path: Path) -> None:
    files = ensure_development_pki(tmp_path / "pki", ["gateway", "rules-gin-0"])
    ca_before = (tmp_path / "pki" / "ca.pem").read_bytes()
    again = ensure_development_pki(tmp_path / "pki", ["gateway", "operator"])
    assert (tmp_path / "pki" / "ca.pem").read_bytes() == ca_before  # one CA, kept
    assert again["gateway"].certificate.read_bytes() == files["gateway"].certificate.read_bytes()
    for path in (tmp_path / "pki" / "ca.key", files["gateway"].key, again["operator"].key):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    certificate = x509.load_pem_x509_certificate(files["rules-gin-0"].certificate.read_bytes())
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.UniformResourceIdentifier) == [
        "spiffe://skillclassics.local/rules-gin-0"
    ]
    assert {"rules-gin-0", "rules-gin", "localhost"} <= set(names.get_values_for_type(x509.DNSName))


def test_production_refuses_plaintext_and_missing_certificate_files() -> None:
    production = {"SKILLCLASSICS_ENV": "production", "DATABASE_URL": "postgresql+asyncpg://db/sc"}
    with pytest.raises(ConfigError, match="production requires mtls"):
        ServiceConfig.from_env("fairness", {**production, "TLS_MODE": "plaintext"})
    with pytest.raises(ConfigError, match="must be set in production"):
        ServiceConfig.from_env("fairness", production)
    with pytest.raises(ConfigError, match="set together"):
        ServiceConfig.from_env("fairness", {"TLS_CA_FILE": "/ca.pem"})
    with pytest.raises(ConfigError, match="TLS_MODE"):
        ServiceConfig.from_env("fairness", {"TLS_MODE": "none"})
    with pytest.raises(ConfigError, match="SERVICE_IDENTITY"):
        ServiceConfig.from_env("fairness", {"SERVICE_IDENTITY": "Not An Identity"})


def test_a_rules_shard_is_named_after_its_shard_and_others_after_their_service(tmp_path: Path) -> None:
    env = {"DATA_DIR": str(tmp_path), "RULES_SHARD": "2"}
    config = ServiceConfig.from_env("rules-chess", env)
    assert config.transport is not None
    assert config.transport.identity.name == "rules-chess-2"
    assert ServiceConfig.from_env("clock", {"SERVICE_IDENTITY": "clock-1"}).tls.identity.name == "clock-1"
    assert ServiceConfig.from_env("gateway", {}).tls.identity.name == "gateway"


def test_the_authorizer_checks_service_then_constraint() -> None:
    authorizer = Authorizer()
    draw = "/skillclassics.fairness.v1.FairnessService/Draw"
    request = fairness_pb2.DrawRequest(match_id="gin.1.abc")
    authorizer.check(draw, Identity.parse("rules-gin-1"), request)
    with pytest.raises(PermissionDenied, match="only rules-gin-1"):
        authorizer.check(draw, Identity.parse("rules-gin-0"), request)
    with pytest.raises(PermissionDenied, match="may not call Draw"):
        authorizer.check(draw, Identity.parse("gateway"), request)
    with pytest.raises(Unauthenticated):
        authorizer.check(draw, None, request)
    with pytest.raises(PermissionDenied, match="not open to any caller"):
        authorizer.check("/skillclassics.fairness.v1.FairnessService/Forge", Identity.parse("operator"), None)
    assert (
        OwnsMatch().refusal(Identity.parse("rules-gin-1"), fairness_pb2.DrawRequest(match_id="x" * 5000))
        is not None
    )
    long_id = OwnsMatch().refusal(
        Identity.parse("rules-gin-1"), fairness_pb2.DrawRequest(match_id="x" * 5000)
    )
    assert long_id is not None
    assert len(long_id) < 200


def test_every_refusal_reason_is_bounded_in_one_place() -> None:
    invalid = ErrorReason.ERROR_REASON_INVALID_FIELDS
    assert (
        len(InvalidArgument("move " + "e4" * 10_000 + " is illegal", reason=invalid).message)
        <= MAX_REASON_CHARS
    )
    assert InvalidArgument("short", reason=invalid).message == "short"


async def test_an_echoed_20000_character_value_comes_back_cut(tmp_path: Path) -> None:
    fairness = await start_fairness(sqlite_url(tmp_path / "f.db"), tmp_path)
    try:
        async with backend_channel(fairness.address, "rules-gin-0") as channel:
            stub = fairness_pb2_grpc.FairnessServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.Draw(
                    fairness_pb2.DrawRequest(
                        match_id="gin.0.echo", stream="s" * 20_000, kind=fairness_pb2.DRAW_KIND_COIN, count=1
                    ),
                    timeout=3,
                )
        assert refused.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)
        assert len(refused.value.details() or "") <= MAX_REASON_CHARS
    finally:
        await fairness.stop(grace=0.5)


async def test_an_unparseable_request_is_invalid_argument_not_internal(tmp_path: Path) -> None:
    fairness = await start_fairness(sqlite_url(tmp_path / "f.db"), tmp_path)
    try:
        async with backend_channel(fairness.address, "matchmaking") as channel:
            commit = channel.unary_unary("/skillclassics.fairness.v1.FairnessService/Commit")
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await commit(b"\xff\xff\xff\xff", timeout=3)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "could not be parsed" in (refused.value.details() or "")
    finally:
        await fairness.stop(grace=0.5)


async def test_a_renewed_server_certificate_is_served_without_a_restart(tmp_path: Path) -> None:
    """Rotation: the fairness service's certificate files are replaced (as Kubernetes updates a mounted
    Secret); the next connection gets the new certificate, and calls go on working."""
    authority = Authority.create()
    pki = tmp_path / "mounted"
    pki.mkdir()
    (pki / "ca.pem").write_bytes(authority.certificate_pem)
    certificate, key = authority.issue("fairness")
    (pki / "tls.crt").write_bytes(certificate)
    (pki / "tls.key").write_bytes(key)
    files = {
        "TLS_CA_FILE": str(pki / "ca.pem"),
        "TLS_CERT_FILE": str(pki / "tls.crt"),
        "TLS_KEY_FILE": str(pki / "tls.key"),
    }
    fairness = await start_fairness(sqlite_url(tmp_path / "f.db"), tmp_path, **files)
    matchmaking_certificate, matchmaking_key = authority.issue("matchmaking")
    client_files = tmp_path / "client"
    client_files.mkdir()
    (client_files / "ca.pem").write_bytes(authority.certificate_pem)
    (client_files / "matchmaking.pem").write_bytes(matchmaking_certificate)
    (client_files / "matchmaking.key").write_bytes(matchmaking_key)

    async def served_serial() -> int:
        client = TransportSecurity("mtls", Identity.parse("matchmaking"), development_dir=client_files)
        async with client.channel(fairness.address, "fairness") as channel:
            stub = fairness_pb2_grpc.FairnessServiceStub(channel)
            await stub.GetCommitment(fairness_pb2.GetCommitmentRequest(match_id="chess.0.none"), timeout=3)
        raise AssertionError("unreachable: the match has no commitment")

    def serial_of(pem: bytes) -> int:
        return x509.load_pem_x509_certificate(pem).serial_number

    try:
        with pytest.raises(grpc.aio.AioRpcError) as first:
            await served_serial()
        assert first.value.code() == grpc.StatusCode.NOT_FOUND  # a full, authorised round trip
        renewed, renewed_key = authority.issue("fairness")
        assert serial_of(renewed) != serial_of(certificate)
        (pki / "tls.key").write_bytes(renewed_key)
        (pki / "tls.crt").write_bytes(renewed)
        await asyncio.sleep(0.05)
        presented = await asyncio.to_thread(
            _presented_certificate, fairness.port, pki / "ca.pem", client_files
        )
        assert serial_of(presented) == serial_of(renewed)
        with pytest.raises(grpc.aio.AioRpcError) as after:
            await served_serial()
        assert after.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        await fairness.stop(grace=0.5)


def _presented_certificate(port: int, ca: Path, client: Path) -> bytes:
    """The certificate a TLS handshake with the server at ``port`` gets (with a client certificate)."""
    import socket
    import ssl

    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False
    context.load_cert_chain(client / "matchmaking.pem", client / "matchmaking.key")
    context.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return ssl.DER_cert_to_PEM_cert(der).encode()
