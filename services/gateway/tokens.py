"""Signed bearer tokens: who a caller is, for as long as the token lives.

A token is ``v1.<payload>.<mac>``: ``payload`` is the base64url (unpadded) JSON
``{"sub": player_id, "exp": unix seconds}`` and ``mac`` the base64url HMAC-SHA256, under the gateway's
key, of the ASCII text ``v1.<payload>``. Clients send it as ``authorization: Bearer <token>``.

The key comes from ``GATEWAY_TOKEN_KEY`` (base64, at least 32 bytes). In development, when it is unset,
a key is generated once into ``DATA_DIR/gateway-token.key`` (mode 0600); in production it must be set.
Rotating it: set the new key as ``GATEWAY_TOKEN_KEY`` and the old one in ``GATEWAY_OLD_TOKEN_KEYS``
(comma-separated) on every replica; drop the old key once the longest token it signed has expired.

Development tokens: ``python -m services.gateway.tokens mint PLAYER [--ttl 3600]`` prints one, signed
with the same key the gateway uses (same environment, same ``DATA_DIR``).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import hmac
import json
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from libs.runtime.devkeys import decode_key, key_from_env

VERSION = "v1"
KEY_VARIABLE = "GATEWAY_TOKEN_KEY"
OLD_KEYS_VARIABLE = "GATEWAY_OLD_TOKEN_KEYS"
MIN_KEY_BYTES = 32
DEV_KEY_FILE = "gateway-token.key"
MAX_TOKEN_CHARS = 2048
PLAYER_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
"""What a player id may be (as matchmaking accepts it)."""


class TokenError(Exception):
    """The token is malformed, forged or expired; the message says which."""


@dataclass(frozen=True, slots=True)
class Claims:
    """What a valid token says."""

    player_id: str
    expires_at: int
    """Unix seconds."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if not re.fullmatch(r"[A-Za-z0-9_-]*", text):
        raise TokenError("token is malformed (not base64url)")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise TokenError("token is malformed (not base64url)") from None


def _mac(key: bytes, signed: str) -> bytes:
    return hmac.new(key, signed.encode("ascii"), hashlib.sha256).digest()


def mint_token(key: bytes, player_id: str, ttl_s: int, now_s: int) -> str:
    """A token for ``player_id`` valid for ``ttl_s`` seconds from ``now_s`` (Unix seconds)."""
    if not PLAYER_ID.fullmatch(player_id):
        raise ValueError("player_id must be 1-128 characters of A-Z a-z 0-9 . _ : @ -")
    if ttl_s <= 0:
        raise ValueError("ttl_s must be positive")
    payload = json.dumps({"sub": player_id, "exp": now_s + ttl_s}, separators=(",", ":"), sort_keys=True)
    signed = f"{VERSION}.{_b64(payload.encode())}"
    return f"{signed}.{_b64(_mac(key, signed))}"


def verify_token(key: bytes | Sequence[bytes], token: str, now_s: int) -> Claims:
    """The claims of ``token`` if it is well formed, signed with ``key`` (or with any of several keys:
    the current one and those being rotated out) and not expired at ``now_s``."""
    keys = (key,) if isinstance(key, bytes) else tuple(key)
    if len(token) > MAX_TOKEN_CHARS:
        raise TokenError("token is too long")
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenError("token is malformed (expected v1.<payload>.<signature>)")
    version, payload_text, mac_text = parts
    if version != VERSION:
        raise TokenError(f"token version {version[:8]!r} is not supported (expected {VERSION})")
    mac = _unb64(mac_text)
    signed = f"{version}.{payload_text}"
    if not any(hmac.compare_digest(mac, _mac(one, signed)) for one in keys):
        raise TokenError("token signature is invalid")
    try:
        payload = json.loads(_unb64(payload_text))
    except (ValueError, UnicodeDecodeError):
        raise TokenError("token payload is not JSON") from None
    if not isinstance(payload, dict):
        raise TokenError("token payload is not an object")
    subject, expires = payload.get("sub"), payload.get("exp")
    if not isinstance(subject, str) or not PLAYER_ID.fullmatch(subject):
        raise TokenError("token subject is not a valid player id")
    if not isinstance(expires, int) or isinstance(expires, bool):
        raise TokenError("token expiry is not an integer")
    if expires <= now_s:
        raise TokenError(f"token expired {now_s - expires} s ago")
    return Claims(subject, expires)


def old_token_keys(env: Mapping[str, str]) -> tuple[bytes, ...]:
    """Keys being rotated out (``GATEWAY_OLD_TOKEN_KEYS``, comma-separated base64): tokens they signed
    are still accepted until they expire; new tokens are signed with ``GATEWAY_TOKEN_KEY`` only."""
    return tuple(
        decode_key(OLD_KEYS_VARIABLE, part, min_length=MIN_KEY_BYTES)
        for part in env.get(OLD_KEYS_VARIABLE, "").split(",")
        if part.strip()
    )


def token_key(env: Mapping[str, str], data_dir: Path | None = None, production: bool | None = None) -> bytes:
    """The signing key the environment configures (see the module docstring).

    ``data_dir`` and ``production`` default to what ``DATA_DIR`` and ``SKILLCLASSICS_ENV`` say.
    """
    if data_dir is None:
        data_dir = Path(env.get("DATA_DIR", "data"))
    if production is None:
        production = env.get("SKILLCLASSICS_ENV", "").strip().lower() == "production"
    return key_from_env(
        env,
        KEY_VARIABLE,
        data_dir / DEV_KEY_FILE,
        production=production,
        min_length=MIN_KEY_BYTES,
        dev_length=MIN_KEY_BYTES,
    )


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """``python -m services.gateway.tokens mint PLAYER [--ttl SECONDS]``: print a token."""
    parser = argparse.ArgumentParser(prog="python -m services.gateway.tokens", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    mint = commands.add_parser("mint", help="print a token for a player")
    mint.add_argument("player", help="the player id (the token's subject)")
    mint.add_argument("--ttl", type=int, default=3600, help="seconds the token lives (default 3600)")
    args = parser.parse_args(argv)
    try:
        token = mint_token(
            token_key(os.environ if env is None else env), args.player, args.ttl, int(time.time())
        )
    except ValueError as error:  # ConfigError is a ValueError too
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(token)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
