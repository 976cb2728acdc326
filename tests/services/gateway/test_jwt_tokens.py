"""Player tokens as standard JWTs: algorithms, claims, keys by ``kid`` from a JWKS file or URL, the
development key, and what the gateway answers over real gRPC (docs/gateway.md, Tokens)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import http.server
import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.gateway.v1 import gateway_pb2_grpc

from libs.runtime import ServiceConfig
from libs.runtime.config import ConfigError
from services.gateway import tokens
from services.gateway.service import GatewayService
from services.gateway.tokens import (
    DEV_ISSUER,
    KeyRing,
    SigningKey,
    TokenError,
    TokenPolicy,
    TokenVerifier,
    mint_token,
)
from tests.services.gateway.test_gateway_service import refused, start_gateway
from tests.support import ROOT, free_port

NOW = 1_800_000_000
EXTERNAL = "https://id.example"
ED = SigningKey.generate("EdDSA")
ES = SigningKey.generate("ES256")
UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def claims(**changes: Any) -> dict[str, Any]:
    """Valid claims at :data:`NOW`, with ``changes`` (``None`` removes a claim)."""
    base = {"iss": DEV_ISSUER, "aud": "skillclassics", "sub": "alice", "iat": NOW, "exp": NOW + 600}
    merged = {**base, **changes}
    return {name: value for name, value in merged.items() if value is not None}


def signed(payload: dict[str, Any] | str, key: SigningKey = ED, **header: Any) -> str:
    """``payload`` (claims, or raw JSON text) signed with ``key``, its ``kid`` in the header."""
    headers = {"kid": key.kid, **header}
    if isinstance(payload, str):
        return jwt.api_jws.encode(payload.encode(), key.private_key, key.algorithm, headers)
    return jwt.encode(payload, key.private_key, algorithm=key.algorithm, headers=headers)


def forged(header: dict[str, Any], payload: dict[str, Any], signature: bytes) -> str:
    """A token put together by hand: any header, any payload, any signature."""
    head, body = b64(json.dumps(header).encode()), b64(json.dumps(payload).encode())
    return f"{head}.{body}.{b64(signature)}"


def verifier(*keys: SigningKey, **policy: Any) -> TokenVerifier:
    return TokenVerifier(KeyRing.of(*(keys or (ED, ES))), TokenPolicy(**{"issuers": (DEV_ISSUER,), **policy}))


def refusal(token: str, now: int = NOW, check: TokenVerifier | None = None) -> str:
    with pytest.raises(TokenError) as caught:
        (check or verifier()).verify(token, now)
    return str(caught.value)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- algorithms --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [ED, ES], ids=["EdDSA", "ES256"])
def test_eddsa_and_es256_tokens_are_accepted(key: SigningKey) -> None:
    token = mint_token(key, "alice", 600, NOW)
    assert jwt.get_unverified_header(token) == {"alg": key.algorithm, "kid": key.kid, "typ": "JWT"}
    assert jwt.decode(token, options={"verify_signature": False}) == claims()
    got = verifier().verify(token, NOW + 1)
    assert (got.player_id, got.expires_at, got.issuer) == ("alice", NOW + 600, DEV_ISSUER)


def test_rs256_hs256_and_none_are_refused_even_naming_a_trusted_key() -> None:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rsa_jwk = {**jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key(), as_dict=True), "kid": "rsa-1"}
    check = TokenVerifier(KeyRing.of({"keys": [ED.public_jwk(), rsa_jwk]}))
    assert check.keys.kids == {ED.kid}  # the RSA key of a shared JWKS is never used
    rs256 = jwt.encode(claims(), rsa_key, algorithm="RS256", headers={"kid": "rsa-1"})
    assert "'RS256' is not accepted" in refusal(rs256, check=check)
    rs256_naming_ed = jwt.encode(claims(), rsa_key, algorithm="RS256", headers={"kid": ED.kid})
    assert "'RS256' is not accepted" in refusal(rs256_naming_ed, check=check)

    # Algorithm confusion: HMAC with the public key as the secret (every form it is published in).
    public = ED.private_key.public_key()
    secrets = [
        public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
        public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw),
        json.dumps(ED.public_jwk()).encode(),
    ]
    for secret in secrets:
        for algorithm, digest in (("HS256", hashlib.sha256), ("HS512", hashlib.sha512)):
            header = {"alg": algorithm, "typ": "JWT", "kid": ED.kid}
            head, body = b64(json.dumps(header).encode()), b64(json.dumps(claims()).encode())
            mac = hmac.new(secret, f"{head}.{body}".encode(), digest).digest()
            assert f"'{algorithm}' is not accepted" in refusal(f"{head}.{body}.{b64(mac)}", check=check)

    for alg in ("none", "None", "NONE", ""):
        assert "is not accepted" in refusal(forged({"alg": alg, "kid": ED.kid}, claims(), b""), check=check)
    assert "is not accepted" in refusal(forged({"kid": ED.kid}, claims(), b"x" * 64), check=check)
    for alg in ("ES384", "ES512", "ES256K", "PS256", "Ed448", "Ed25519"):
        assert "is not accepted" in refusal(forged({"alg": alg, "kid": ED.kid}, claims(), b"x" * 64))


def test_a_token_must_use_its_keys_own_algorithm() -> None:
    es_naming_ed = jwt.encode(claims(), ES.private_key, algorithm="ES256", headers={"kid": ED.kid})
    assert "does not match its key's (EdDSA)" in refusal(es_naming_ed)
    ed_naming_es = jwt.encode(claims(), ED.private_key, algorithm="EdDSA", headers={"kid": ES.kid})
    assert "does not match its key's (ES256)" in refusal(ed_naming_es)


# -- claims ------------------------------------------------------------------------------------------------

REFUSED_CLAIMS: dict[str, tuple[dict[str, Any], str]] = {
    "no iss": (claims(iss=None), "no issuer ('iss' claim)"),
    "another issuer": (claims(iss="https://evil.example"), "issuer is not trusted"),
    "iss not a string": (claims(iss=["skillclassics-dev"]), "issuer is not trusted"),
    "no aud": (claims(aud=None), "no audience ('aud' claim)"),
    "another audience": (claims(aud="other-service"), "audience is not this gateway's"),
    "aud a list without ours": (claims(aud=["a", "b"]), "audience is not this gateway's"),
    "aud not a string": (claims(aud=5), "audience is not this gateway's"),
    "no sub": (claims(sub=None), "no subject ('sub' claim)"),
    "sub not a player id": (claims(sub="a b"), "subject is not a valid player id"),
    "sub too long": (claims(sub="a" * 129), "subject is not a valid player id"),
    "sub not a string": (claims(sub=7), "subject is not a valid player id"),
    "no exp": (claims(exp=None), "no expiry ('exp' claim)"),
    "no iat": (claims(iat=None), "no issue time ('iat' claim)"),
    "expired past the leeway": (claims(iat=NOW - 700, exp=NOW - 30), "expired 30 s ago"),
    "nbf past the leeway": (claims(nbf=NOW + 31), "not valid yet"),
    "iat past the leeway": (claims(iat=NOW + 31, exp=NOW + 600), "issued in the future"),
    "exp before iat": (claims(iat=NOW - 10, exp=NOW - 20), "expires before it was issued"),
    "lifetime over the maximum": (
        claims(iat=NOW - 1, exp=NOW + 86_400),
        "longer than the maximum of 86400 s",
    ),
    "exp beyond now + the maximum": (
        claims(iat=NOW + 20, exp=NOW + 20 + 86_400),
        "expires more than 86400 s from now",
    ),
}


@pytest.mark.parametrize("case", REFUSED_CLAIMS)
def test_each_claim_rule_refuses_with_a_reason(case: str) -> None:
    payload, reason = REFUSED_CLAIMS[case]
    assert reason in refusal(signed(json.dumps(payload)))  # as JSON text: PyJWT would refuse to sign some


ACCEPTED_CLAIMS: dict[str, dict[str, Any]] = {
    "expired within the leeway": claims(iat=NOW - 600, exp=NOW - 29),
    "nbf within the leeway": claims(nbf=NOW + 30),
    "iat within the leeway": claims(iat=NOW + 30, exp=NOW + 600),
    "aud a list with ours": claims(aud=["other", "skillclassics"]),
    "exactly the maximum lifetime": claims(exp=NOW + 86_400),
    "fractional times": claims(iat=NOW + 0.5, exp=NOW + 600.9, nbf=NOW - 0.25),
    "another trusted issuer": claims(iss=EXTERNAL),
    "extra claims": claims(jti="abc", scope="play", roles=["player"]),
}


@pytest.mark.parametrize("case", ACCEPTED_CLAIMS)
def test_claims_within_the_rules_are_accepted(case: str) -> None:
    check = verifier(issuers=(DEV_ISSUER, EXTERNAL))
    got = check.verify(signed(ACCEPTED_CLAIMS[case]), NOW)
    assert got.player_id == "alice"
    assert got.expires_at == int(ACCEPTED_CLAIMS[case]["exp"])


OUT_OF_RANGE: dict[str, tuple[str, str]] = {
    "exp 10**30": (json.dumps(claims(exp=10**30)), "longer than the maximum"),
    "exp a string": (json.dumps(claims(exp="x")), "expiry ('exp') is not a number"),
    "exp a numeric string": (json.dumps(claims(exp=str(NOW + 60))), "expiry ('exp') is not a number"),
    "exp 1e400": (json.dumps(claims()).replace(str(NOW + 600), "1e400"), "expiry ('exp') is not a finite"),
    "exp -1e400": (json.dumps(claims()).replace(str(NOW + 600), "-1e400"), "expiry ('exp') is not a finite"),
    "exp NaN": (json.dumps(claims()).replace(str(NOW + 600), "NaN"), "expiry ('exp') is not a finite"),
    "exp 1e300": (json.dumps(claims()).replace(str(NOW + 600), "1e300"), "longer than the maximum"),
    "exp -10**30": (json.dumps(claims(exp=-(10**30))), "expired"),
    "exp true": (json.dumps(claims(exp=True)), "expiry ('exp') is not a number"),
    "exp null": (json.dumps(claims(exp=None) | {"exp": None}), "no expiry"),
    "exp an object": (json.dumps(claims(exp={"at": NOW})), "expiry ('exp') is not a number"),
    "iat a list": (json.dumps(claims(iat=[NOW])), "issue time ('iat') is not a number"),
    "iat 1e400": (json.dumps(claims()).replace(f'"iat": {NOW}', '"iat": 1e400'), "issue time ('iat') is not"),
    "iat -10**30": (json.dumps(claims(iat=-(10**30))), "longer than the maximum"),
    "nbf a string": (json.dumps(claims(nbf="soon")), "not-before time ('nbf') is not a number"),
    "nbf Infinity": (
        json.dumps(claims(nbf=0)).replace('"nbf": 0', '"nbf": Infinity'),
        "('nbf') is not a finite",
    ),
    "payload a list": ("[1, 2]", "malformed"),
    "payload a number": ("12", "malformed"),
    "payload not JSON": ("{exp:", "malformed"),
    "payload nested 650 deep": ("[" * 650 + "]" * 650, "malformed"),
    "payload too big": (json.dumps(claims(pad="x" * 2000)), "too long"),
}


@pytest.mark.parametrize("case", OUT_OF_RANGE)
def test_claims_of_the_wrong_type_or_out_of_range_are_refused_cleanly(case: str) -> None:
    payload, reason = OUT_OF_RANGE[case]
    assert reason in refusal(signed(payload))


def test_malformed_tokens_are_refused() -> None:
    good = mint_token(ED, "alice", 600, NOW)
    head, body, signature = good.split(".")
    header = json.loads(base64.urlsafe_b64decode(head + "=="))
    cases = {
        "garbage": ("garbage", "malformed"),
        "empty": ("", "malformed"),
        "two parts": (f"{head}.{body}", "malformed"),
        "four parts": (f"{good}.x", "malformed"),
        "not base64url": (f"{head}.{body}!.{signature}", "malformed"),
        "header not JSON": (f"{b64(b'{')}.{body}.{signature}", "malformed"),
        "header a list": (f"{b64(b'[]')}.{body}.{signature}", "malformed"),
        "no kid": (forged({"alg": "EdDSA"}, claims(), b"x" * 64), "names no signing key"),
        "kid not a string": (forged({"alg": "EdDSA", "kid": 5}, claims(), b"x" * 64), "malformed"),
        "unknown kid": (
            forged({**header, "kid": "k" * 500}, claims(), b"x" * 64),
            "not one the gateway trusts",
        ),
        "unknown critical header": (forged({**header, "crit": ["exp"]}, claims(), b"x"), "malformed"),
        "unencoded payload (b64=false)": (
            forged({**header, "b64": False, "crit": ["b64"]}, claims(), b"x"),
            "malformed",
        ),
        "payload altered": (f"{head}.{b64(json.dumps(claims(sub='bob')).encode())}.{signature}", "signature"),
        "signature altered": (f"{head}.{body}.{signature[:-4]}AAAA", "signature"),
        "signature empty": (f"{head}.{body}.", "signature"),
        "too long": (good + "A" * tokens.MAX_TOKEN_CHARS, "too long"),
    }
    for case, (token, reason) in cases.items():
        assert reason in refusal(token), case
        assert len(refusal(token)) < 400, case


# -- keys --------------------------------------------------------------------------------------------------


def test_a_jwks_keeps_only_usable_signing_keys() -> None:
    ed448_jwk = jwt.algorithms.OKPAlgorithm.to_jwk(
        ed448.Ed448PrivateKey.generate().public_key(), as_dict=True
    )
    p384 = ec.generate_private_key(ec.SECP384R1()).public_key()
    rsa_jwk = jwt.algorithms.RSAAlgorithm.to_jwk(
        rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key(), as_dict=True
    )
    private_jwk = jwt.algorithms.OKPAlgorithm.to_jwk(ed25519.Ed25519PrivateKey.generate(), as_dict=True)
    data = {
        "keys": [
            ED.public_jwk(),
            {name: value for name, value in ES.public_jwk().items() if name not in ("use", "alg")}
            | {"kid": "es-no-use"},
            {**rsa_jwk, "kid": "rsa"},
            {"kty": "oct", "k": b64(b"secret"), "kid": "hmac"},
            {**ed448_jwk, "kid": "ed448"},
            {**jwt.algorithms.ECAlgorithm.to_jwk(p384, as_dict=True), "kid": "p384"},
            {**private_jwk, "kid": "private"},
            {**ES.public_jwk(), "kid": "for-encryption", "use": "enc"},
            {**ED.public_jwk(), "kid": "wrong-alg", "alg": "ES256"},
            {**ED.public_jwk(), "kid": None},
            {**ED.public_jwk(), "kid": "bad-x", "x": "!!"},
            {**ES.public_jwk(), "kid": ED.kid},  # a second key with the same kid
            "not an object",
        ]
    }
    usable, skipped = tokens.parse_jwks(data)
    assert set(usable) == {ED.kid, "es-no-use"}
    assert (usable[ED.kid].algorithm, usable["es-no-use"].algorithm) == ("EdDSA", "ES256")
    assert len(skipped) == len(data["keys"]) - 2
    assert any("private key" in reason for reason in skipped)
    not_jwks: list[object] = [[], {"keys": {}}, {"kid": "x"}, "x"]
    for not_a_jwks in not_jwks:
        with pytest.raises(ValueError, match="JWKS"):
            tokens.parse_jwks(not_a_jwks)


def test_rotation_by_kid_two_keys_at_once_then_the_old_one_dropped(tmp_path: Path) -> None:
    clock = FakeClock()
    old, new = ED, SigningKey.generate()
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [old.public_jwk()]}))
    ring = KeyRing(clock=clock)
    ring.add_file(jwks)
    check = TokenVerifier(ring, clock=clock)
    old_token = mint_token(old, "alice", 600, NOW)
    assert check.verify(old_token, NOW).player_id == "alice"

    # 1. The issuer publishes the new key next to the old one; the gateway reads the file again when a
    #    token names the new kid (at most once a second) or every few seconds anyway.
    jwks.write_text(json.dumps({"keys": [old.public_jwk(), new.public_jwk()]}))
    new_token = mint_token(new, "bob", 600, NOW)
    assert "not one the gateway trusts" in refusal(new_token, check=check)  # read less than 1 s ago
    clock.now += 1
    assert check.verify(new_token, NOW).player_id == "bob"
    assert check.verify(old_token, NOW).player_id == "alice"  # both keys at once

    # 2. Once the old key's longest token has expired, the issuer drops it: its tokens are refused,
    #    even one verified (and remembered) a moment ago.
    jwks.write_text(json.dumps({"keys": [new.public_jwk()]}))
    assert check.verify(old_token, NOW).player_id == "alice"  # not read again yet
    clock.now += tokens.JWKS_FILE_CHECK_S
    assert "not one the gateway trusts" in refusal(old_token, check=check)
    assert check.verify(new_token, NOW).player_id == "bob"

    # A broken publish keeps the last good keys.
    jwks.write_text("{not json")
    clock.now += tokens.JWKS_FILE_CHECK_S
    assert check.verify(new_token, NOW).player_id == "bob"
    jwks.write_text(json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "x"}]}))
    clock.now += tokens.JWKS_FILE_CHECK_S
    assert check.verify(new_token, NOW).player_id == "bob"


class JwksServer:
    """A JWKS endpoint on 127.0.0.1 (http.server on a thread) that counts its requests."""

    def __init__(self, *keys: SigningKey) -> None:
        self.jwks: dict[str, Any] = {"keys": [key.public_jwk() for key in keys]}
        self.requests = 0
        self.delay_s = 0.0
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                time.sleep(server.delay_s)
                body = json.dumps(server.jwks).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/.well-known/jwks.json"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def publish(self, *keys: SigningKey) -> None:
        self.jwks = {"keys": [key.public_jwk() for key in keys]}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def jwks_server() -> Iterator[JwksServer]:
    server = JwksServer(ED)
    yield server
    server.close()


def test_an_unknown_kid_triggers_one_jwks_refetch(jwks_server: JwksServer) -> None:
    clock = FakeClock()
    ring = KeyRing(clock=clock)
    ring.add_url(jwks_server.url)
    check = TokenVerifier(ring, clock=clock)
    assert jwks_server.requests == 0  # fetched at start (GatewayService.start), not on construction
    ring.refresh(remote_only=True)
    assert jwks_server.requests == 1
    for _ in range(50):
        assert check.verify(mint_token(ED, "alice", 600, NOW), NOW).player_id == "alice"
    assert jwks_server.requests == 1  # cached
    assert "not one the gateway trusts" in refusal(mint_token(ES, "eve", 600, NOW), check=check)
    assert jwks_server.requests == 1  # fetched less than 30 s ago

    clock.now += tokens.JWKS_REFETCH_S
    rotated = SigningKey.generate("ES256")
    jwks_server.publish(ED, rotated)
    jwks_server.delay_s = 1.0
    started = time.monotonic()
    reason = refusal(mint_token(rotated, "bob", 600, NOW), check=check)
    assert time.monotonic() - started < 0.5  # the fetch runs on another thread: nobody waits for it
    assert "fetching its issuers' keys again: retry" in reason
    for _ in range(20):  # more tokens with unknown kids while it runs: still one fetch
        refusal(mint_token(SigningKey.generate(), "eve", 600, NOW), check=check)
    ring.wait()
    assert jwks_server.requests == 2
    assert check.verify(mint_token(rotated, "bob", 600, NOW), NOW).player_id == "bob"
    assert check.verify(mint_token(ED, "alice", 600, NOW), NOW).player_id == "alice"

    # Unknown kids right after a fetch are refused without asking again (at most one per 30 s).
    jwks_server.delay_s = 0.0
    for _ in range(20):
        assert "not one the gateway trusts" in refusal(
            mint_token(SigningKey.generate(), "eve", 600, NOW), check=check
        )
    ring.wait()
    assert jwks_server.requests == 2
    clock.now += tokens.JWKS_REFETCH_S
    refusal(mint_token(SigningKey.generate(), "eve", 600, NOW), check=check)
    ring.wait()
    assert jwks_server.requests == 3

    # Past the cache lifetime the set is fetched again in the background; the old set serves meanwhile.
    jwks_server.publish(rotated)
    clock.now += tokens.JWKS_CACHE_S
    assert check.verify(mint_token(ED, "alice", 600, NOW), NOW).player_id == "alice"
    ring.wait()
    assert jwks_server.requests == 4
    assert "not one the gateway trusts" in refusal(mint_token(ED, "alice", 600, NOW), check=check)


def test_an_unreachable_jwks_url_refuses_tokens_without_failing() -> None:
    clock = FakeClock()
    ring = KeyRing(clock=clock)
    ring.add_url(f"http://127.0.0.1:{free_port()}/jwks.json")
    check = TokenVerifier(ring, clock=clock)
    ring.refresh(remote_only=True)
    reason = refusal(mint_token(ED, "alice", 600, NOW), check=check)
    assert "the gateway has no token keys yet" in reason
    assert "127.0.0.1" not in reason  # where the keys come from is for the log, not for callers
    assert "Fail to fetch" in ring._sources[0].error


def test_verified_tokens_are_remembered_but_their_times_checked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = 0
    decode = jwt.decode

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return decode(*args, **kwargs)

    monkeypatch.setattr(jwt, "decode", counting)
    clock = FakeClock()
    check = TokenVerifier(KeyRing.of(ED), clock=clock)
    token = mint_token(ED, "alice", 60, NOW)
    for second in range(60):
        assert check.verify(token, NOW + second).player_id == "alice"
    assert calls == 1
    assert "expired" in refusal(token, NOW + 60 + tokens.LEEWAY_S, check)
    assert calls == 1
    clock.now += tokens.VERIFIED_CACHE_S
    check.verify(token, NOW)
    assert calls == 2  # remembered for a minute at most
    small = TokenVerifier(KeyRing.of(ED), cache_size=3)
    first, *others = (mint_token(ED, player, 60, NOW) for player in ("a", "b", "c", "d"))
    for token in (first, *others, *others):
        small.verify(token, NOW)
    assert calls == 2 + 4
    small.verify(first, NOW)  # the least recently used, forgotten
    assert calls == 2 + 5


def test_verification_is_cheap_enough() -> None:
    """Not a benchmark: a guard against a verification path gone pathologically slow."""
    check = verifier()
    fresh = [mint_token(ED, f"p{index}", 600, NOW) for index in range(200)]
    started = time.perf_counter()
    for token in fresh:
        check.verify(token, NOW)
    uncached = (time.perf_counter() - started) / len(fresh)
    started = time.perf_counter()
    for token in fresh * 10:
        check.verify(token, NOW)
    cached = (time.perf_counter() - started) / (len(fresh) * 10)
    assert uncached < 0.005
    assert cached < uncached / 5


# -- configuration and the development key -----------------------------------------------------------------


def test_configuration_from_the_environment(tmp_path: Path) -> None:
    dev = TokenPolicy.from_env({}, production=False)
    assert (dev.issuers, dev.audience, dev.max_lifetime_s) == ((DEV_ISSUER,), "skillclassics", 86_400)
    policy = TokenPolicy.from_env(
        {
            "GATEWAY_TOKEN_ISSUERS": f" {EXTERNAL}, {DEV_ISSUER} ,",
            "GATEWAY_TOKEN_AUDIENCE": "games",
            "GATEWAY_TOKEN_MAX_LIFETIME_SECONDS": "3600",
        },
        production=True,
    )
    assert (policy.issuers, policy.audience, policy.max_lifetime_s) == ((EXTERNAL, DEV_ISSUER), "games", 3600)
    with pytest.raises(ConfigError, match="GATEWAY_TOKEN_ISSUERS must be set in production"):
        TokenPolicy.from_env({}, production=True)
    for bad in ("x", "0"):
        with pytest.raises(ConfigError, match="GATEWAY_TOKEN_MAX_LIFETIME_SECONDS"):
            TokenPolicy.from_env({"GATEWAY_TOKEN_MAX_LIFETIME_SECONDS": bad}, production=False)

    data = {"DATA_DIR": str(tmp_path / "data")}
    production = {**data, "SKILLCLASSICS_ENV": "production", "GATEWAY_TOKEN_ISSUERS": EXTERNAL}
    with pytest.raises(ConfigError, match="GATEWAY_JWKS_FILE or GATEWAY_JWKS_URL must be set in production"):
        tokens.token_verifier(production)
    config = dataclasses.replace(
        ServiceConfig.from_env("gateway", {"GRPC_PORT": "0", "METRICS_PORT": "-1", **data}),
        environment="production",
    )
    with pytest.raises(ConfigError, match="GATEWAY_JWKS_FILE or GATEWAY_JWKS_URL"):
        GatewayService(config, {"GATEWAY_TOKEN_ISSUERS": EXTERNAL})
    assert not (tmp_path / "data" / tokens.DEV_KEY_FILE).exists()  # no development key in production

    with pytest.raises(ConfigError, match="GATEWAY_JWKS_FILE"):
        tokens.token_verifier({**data, "GATEWAY_JWKS_FILE": str(tmp_path / "missing.json")})
    only_hmac = tmp_path / "hmac.json"
    only_hmac.write_text(json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "x"}]}))
    with pytest.raises(ConfigError, match="no usable key"):
        tokens.token_verifier({**data, "GATEWAY_JWKS_FILE": str(only_hmac)})
    with pytest.raises(ConfigError, match="GATEWAY_JWKS_URL"):
        tokens.token_verifier({**data, "GATEWAY_JWKS_URL": "file:///etc/passwd"})

    published = tmp_path / "jwks.json"
    published.write_text(json.dumps(ES.jwks()))
    check = tokens.token_verifier({**production, "GATEWAY_JWKS_FILE": str(published)})
    assert check.keys.kids == {ES.kid}
    assert check.policy.issuers == (EXTERNAL,)


def test_the_development_key_is_made_once_even_by_processes_starting_together(tmp_path: Path) -> None:
    script = (
        "import sys; from pathlib import Path; from services.gateway import tokens; "
        "print(tokens.token_key({}, Path(sys.argv[1]), production=False).kid)"
    )
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    kids = {process.communicate(timeout=60)[0].strip() for process in processes}
    assert all(process.returncode == 0 for process in processes)
    key_file = tmp_path / tokens.DEV_KEY_FILE
    assert kids == {tokens.token_key({}, tmp_path, production=False).kid}
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert sorted(path.name for path in tmp_path.iterdir()) == [tokens.DEV_KEY_FILE]  # no temporary left
    # The kid is the key's RFC 7638 thumbprint, so it is stable across restarts and the same everywhere.
    key = tokens.token_key({}, tmp_path, production=False)
    canonical = json.dumps(
        {name: key.public_jwk()[name] for name in ("crv", "kty", "x")}, separators=(",", ":")
    )
    assert key.kid == b64(hashlib.sha256(canonical.encode()).digest())
    # The development gateway trusts it; the mint command signs with it.
    check = tokens.token_verifier({"DATA_DIR": str(tmp_path)})
    assert check.keys.kids == {key.kid}
    assert check.verify(mint_token(key, "alice", 60, int(time.time())), int(time.time())).player_id == "alice"
    with pytest.raises(FileNotFoundError):
        tokens.token_key({}, tmp_path / "elsewhere", production=False, create=False)
    with pytest.raises(FileExistsError):
        tokens.write_development_key(tmp_path, ED)
    key_file.write_text("not a key")
    with pytest.raises(ConfigError, match="PEM private key"):
        tokens.token_key({}, tmp_path, production=False)


# -- over gRPC ---------------------------------------------------------------------------------------------


async def test_an_external_issuers_token_is_accepted_by_whoami(tmp_path: Path) -> None:
    # What another team does with standard tools: an Ed25519 key pair, its JWKS, and PyJWT.
    private_key = ed25519.Ed25519PrivateKey.generate()
    public_jwk = jwt.algorithms.OKPAlgorithm.to_jwk(private_key.public_key(), as_dict=True)
    public_jwk |= {"kid": "identity-2026-01", "alg": "EdDSA", "use": "sig"}
    jwks = tmp_path / "identity-jwks.json"
    jwks.write_text(json.dumps({"keys": [public_jwk]}))
    now = int(time.time())
    token = jwt.encode(
        {"iss": EXTERNAL, "aud": "skillclassics", "sub": "carol", "iat": now, "exp": now + 900},
        private_key,
        algorithm="EdDSA",
        headers={"kid": "identity-2026-01"},
    )

    gateway = await start_gateway(
        tmp_path, {"GATEWAY_JWKS_FILE": str(jwks), "GATEWAY_TOKEN_ISSUERS": EXTERNAL}
    )
    try:
        async with grpc.aio.insecure_channel(gateway.address) as channel:
            gw = gateway_pb2_grpc.GatewayServiceStub(channel)
            who = await gw.WhoAmI(pb.WhoAmIRequest(), metadata=(("authorization", f"Bearer {token}"),))
            assert (who.player_id, who.expires_at_ms) == ("carol", (now + 900) * 1000)
            assert who.expires_at == now + 900  # deprecated (Unix seconds), still filled for v1 callers
            # A development token is from an issuer (and a key) this gateway does not trust.
            dev = mint_token(SigningKey.of(private_key, kid="identity-2026-01"), "carol", 60, now)
            await refused(
                gw.WhoAmI(pb.WhoAmIRequest(), metadata=(("authorization", f"Bearer {dev}"),)),
                UNAUTHENTICATED,
                "issuer is not trusted",
            )
    finally:
        await gateway.stop(grace=0.5)


async def test_two_authorization_headers_and_bad_claims_are_unauthenticated_never_internal(
    tmp_path: Path,
) -> None:
    gateway = await start_gateway(tmp_path, _trusting(tmp_path, ED))
    now = int(time.time())
    good = mint_token(ED, "alice", 600, now)
    stranger = mint_token(ES, "mallory", 600, now)
    try:
        async with grpc.aio.insecure_channel(gateway.address) as channel:
            gw = gateway_pb2_grpc.GatewayServiceStub(channel)
            assert (await gw.WhoAmI(pb.WhoAmIRequest(), metadata=_bearer(good))).player_id == "alice"
            for first, second in ((good, stranger), (stranger, good), (good, good)):
                twice = (("authorization", f"Bearer {first}"), ("authorization", f"Bearer {second}"))
                await refused(gw.WhoAmI(pb.WhoAmIRequest(), metadata=twice), UNAUTHENTICATED, "send one")
                await refused(
                    gw.GetRatings(pb.GetRatingsRequest(), metadata=twice), UNAUTHENTICATED, "send one"
                )
            bad = {
                "exp 10**30": json.dumps(claims(iat=now, exp=10**30)),
                "exp a string": json.dumps(claims(iat=now, exp="x")),
                "exp 1e400": json.dumps(claims(iat=now, exp=0)).replace('"exp": 0', '"exp": 1e400'),
                "exp NaN": json.dumps(claims(iat=now, exp=0)).replace('"exp": 0', '"exp": NaN'),
                "iat -1e400": json.dumps(claims(iat=0, exp=now + 60)).replace('"iat": 0', '"iat": -1e400'),
                "sub a number": json.dumps(claims(iat=now, exp=now + 60, sub=10**40)),
                "payload a list": "[]",
            }
            for case, payload in bad.items():
                await refused(
                    gw.WhoAmI(pb.WhoAmIRequest(), metadata=_bearer(signed(payload))), UNAUTHENTICATED, ""
                )
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await gw.WhoAmI(pb.WhoAmIRequest(), metadata=_bearer(signed(payload)))
                assert caught.value.code() == UNAUTHENTICATED, case
                assert (caught.value.details() or "").startswith("token "), case
            await refused(
                gw.WhoAmI(
                    pb.WhoAmIRequest(), metadata=_bearer(signed(json.dumps(claims(iat=now, exp=10**30))))
                ),
                UNAUTHENTICATED,
                "token lives longer than the maximum of 86400 s",
            )
    finally:
        await gateway.stop(grace=0.5)


def _trusting(tmp_path: Path, *keys: SigningKey) -> dict[str, str]:
    path = tmp_path / "trusted-jwks.json"
    path.write_text(json.dumps({"keys": [key.public_jwk() for key in keys]}))
    return {"GATEWAY_JWKS_FILE": str(path)}


def _bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)
