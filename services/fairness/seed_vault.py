"""Encryption of server seeds at rest, so that a database dump reveals no future draw.

Seeds are sealed with AES-256-GCM under a key from the environment (``FAIRNESS_SEED_KEY``: 32 bytes in
base64), with the match id as associated data so a sealed seed cannot be moved to another match. Keys
rotate: seal with the new key, and list the old ones in ``FAIRNESS_OLD_SEED_KEYS`` (comma-separated)
until every match sealed with them is finished. In development, when no key is set, a key is generated
once into ``DATA_DIR/fairness-seed.key`` (mode 0600); in production a missing key stops the service.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from libs.runtime.config import ConfigError
from libs.runtime.devkeys import decode_key, development_key

KEY_BYTES = 32
NONCE_BYTES = 12
DEV_KEY_FILE = "fairness-seed.key"


class SeedVaultError(Exception):
    """A sealed seed cannot be opened: its key is not configured, or the ciphertext was altered."""


def key_id(key: bytes) -> str:
    """A short public name for a key (not reversible), stored beside each sealed seed."""
    return hashlib.sha256(b"skillclassics/seed-key-id/" + key).hexdigest()[:16]


class SeedVault:
    """Seals and opens server seeds; the first key seals, every key opens."""

    def __init__(self, key: bytes, old_keys: tuple[bytes, ...] = ()) -> None:
        for candidate in (key, *old_keys):
            if len(candidate) != KEY_BYTES:
                raise ConfigError(f"a seed key must be {KEY_BYTES} bytes, got {len(candidate)}")
        self.key_id = key_id(key)
        self._primary = AESGCM(key)
        self._keys = {key_id(k): AESGCM(k) for k in (key, *old_keys)}

    def seal(self, match_id: str, seed: bytes) -> tuple[bytes, bytes, str]:
        """Encrypt ``seed`` for ``match_id``: returns ``(nonce, ciphertext, key id)``."""
        nonce = os.urandom(NONCE_BYTES)
        return nonce, self._primary.encrypt(nonce, seed, match_id.encode()), self.key_id

    def open(self, match_id: str, nonce: bytes, ciphertext: bytes, sealed_with: str) -> bytes:
        """Decrypt a seed sealed by :meth:`seal` for the same ``match_id``."""
        aead = self._keys.get(sealed_with)
        if aead is None:
            raise SeedVaultError(
                f"seed of match {match_id} was sealed with key {sealed_with}, not configured"
            )
        try:
            return aead.decrypt(nonce, ciphertext, match_id.encode())
        except InvalidTag:
            raise SeedVaultError(f"sealed seed of match {match_id} failed authentication") from None

    @classmethod
    def from_env(cls, env: Mapping[str, str], data_dir: Path, *, production: bool) -> SeedVault:
        """The vault configured by the environment (see the module docstring)."""
        old = tuple(
            _decode_key("FAIRNESS_OLD_SEED_KEYS", part)
            for part in env.get("FAIRNESS_OLD_SEED_KEYS", "").split(",")
            if part.strip()
        )
        raw = env.get("FAIRNESS_SEED_KEY", "").strip()
        if raw:
            return cls(_decode_key("FAIRNESS_SEED_KEY", raw), old)
        if production:
            raise ConfigError("FAIRNESS_SEED_KEY must be set in production (32 bytes, base64)")
        return cls(_development_key(data_dir / DEV_KEY_FILE), old)


def _decode_key(name: str, text: str) -> bytes:
    return decode_key(name, text, length=KEY_BYTES)


def _development_key(path: Path) -> bytes:
    return development_key(path, KEY_BYTES)
