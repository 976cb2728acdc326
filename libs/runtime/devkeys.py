"""Secret keys from the environment, with a development fallback: a key generated once into a file.

A service asks for its key by variable name. When the variable is set it must be base64 of the right
length. When it is unset, production refuses to start (:class:`~libs.runtime.config.ConfigError`); in
development a random key is generated once into ``DATA_DIR/<file>`` (mode 0600) and read back on every
later start, so restarts keep their key.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from pathlib import Path

from libs.runtime.config import ConfigError
from libs.runtime.private_files import create_private


def decode_key(name: str, text: str, *, length: int | None = None, min_length: int = 1) -> bytes:
    """A base64 key; ``length`` asks for exactly that many bytes, ``min_length`` for at least that many."""
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{name} must be base64") from None
    if length is not None and len(key) != length:
        raise ConfigError(f"{name} must decode to {length} bytes, got {len(key)}")
    if len(key) < min_length:
        raise ConfigError(f"{name} must decode to at least {min_length} bytes, got {len(key)}")
    return key


def development_key(path: Path, length: int) -> bytes:
    """The key in ``path``; generated there (``length`` random bytes, base64, mode 0600) if absent."""
    if path.exists():
        return decode_key(str(path), path.read_text(), length=length)
    key = os.urandom(length)
    if not create_private(path, base64.b64encode(key).decode() + "\n"):  # another process made it first
        return decode_key(str(path), path.read_text(), length=length)
    return key


def key_from_env(
    env: Mapping[str, str],
    name: str,
    dev_path: Path,
    *,
    production: bool,
    length: int | None = None,
    min_length: int = 1,
    dev_length: int = 32,
) -> bytes:
    """The key in variable ``name``; unset: an error in production, else :func:`development_key`."""
    raw = env.get(name, "").strip()
    if raw:
        return decode_key(name, raw, length=length, min_length=min_length)
    if production:
        size = f"{length} bytes" if length is not None else f"at least {min_length} bytes"
        raise ConfigError(f"{name} must be set in production ({size}, base64)")
    return development_key(dev_path, length if length is not None else dev_length)
