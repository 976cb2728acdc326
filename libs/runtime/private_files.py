"""Files only their owner may read (keys, certificates, tokens, players' records), written whole or not
at all: a reader never sees half a file, and a crash leaves the old file or none.

:func:`write_private` replaces a file; :func:`create_private` makes one only if it does not exist yet, so
that processes starting at once agree on one development key (the first to link its file into place wins;
the others read the winner's).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

PRIVATE = 0o600
"""The mode of a file only its owner may read."""


def _staged(path: Path, data: bytes | str, mode: int) -> Path:
    """``data`` in a new temporary file beside ``path`` (its folder made, mode 0700, when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(name, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
    return Path(name)


def write_private(path: Path, data: bytes | str, *, mode: int = PRIVATE) -> None:
    """Write ``data`` to ``path`` (mode ``mode``, 0600 unless said), replacing it atomically."""
    staged = _staged(path, data, mode)
    try:
        os.replace(staged, path)
    except BaseException:
        with contextlib.suppress(OSError):
            staged.unlink()
        raise


def create_private(path: Path, data: bytes | str, *, mode: int = PRIVATE) -> bool:
    """Make ``path`` hold ``data`` (mode ``mode``) if there is no such file yet; ``False`` when there is
    one (it is left as it is)."""
    staged = _staged(path, data, mode)
    try:
        os.link(staged, path)  # atomic, and fails if the name is taken
    except FileExistsError:
        return False
    finally:
        staged.unlink()
    return True
