"""Player tokens: standard JWTs (RFC 7519) signed with an issuer's private key, checked with its public key.

Clients send ``authorization: Bearer <jwt>``. The gateway accepts a token when:

- its header's ``alg`` is ``EdDSA`` (Ed25519) or ``ES256`` (ECDSA P-256 with SHA-256), never ``none``,
  an HMAC or an RSA algorithm, and its ``kid`` names a key of the trusted key set whose type matches
  that algorithm; the signature verifies with that key (PyJWT);
- ``iss`` is one of ``GATEWAY_TOKEN_ISSUERS`` and ``aud`` is (or contains) ``GATEWAY_TOKEN_AUDIENCE``;
- ``sub`` is a player id (:data:`PLAYER_ID`);
- ``exp`` and ``iat`` are present, ``nbf`` optional, each a number of Unix seconds; ``exp`` not passed,
  ``iat`` and ``nbf`` not in the future (:data:`LEEWAY_S` either way, for clock skew); ``exp - iat``
  at most ``GATEWAY_TOKEN_MAX_LIFETIME_SECONDS`` and ``exp`` at most that far from now (no leeway).

Anything else is a :class:`TokenError` naming the reason (the gateway answers ``UNAUTHENTICATED``).

The trusted keys are a JWKS (RFC 7517): ``GATEWAY_JWKS_FILE`` (read at start, re-read when it changes)
and/or ``GATEWAY_JWKS_URL`` (fetched off the event loop with PyJWT's ``PyJWKClient``, kept
:data:`JWKS_CACHE_S`, fetched again sooner when a token names an unknown ``kid``, at most once every
:data:`JWKS_REFETCH_S`). In development, when neither is set, an Ed25519 key pair is generated once into
``DATA_DIR/gateway-token-signing.pem`` (mode 0600) and the gateway trusts its public key; in production
one of them must be set.

Development tokens: ``python -m services.gateway.tokens mint PLAYER [--ttl 3600]`` prints one, signed
with that development key (same environment, same ``DATA_DIR``); ``... jwks`` prints its public JWKS.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import functools
import hashlib
import json
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from libs.runtime.config import ConfigError, env_int
from libs.runtime.log import get_logger
from libs.runtime.private_files import create_private

_log = get_logger(__name__)

JWKS_FILE_VARIABLE = "GATEWAY_JWKS_FILE"
JWKS_URL_VARIABLE = "GATEWAY_JWKS_URL"
ISSUERS_VARIABLE = "GATEWAY_TOKEN_ISSUERS"
AUDIENCE_VARIABLE = "GATEWAY_TOKEN_AUDIENCE"
MAX_LIFETIME_VARIABLE = "GATEWAY_TOKEN_MAX_LIFETIME_SECONDS"

DEV_ISSUER = "skillclassics-dev"
"""The issuer of development tokens (the default of ``GATEWAY_TOKEN_ISSUERS`` outside production)."""
DEFAULT_AUDIENCE = "skillclassics"
DEFAULT_MAX_LIFETIME_S = 86_400
LEEWAY_S = 30
"""Clock skew allowed between an issuer and the gateway, on ``exp``, ``nbf`` and ``iat``."""
ALGORITHMS = ("EdDSA", "ES256")
"""The only signature algorithms accepted."""
DEV_KEY_FILE = "gateway-token-signing.pem"
MAX_TOKEN_CHARS = 2048
PLAYER_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
"""What a player id may be (as matchmaking accepts it)."""

JWKS_CACHE_S = 300.0
"""How long keys fetched from ``GATEWAY_JWKS_URL`` are used before they are fetched again (the old set
stays in use until the new one arrives)."""
JWKS_REFETCH_S = 30.0
"""The least time between two fetches of ``GATEWAY_JWKS_URL`` (a token naming an unknown ``kid`` asks for
one; failed fetches are retried no sooner either)."""
JWKS_FETCH_TIMEOUT_S = 5.0
JWKS_FILE_CHECK_S = 5.0
"""How often ``GATEWAY_JWKS_FILE`` is read again to pick up a rotation (and at most once a second when a
token names an unknown ``kid``)."""
VERIFIED_CACHE_SIZE = 10_000
"""Tokens whose signature and claims were checked, remembered so that the next call with the same token
only re-checks the times (an Ed25519 verification through PyJWT costs about 0.15 ms)."""
VERIFIED_CACHE_S = 60.0

_NUMBER_CLAIMS = {"exp": "expiry", "iat": "issue time", "nbf": "not-before time"}
_CLAIM_NAMES = {"sub": "subject", "iss": "issuer", "aud": "audience", **_NUMBER_CLAIMS}
_KEY_TYPES: dict[tuple[object, object], str] = {("OKP", "Ed25519"): "EdDSA", ("EC", "P-256"): "ES256"}
_DECODE_OPTIONS: jwt.types.Options = {
    "verify_signature": True,
    "require": ["exp", "iat", "iss", "aud", "sub"],
    "verify_aud": True,
    "verify_iss": True,
    "verify_sub": True,
    "verify_jti": True,
    # The times are checked below, against the caller's clock, with the type and range checks PyJWT
    # does not do (an infinite or huge exp, a lifetime past the maximum).
    "verify_exp": False,
    "verify_nbf": False,
    "verify_iat": False,
}

PrivateKey = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey


class TokenError(Exception):
    """The token is malformed, forged, expired or not meant for this gateway; the message says which."""


class TokenExpiredError(TokenError):
    """The token was good but has expired: the player signs in again."""


@dataclass(frozen=True, slots=True)
class Claims:
    """What a valid token says."""

    player_id: str
    expires_at: int
    """Unix seconds."""
    issuer: str = ""


# -- keys --------------------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def thumbprint(jwk: Mapping[str, Any]) -> str:
    """The RFC 7638 thumbprint (SHA-256, base64url) of an OKP or EC public JWK: a stable ``kid``."""
    members = ("crv", "kty", "x", "y") if jwk.get("kty") == "EC" else ("crv", "kty", "x")
    canonical = json.dumps({name: jwk[name] for name in members}, separators=(",", ":"), sort_keys=True)
    return _b64(hashlib.sha256(canonical.encode()).digest())


def public_jwk(key: PrivateKey | ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey) -> dict[str, str]:
    """The public JWK of an Ed25519 or P-256 key (``kty``, ``crv``, ``x``, ``y``), without ``kid``."""
    public = (
        key.public_key() if isinstance(key, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey) else key
    )
    if isinstance(public, ed25519.Ed25519PublicKey):
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return {"kty": "OKP", "crv": "Ed25519", "x": _b64(raw)}
    if not isinstance(public.curve, ec.SECP256R1):
        raise ValueError(f"only P-256 EC keys are supported, not {public.curve.name}")
    numbers = public.public_numbers()
    return {"kty": "EC", "crv": "P-256", "x": _b64(numbers.x.to_bytes(32)), "y": _b64(numbers.y.to_bytes(32))}


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A private key that signs tokens, with what its tokens say about their issuer and audience."""

    private_key: PrivateKey
    kid: str
    issuer: str = DEV_ISSUER
    audience: str = DEFAULT_AUDIENCE
    max_lifetime_s: int = DEFAULT_MAX_LIFETIME_S
    """The longest ``ttl_s`` :func:`mint_token` signs (the gateway refuses longer-lived tokens)."""

    @classmethod
    def of(cls, private_key: PrivateKey, **settings: Any) -> SigningKey:
        """``private_key`` with its RFC 7638 thumbprint as ``kid`` (unless ``kid=`` says otherwise)."""
        settings.setdefault("kid", thumbprint(public_jwk(private_key)))
        return cls(private_key, **settings)

    @classmethod
    def generate(cls, algorithm: str = "EdDSA", **settings: Any) -> SigningKey:
        """A new key pair: ``EdDSA`` (Ed25519) or ``ES256`` (P-256)."""
        if algorithm == "EdDSA":
            return cls.of(ed25519.Ed25519PrivateKey.generate(), **settings)
        if algorithm == "ES256":
            return cls.of(ec.generate_private_key(ec.SECP256R1()), **settings)
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}")

    @property
    def algorithm(self) -> str:
        return "EdDSA" if isinstance(self.private_key, ed25519.Ed25519PrivateKey) else "ES256"

    def public_jwk(self) -> dict[str, str]:
        """The JWK to publish: the public key, its ``kid``, ``alg`` and ``use``."""
        return {**public_jwk(self.private_key), "kid": self.kid, "alg": self.algorithm, "use": "sig"}

    def jwks(self) -> dict[str, list[dict[str, str]]]:
        """A JWKS with this key alone."""
        return {"keys": [self.public_jwk()]}

    def pem(self) -> bytes:
        """The private key, PKCS#8 PEM, unencrypted."""
        return self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )


@dataclass(frozen=True, slots=True)
class TrustedKey:
    """A public key tokens may be signed with."""

    kid: str
    algorithm: str
    """``EdDSA`` or ``ES256``: the only algorithm a token signed with this key may name."""
    jwk: jwt.PyJWK
    thumbprint: str


def parse_jwks(data: object) -> tuple[dict[str, TrustedKey], list[str]]:
    """The usable keys of a JWKS (by ``kid``) and why each other key was skipped.

    Usable: an Ed25519 (``OKP``) or P-256 (``EC``) public key with a ``kid``, ``use`` absent or ``sig``,
    ``alg`` absent or matching the key type. Other keys (RSA, HMAC ``oct``, other curves, private keys)
    are skipped, so one JWKS can also serve other consumers; a repeated ``kid`` keeps the first key.
    """
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise ValueError('a JWKS must be a JSON object with a "keys" list')
    keys: dict[str, TrustedKey] = {}
    skipped: list[str] = []
    for index, entry in enumerate(data["keys"]):
        where = f"key {index}"
        if not isinstance(entry, dict):
            skipped.append(f"{where}: not an object")
            continue
        kid = entry.get("kid")
        if not isinstance(kid, str) or not kid:
            skipped.append(f"{where}: no kid")
            continue
        where = f"key {kid[:64]!r}"
        kty, crv = entry.get("kty"), entry.get("crv")
        algorithm = _KEY_TYPES.get((kty, crv))
        if algorithm is None:
            skipped.append(f"{where}: {kty}/{crv} is not Ed25519 or P-256")
        elif entry.get("use", "sig") != "sig":
            skipped.append(f"{where}: use is not sig")
        elif entry.get("alg", algorithm) != algorithm:
            skipped.append(f"{where}: alg {entry.get('alg')!r} does not fit a {crv} key")
        elif "d" in entry:
            skipped.append(f"{where}: a private key (never publish 'd')")
        elif kid in keys:
            skipped.append(f"{where}: a second key with this kid")
        else:
            try:
                key = jwt.PyJWK(entry, algorithm)
            except (jwt.PyJWTError, ValueError, TypeError) as error:
                skipped.append(f"{where}: {error}")
                continue
            if not isinstance(key.key, ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey):
                skipped.append(f"{where}: not a public key")
                continue
            keys[kid] = TrustedKey(kid, algorithm, key, thumbprint(public_jwk(key.key)))
    return keys, skipped


class _Source:
    """One place trusted keys come from, and what was last loaded from it."""

    def __init__(
        self,
        name: str,
        load: Callable[[], object],
        *,
        remote: bool,
        lifetime_s: float,
        min_interval_s: float,
    ) -> None:
        self.name = name
        self.load = load
        """Returns the JWKS as parsed JSON (blocking: a file read or an HTTP request)."""
        self.remote = remote
        """Loaded on a thread of its own (never on the caller's), or else in line."""
        self.lifetime_s = lifetime_s
        self.min_interval_s = min_interval_s
        self.raw: object = None
        self.keys: dict[str, TrustedKey] = {}
        self.loaded_at: float | None = None
        self.attempted_at: float | None = None
        self.busy = False
        self.error = ""


def _read_json(path: Path) -> object:
    return json.loads(path.read_bytes())


class KeyRing:
    """The trusted keys by ``kid``, merged from their sources, refreshed without ever blocking a caller
    on the network: remote sources load on a background thread and the old keys stay in use meanwhile."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._sources: list[_Source] = []
        self._keys: dict[str, TrustedKey] = {}
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()
        self._next_check = 0.0
        self.version = 0
        """Changes whenever the set of keys changes (verified tokens remembered before are checked again)."""

    @classmethod
    def of(cls, *keys: SigningKey | Mapping[str, Any]) -> KeyRing:
        """A ring trusting exactly these keys (signing keys' public halves, or a JWKS)."""
        ring = cls()
        for key in keys:
            data: Mapping[str, Any] = key.jwks() if isinstance(key, SigningKey) else key
            ring.add_source(f"static keys {len(ring._sources)}", functools.partial(dict, data))
        return ring

    def add_source(
        self,
        name: str,
        load: Callable[[], object],
        *,
        remote: bool = False,
        lifetime_s: float = math.inf,
        min_interval_s: float = math.inf,
    ) -> None:
        """Add a source and load it once now (in line; see :meth:`refresh` for remote ones). A local source
        that cannot be read or has no usable key is a :class:`ConfigError`."""
        source = _Source(name, load, remote=remote, lifetime_s=lifetime_s, min_interval_s=min_interval_s)
        self._sources.append(source)
        if not remote:
            self._load(source)
            if source.loaded_at is None:
                raise ConfigError(f"{name}: {source.error}")

    def add_url(
        self, url: str, *, lifetime_s: float = JWKS_CACHE_S, min_interval_s: float = JWKS_REFETCH_S
    ) -> None:
        """A JWKS served over HTTP(S), fetched with PyJWT's ``PyJWKClient`` (not yet: see :meth:`refresh`)."""
        try:
            client = jwt.PyJWKClient(url, cache_jwk_set=False, timeout=JWKS_FETCH_TIMEOUT_S)
        except jwt.PyJWTError as error:
            raise ConfigError(f"{JWKS_URL_VARIABLE}: {error}") from None
        self.add_source(
            f"{JWKS_URL_VARIABLE} {url}",
            client.fetch_data,
            remote=True,
            lifetime_s=lifetime_s,
            min_interval_s=min_interval_s,
        )

    def add_file(self, path: Path) -> None:
        """A JWKS file, read now (a :class:`ConfigError` when unusable) and again when it changes."""
        self.add_source(
            f"{JWKS_FILE_VARIABLE} {path}",
            lambda: _read_json(path),
            lifetime_s=JWKS_FILE_CHECK_S,
            min_interval_s=1.0,
        )

    @property
    def kids(self) -> frozenset[str]:
        return frozenset(self._keys)

    def refresh(self, *, remote_only: bool = False) -> None:
        """Load every source now, in line (blocking: call it off the event loop when a source is remote)."""
        for source in self._sources:
            if source.remote or not remote_only:
                self._load(source)

    def wait(self, timeout: float = 10.0) -> None:
        """Wait for the background loads in flight (tests)."""
        deadline = time.monotonic() + timeout
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))

    def tick(self) -> None:
        """Called on every verification: refresh what is due, at most every so often (cheap otherwise)."""
        if self._clock() >= self._next_check:
            self._refresh_due(unknown_kid=False)

    def find(self, kid: str) -> TrustedKey | None:
        """The key named ``kid``; when unknown, ask the sources again (rate-limited; local ones at once)."""
        key = self._keys.get(kid)
        if key is None:
            self._refresh_due(unknown_kid=True)
            key = self._keys.get(kid)
        return key

    def unknown(self, kid: str) -> str:
        """Why ``kid`` is refused, for the caller."""
        name = kid if len(kid) <= 64 else kid[:64] + "..."
        if any(source.busy for source in self._sources):
            return (
                f"token signing key {name!r} is unknown; the gateway is fetching its issuers' keys again: "
                "retry in a few seconds"
            )
        if not self._keys:  # the reason is in the log (tokens.jwks_load_failed), not for callers to read
            return "the gateway has no token keys yet (its issuers' JWKS could not be loaded): retry later"
        return f"token signing key {name!r} is not one the gateway trusts"

    def _refresh_due(self, *, unknown_kid: bool) -> None:
        now = self._clock()
        self._next_check = now + min((s.min_interval_s for s in self._sources), default=math.inf)
        for source in self._sources:
            if source.busy or source.lifetime_s == math.inf:
                continue
            if source.attempted_at is not None and now - source.attempted_at < source.min_interval_s:
                continue
            if unknown_kid or source.loaded_at is None or now - source.loaded_at >= source.lifetime_s:
                if source.remote:
                    self._load_in_background(source)
                else:
                    self._load(source)

    def _load_in_background(self, source: _Source) -> None:
        source.busy = True
        thread = threading.Thread(target=self._load, args=(source,), name="jwks-fetch", daemon=True)
        self._threads.add(thread)
        thread.start()

    def _load(self, source: _Source) -> None:
        source.busy = True
        source.attempted_at = self._clock()
        try:
            raw = source.load()
            if source.loaded_at is None or raw != source.raw:
                keys, skipped = parse_jwks(raw)
                if skipped:
                    _log.warning("tokens.jwks_keys_skipped", source=source.name, skipped=skipped)
                if not keys:
                    raise ValueError(
                        "no usable key (Ed25519 or P-256, with a kid): " + ("; ".join(skipped) or "none")
                    )
                source.raw, source.keys = raw, keys
            source.loaded_at = self._clock()
            source.error = ""
        except (OSError, ValueError, jwt.PyJWTError) as error:
            # A source that fails keeps its last good keys: an outage or a bad publish signs nobody out.
            source.error = str(error) or type(error).__name__
            _log.warning("tokens.jwks_load_failed", source=source.name, error=source.error)
        finally:
            source.busy = False
            self._merge()
            self._threads.discard(threading.current_thread())

    def _merge(self) -> None:
        with self._lock:
            merged: dict[str, TrustedKey] = {}
            for source in self._sources:
                for kid, key in source.keys.items():
                    if kid in merged and merged[kid].thumbprint != key.thumbprint:
                        _log.warning("tokens.jwks_kid_conflict", kid=kid, ignored=source.name)
                    merged.setdefault(kid, key)
            same = merged.keys() == self._keys.keys() and all(
                (key.algorithm, key.thumbprint) == (self._keys[kid].algorithm, self._keys[kid].thumbprint)
                for kid, key in merged.items()
            )
            if not same:
                self._keys = merged
                self.version += 1


# -- verifying ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TokenPolicy:
    """What a token's claims must say."""

    issuers: tuple[str, ...] = (DEV_ISSUER,)
    audience: str = DEFAULT_AUDIENCE
    max_lifetime_s: int = DEFAULT_MAX_LIFETIME_S
    leeway_s: int = LEEWAY_S

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, production: bool) -> TokenPolicy:
        issuers = tuple(part.strip() for part in env.get(ISSUERS_VARIABLE, "").split(",") if part.strip())
        if not issuers:
            if production:
                raise ConfigError(f"{ISSUERS_VARIABLE} must be set in production (the trusted token issuers)")
            issuers = (DEV_ISSUER,)
        audience = env.get(AUDIENCE_VARIABLE, "").strip() or DEFAULT_AUDIENCE
        return cls(issuers, audience, env_int(env, MAX_LIFETIME_VARIABLE, DEFAULT_MAX_LIFETIME_S, minimum=1))


@dataclass(slots=True)
class _Verified:
    claims: Claims
    issued_at: int
    not_before: int | None
    version: int
    at: float


def _reason(error: jwt.PyJWTError) -> str:
    if isinstance(error, jwt.InvalidSignatureError):
        return "token signature is invalid"
    if isinstance(error, jwt.MissingRequiredClaimError):
        return f"token has no {_CLAIM_NAMES.get(error.claim, 'claim')} ({error.claim!r} claim)"
    if isinstance(error, jwt.exceptions.InvalidSubjectError):
        return "token subject is not a valid player id"
    if isinstance(error, jwt.InvalidAudienceError):
        return f"token audience is not this gateway's ({error})"
    if isinstance(error, jwt.InvalidIssuerError):
        return f"token issuer is not trusted ({error})"
    if isinstance(error, jwt.DecodeError):
        return f"token is malformed ({error})"
    return f"token is invalid ({error})"


def _seconds(payload: Mapping[str, Any], name: str) -> int:
    """A NumericDate claim as whole seconds: a finite JSON number, never a string, a boolean or infinity."""
    value = payload.get(name)
    label = f"token {_NUMBER_CLAIMS[name]} ({name!r})"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenError(f"{label} is not a number of seconds")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TokenError(f"{label} is not a finite number")
        return math.floor(value)
    return value


class TokenVerifier:
    """Checks tokens against a :class:`KeyRing` and a :class:`TokenPolicy`; remembers recent verified tokens
    (by their exact text, until the key set changes or :data:`VERIFIED_CACHE_S` passes), so a player's
    next call with the same token costs a dictionary lookup and the time checks."""

    def __init__(
        self,
        keys: KeyRing,
        policy: TokenPolicy | None = None,
        *,
        cache_size: int = VERIFIED_CACHE_SIZE,
        cache_s: float = VERIFIED_CACHE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keys = keys
        self.policy = policy if policy is not None else TokenPolicy()
        self._cache_size = cache_size
        self._cache_s = cache_s
        self._clock = clock
        self._verified: collections.OrderedDict[str, _Verified] = collections.OrderedDict()

    async def start(self) -> None:
        """Fetch the remote keys once, off the event loop (a failure is logged; fetches are retried)."""
        await asyncio.to_thread(self.keys.refresh, remote_only=True)

    def verify(self, token: str, now_s: int) -> Claims:
        """The claims of ``token`` at ``now_s`` (Unix seconds), or a :class:`TokenError` saying why not."""
        if len(token) > MAX_TOKEN_CHARS:
            raise TokenError("token is too long")
        self.keys.tick()
        seen = self._verified.get(token)
        if seen is not None and seen.version == self.keys.version and self._clock() - seen.at < self._cache_s:
            self._check_times(seen.claims.expires_at, seen.issued_at, seen.not_before, now_s)
            self._verified.move_to_end(token)
            return seen.claims
        try:
            verified = self._verify(token, now_s)
        except TokenError:
            raise
        except Exception:  # a bug here must refuse the token, never fail the call with INTERNAL
            _log.exception("tokens.verify_failed")
            raise TokenError("token could not be checked") from None
        self._verified[token] = verified
        self._verified.move_to_end(token)
        while len(self._verified) > self._cache_size:
            self._verified.popitem(last=False)
        return verified.claims

    def _verify(self, token: str, now_s: int) -> _Verified:
        version = self.keys.version
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as error:
            raise TokenError(f"token is malformed ({error})") from None
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            shown = repr(algorithm)[:24]
            raise TokenError(f"token algorithm {shown} is not accepted (only {' or '.join(ALGORITHMS)})")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise TokenError("token names no signing key (the 'kid' header)")
        key = self.keys.find(kid)
        if key is None:
            raise TokenError(self.keys.unknown(kid))
        if key.algorithm != algorithm:
            raise TokenError(f"token algorithm {algorithm} does not match its key's ({key.algorithm})")
        try:
            payload = jwt.decode(
                token,
                key.jwk,
                algorithms=[key.algorithm],
                audience=self.policy.audience,
                issuer=self.policy.issuers,
                options=_DECODE_OPTIONS,
            )
        except jwt.PyJWTError as error:
            raise TokenError(_reason(error)) from None
        subject = payload["sub"]
        if not PLAYER_ID.fullmatch(subject):
            raise TokenError("token subject is not a valid player id")
        expires, issued = _seconds(payload, "exp"), _seconds(payload, "iat")
        not_before = _seconds(payload, "nbf") if "nbf" in payload else None
        self._check_times(expires, issued, not_before, now_s)
        return _Verified(Claims(subject, expires, payload["iss"]), issued, not_before, version, self._clock())

    def _check_times(self, expires: int, issued: int, not_before: int | None, now_s: int) -> None:
        leeway, longest = self.policy.leeway_s, self.policy.max_lifetime_s
        if expires <= now_s - leeway:
            ago = now_s - expires
            raise TokenExpiredError(
                f"token expired {ago} s ago" if ago < 10**10 else "token expired long ago"
            )
        if issued > now_s + leeway:
            raise TokenError("token was issued in the future ('iat'; check the issuer's clock)")
        if not_before is not None and not_before > now_s + leeway:
            raise TokenError("token is not valid yet ('nbf')")
        if expires <= issued:
            raise TokenError("token expires before it was issued")
        if expires - issued > longest:
            raise TokenError(f"token lives longer than the maximum of {longest} s ('exp' - 'iat')")
        if expires > now_s + longest:
            raise TokenError(f"token expires more than {longest} s from now")


# -- minting -----------------------------------------------------------------------------------------------


def mint_token(key: SigningKey, player_id: str, ttl_s: int, now_s: int) -> str:
    """A token for ``player_id`` valid for ``ttl_s`` seconds from ``now_s`` (Unix seconds), signed with
    ``key`` (its ``kid`` in the header; its issuer and audience in ``iss`` and ``aud``)."""
    if not PLAYER_ID.fullmatch(player_id):
        raise ValueError("player_id must be 1-128 characters of A-Z a-z 0-9 . _ : @ -")
    if ttl_s <= 0:
        raise ValueError("ttl_s must be positive")
    if ttl_s > key.max_lifetime_s:
        raise ValueError(f"ttl_s must be at most {key.max_lifetime_s} s ({MAX_LIFETIME_VARIABLE})")
    payload = {"iss": key.issuer, "aud": key.audience, "sub": player_id, "iat": now_s, "exp": now_s + ttl_s}
    return jwt.encode(
        payload, key.private_key, algorithm=key.algorithm, headers={"kid": key.kid, "typ": "JWT"}
    )


# -- configuration -----------------------------------------------------------------------------------------


def _production(env: Mapping[str, str], production: bool | None) -> bool:
    if production is not None:
        return production
    return env.get("SKILLCLASSICS_ENV", "").strip().lower() == "production"


def _read_private_key(path: Path) -> PrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, TypeError) as error:
        raise ConfigError(f"{path} is not an unencrypted PEM private key: {error}") from None
    if isinstance(key, ed25519.Ed25519PrivateKey) or (
        isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1)
    ):
        return key
    raise ConfigError(f"{path} must hold an Ed25519 or P-256 private key")


def development_private_key(path: Path, *, create: bool = True) -> PrivateKey:
    """The development signing key in ``path``; when absent (and ``create``), a new Ed25519 key is written
    there, mode 0600. Several processes starting at once agree on one key: each writes its own to a
    temporary file and links it into place (which fails if the file exists), and a loser reads the
    winner's. ``FileNotFoundError`` when absent and not ``create``."""
    if path.exists() or not create:
        return _read_private_key(path)
    key = ed25519.Ed25519PrivateKey.generate()
    if not create_private(path, SigningKey.of(key).pem()):
        return _read_private_key(path)  # another process won
    return key


def write_development_key(data_dir: Path, key: SigningKey) -> None:
    """Make ``key`` the development signing key of a stack whose ``DATA_DIR`` is ``data_dir`` (before it
    starts: benchmarks and tests that mint tokens with a key they hold). ``FileExistsError`` if there
    is one already."""
    path = data_dir / DEV_KEY_FILE
    if not create_private(path, key.pem()):
        raise FileExistsError(f"{path} exists")


def token_key(
    env: Mapping[str, str],
    data_dir: Path | None = None,
    production: bool | None = None,
    *,
    create: bool = True,
) -> SigningKey:
    """The development signing key (``DATA_DIR/gateway-token-signing.pem``, generated when absent unless
    ``create`` is false), as the development gateway trusts it: issuer :data:`DEV_ISSUER`, audience
    ``GATEWAY_TOKEN_AUDIENCE``. Production has no such key (its tokens come from the identity service):
    a :class:`ConfigError` there.

    ``data_dir`` and ``production`` default to what ``DATA_DIR`` and ``SKILLCLASSICS_ENV`` say.
    """
    if _production(env, production):
        raise ConfigError(
            "development tokens are not signed in production: the identity service issues tokens "
            f"({JWKS_FILE_VARIABLE} / {JWKS_URL_VARIABLE} publish its keys)"
        )
    if data_dir is None:
        data_dir = Path(env.get("DATA_DIR") or "data")
    policy = TokenPolicy.from_env(env, production=False)
    return SigningKey.of(
        development_private_key(data_dir / DEV_KEY_FILE, create=create),
        issuer=DEV_ISSUER,
        audience=policy.audience,
        max_lifetime_s=policy.max_lifetime_s,
    )


def token_verifier(
    env: Mapping[str, str], data_dir: Path | None = None, production: bool | None = None
) -> TokenVerifier:
    """What the gateway checks tokens with, as the environment configures it (see the module docstring).
    A missing or unusable ``GATEWAY_JWKS_FILE``, a bad ``GATEWAY_JWKS_URL``, or no keys configured in
    production is a :class:`ConfigError`."""
    production = _production(env, production)
    if data_dir is None:
        data_dir = Path(env.get("DATA_DIR") or "data")
    policy = TokenPolicy.from_env(env, production=production)
    keys = KeyRing()
    file, url = env.get(JWKS_FILE_VARIABLE, "").strip(), env.get(JWKS_URL_VARIABLE, "").strip()
    if file:
        keys.add_file(Path(file))
    if url:
        keys.add_url(url)
    if not file and not url:
        if production:
            raise ConfigError(
                f"{JWKS_FILE_VARIABLE} or {JWKS_URL_VARIABLE} must be set in production "
                "(the token issuers' public keys, a JWKS)"
            )
        keys.add_source(
            f"the development key {data_dir / DEV_KEY_FILE}", token_key(env, data_dir, False).jwks
        )
    return TokenVerifier(keys, policy)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """``python -m services.gateway.tokens mint PLAYER [--ttl SECONDS]`` prints a development token;
    ``... jwks`` prints the development key's public JWKS."""
    parser = argparse.ArgumentParser(prog="python -m services.gateway.tokens", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    mint = commands.add_parser("mint", help="print a development token for a player")
    mint.add_argument("player", help="the player id (the token's subject)")
    mint.add_argument("--ttl", type=int, default=3600, help="seconds the token lives (default 3600)")
    commands.add_parser("jwks", help="print the development key's public JWKS")
    args = parser.parse_args(argv)
    environ = os.environ if env is None else env
    try:
        key = token_key(environ)
        output = json.dumps(key.jwks(), indent=2) if args.command == "jwks" else None
        if output is None:
            output = mint_token(key, args.player, args.ttl, int(time.time()))
    except ValueError as error:  # ConfigError is a ValueError too
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
