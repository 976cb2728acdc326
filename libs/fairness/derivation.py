"""Pure, deterministic derivation of provably-fair draws (specification: ``docs/fairness.md``).

Everything here is a pure function of its arguments: no clock, no I/O, no global randomness. The
server draws a secret 32-byte *server seed*, publishes ``commitment(server_seed)`` before the match,
mixes in the players' *client seeds* to get a per-match *stream key* and derives every random draw of
the match from that key, a stream name and an index. After the match the server seed is revealed and
anybody can recompute every draw with this module (or with an independent implementation of the
specification).

Integers are encoded big-endian: ``u32`` is 4 bytes, ``u64`` is 8 bytes, and ``lp(b)`` is
``u32(len(b)) || b``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

__all__ = [
    "BLOCK_BYTES",
    "DRAW_DOMAIN",
    "FAIRNESS_VERSION",
    "KEY_DOMAIN",
    "MAX_BOUND",
    "MAX_CLIENT_SEED_BYTES",
    "MAX_COUNT",
    "MAX_INDEX",
    "MAX_SEAT",
    "MAX_SHUFFLE_ITEMS",
    "SERVER_SEED_BYTES",
    "STREAM_KEY_BYTES",
    "ByteSource",
    "DrawKind",
    "DrawSpec",
    "DrawSpecError",
    "FairnessError",
    "InvalidNameError",
    "InvalidSeedError",
    "commitment",
    "draw_message_prefix",
    "draw_values",
    "stream_key",
    "stream_key_message",
    "validate_client_seed",
    "validate_index",
    "validate_match_id",
    "validate_seat",
    "validate_server_seed",
    "validate_stream_name",
]

FAIRNESS_VERSION: Final = 1
"""The version of this specification (``docs/fairness.md``): the ``v1`` of the domain strings below and
the ``/1`` of the proof format. The server announces it with the commitment before a match, and a player
records both; any change to the derivation or to the proof format comes with a new version."""
KEY_DOMAIN: Final = f"skillclassics/fairness/v{FAIRNESS_VERSION}/key".encode()
"""Domain-separation prefix of the stream-key HMAC message."""
DRAW_DOMAIN: Final = f"skillclassics/fairness/v{FAIRNESS_VERSION}/draw".encode()
"""Domain-separation prefix of the draw-block HMAC message."""

SERVER_SEED_BYTES: Final = 32
"""Exact length of a server seed."""
STREAM_KEY_BYTES: Final = 32
"""Length of a stream key (an HMAC-SHA256 output)."""
BLOCK_BYTES: Final = 32
"""Length of one block ``B_j`` of a draw's byte source (an HMAC-SHA256 output)."""
MAX_CLIENT_SEED_BYTES: Final = 64
"""Maximum length of a client seed (the minimum is 1)."""
MAX_SEAT: Final = 2**32 - 1
"""Largest seat number (seats are encoded as ``u32``)."""
MAX_INDEX: Final = 2**64 - 1
"""Largest draw index (indices are encoded as ``u64``)."""
MAX_COUNT: Final = 1024
"""Maximum number of values of a dice, integer or coin draw."""
MAX_SHUFFLE_ITEMS: Final = 1024
"""Maximum number of items a shuffle draw permutes."""
MAX_BOUND: Final = 2**32
"""Largest ``n`` accepted by ``uniform(n)`` and largest bound of an integer draw."""

_MAX_BLOCK_COUNTER: Final = 2**32 - 1
_MATCH_ID_RE: Final = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_STREAM_NAME_RE: Final = re.compile(r"[a-z0-9._-]{1,64}")


class FairnessError(ValueError):
    """Base class of every error raised by :mod:`libs.fairness`."""


class DrawSpecError(FairnessError):
    """A draw specification (kind, count, bound) is not valid."""


class InvalidNameError(FairnessError):
    """A match id or stream name does not follow the naming rules."""


class InvalidSeedError(FairnessError):
    """A server seed, client seed, seat, index or stream key is malformed."""


def _is_int(value: object) -> bool:
    """True for real integers (``bool`` is deliberately excluded)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _u32(value: int) -> bytes:
    return value.to_bytes(4, "big")


def _u64(value: int) -> bytes:
    return value.to_bytes(8, "big")


def _lp(data: bytes) -> bytes:
    return _u32(len(data)) + data


# --- validators ---


def validate_match_id(match_id: str) -> str:
    """Return ``match_id`` if it is 1-128 characters of ``[A-Za-z0-9._:-]``, else raise InvalidNameError."""
    if not isinstance(match_id, str) or _MATCH_ID_RE.fullmatch(match_id) is None:
        raise InvalidNameError(f"match id must be 1-128 characters of [A-Za-z0-9._:-], got {match_id!r}")
    return match_id


def validate_stream_name(stream: str) -> str:
    """Return ``stream`` if it is 1-64 characters of ``[a-z0-9._-]``, else raise InvalidNameError."""
    if not isinstance(stream, str) or _STREAM_NAME_RE.fullmatch(stream) is None:
        raise InvalidNameError(f"stream name must be 1-64 characters of [a-z0-9._-], got {stream!r}")
    return stream


def validate_server_seed(server_seed: bytes) -> bytes:
    """Return ``server_seed`` if it is exactly 32 bytes, else raise InvalidSeedError."""
    if not isinstance(server_seed, bytes):
        raise InvalidSeedError(f"server seed must be bytes, got {type(server_seed).__name__}")
    if len(server_seed) != SERVER_SEED_BYTES:
        raise InvalidSeedError(
            f"server seed must be exactly {SERVER_SEED_BYTES} bytes, got {len(server_seed)}"
        )
    return server_seed


def validate_client_seed(seed: bytes) -> bytes:
    """Return ``seed`` if it is 1-64 bytes, else raise InvalidSeedError."""
    if not isinstance(seed, bytes):
        raise InvalidSeedError(f"client seed must be bytes, got {type(seed).__name__}")
    if not 1 <= len(seed) <= MAX_CLIENT_SEED_BYTES:
        raise InvalidSeedError(
            f"client seed must be between 1 and {MAX_CLIENT_SEED_BYTES} bytes, got {len(seed)}"
        )
    return seed


def validate_seat(seat: int) -> int:
    """Return ``seat`` if it is an integer in ``0..2**32-1``, else raise InvalidSeedError."""
    if not _is_int(seat) or not 0 <= seat <= MAX_SEAT:
        raise InvalidSeedError(f"seat must be an integer between 0 and {MAX_SEAT}, got {seat!r}")
    return seat


def validate_index(index: int) -> int:
    """Return ``index`` if it is an integer in ``0..2**64-1``, else raise InvalidSeedError."""
    if not _is_int(index) or not 0 <= index <= MAX_INDEX:
        raise InvalidSeedError(f"draw index must be an integer between 0 and {MAX_INDEX}, got {index!r}")
    return index


# --- commitment and key ---


def commitment(server_seed: bytes) -> str:
    """The public commitment to ``server_seed``: the lower-case hex SHA-256 of its 32 bytes."""
    return hashlib.sha256(validate_server_seed(server_seed)).hexdigest()


def stream_key_message(match_id: str, client_seeds: Mapping[int, bytes]) -> bytes:
    """The HMAC message whose MAC under the server seed is the stream key (exposed for test vectors).

    ``KEY_DOMAIN || lp(utf8(match_id)) || u32(len(client_seeds)) || (u32(seat) || lp(seed))*`` with the
    client seeds in ascending seat order.
    """
    validate_match_id(match_id)
    parts = [KEY_DOMAIN, _lp(match_id.encode("utf-8")), _u32(len(client_seeds))]
    for seat in sorted(client_seeds):
        parts.append(_u32(validate_seat(seat)))
        parts.append(_lp(validate_client_seed(client_seeds[seat])))
    return b"".join(parts)


def stream_key(server_seed: bytes, match_id: str, client_seeds: Mapping[int, bytes]) -> bytes:
    """Derive the 32-byte stream key ``K`` of a match.

    ``client_seeds`` maps seat numbers (``0..2**32-1``) to client seeds (1-64 bytes); a mapping holds at
    most one seed per seat, and the seeds are always taken in ascending seat order, whatever the order
    of the mapping. It may be empty (then the server alone determines the draws: see the spec).
    """
    message = stream_key_message(match_id, client_seeds)
    return hmac.new(validate_server_seed(server_seed), message, hashlib.sha256).digest()


# --- byte source ---


def draw_message_prefix(stream: str, index: int) -> bytes:
    """``DRAW_DOMAIN || lp(utf8(stream)) || u64(index)``: block ``B_j`` is HMAC(K, prefix || u32(j))."""
    validate_stream_name(stream)
    return DRAW_DOMAIN + _lp(stream.encode("utf-8")) + _u64(validate_index(index))


class ByteSource:
    """The byte source of one draw: ``B_0 || B_1 || ...`` with ``B_j = HMAC(K, prefix || u32(j))``.

    Blocks are computed lazily, one HMAC per 32 bytes consumed; a fresh instance starts at ``B_0`` byte
    0. The HMAC state after the common prefix is computed once and copied for every block.
    """

    __slots__ = ("_base", "_buffer", "_consumed", "_next_block", "_position")

    def __init__(self, key: bytes, stream: str, index: int) -> None:
        """Create the byte source of draw ``(stream, index)`` under stream key ``key``."""
        if not isinstance(key, bytes) or len(key) != STREAM_KEY_BYTES:
            raise InvalidSeedError(f"stream key must be exactly {STREAM_KEY_BYTES} bytes")
        self._base = hmac.new(key, draw_message_prefix(stream, index), hashlib.sha256)
        self._buffer = b""
        self._position = 0
        self._next_block = 0
        self._consumed = 0

    @property
    def consumed(self) -> int:
        """How many bytes have been consumed so far."""
        return self._consumed

    @property
    def blocks(self) -> int:
        """How many blocks (HMAC computations) have been produced so far."""
        return self._next_block

    def _block(self) -> bytes:
        if self._next_block > _MAX_BLOCK_COUNTER:  # pragma: no cover - needs 2**32 blocks
            raise OverflowError("draw byte source exhausted (block counter overflow)")
        mac = self._base.copy()
        mac.update(_u32(self._next_block))
        self._next_block += 1
        return mac.digest()

    def read(self, size: int) -> bytes:
        """Consume and return the next ``size`` bytes."""
        if size < 0:
            raise ValueError(f"cannot read a negative number of bytes ({size})")
        start = self._position
        end = start + size
        if end <= len(self._buffer):
            self._position = end
            self._consumed += size
            return self._buffer[start:end]
        chunks = [self._buffer[start:]]
        missing = size - len(chunks[0])
        while missing > 0:
            block = self._block()
            if missing < BLOCK_BYTES:
                chunks.append(block[:missing])
                self._buffer, self._position = block, missing
                missing = 0
            else:
                chunks.append(block)
                self._buffer, self._position = block, BLOCK_BYTES
                missing -= BLOCK_BYTES
        self._consumed += size
        return b"".join(chunks)

    def uniform(self, n: int) -> int:
        """A uniformly distributed integer in ``0..n-1`` (``1 <= n <= 2**32``), by masked rejection.

        ``n == 1`` returns 0 and consumes nothing. Otherwise, with ``b = bit_length(n-1)`` and
        ``k = ceil(b/8)``: take the next ``k`` bytes big-endian, keep the low ``b`` bits, return the
        result if it is below ``n`` and otherwise try again with the next ``k`` bytes.
        """
        if not _is_int(n) or not 1 <= n <= MAX_BOUND:
            raise DrawSpecError(f"uniform bound must be between 1 and {MAX_BOUND}, got {n!r}")
        if n == 1:
            return 0
        bits = (n - 1).bit_length()
        size = (bits + 7) // 8
        mask = (1 << bits) - 1
        from_bytes = int.from_bytes
        while True:
            value = from_bytes(self.read(size), "big") & mask
            if value < n:
                return value


# --- draws ---


class DrawKind(StrEnum):
    """What a draw produces."""

    DICE = "dice"
    """``count`` six-sided dice, each ``uniform(6) + 1`` (bound must be 0)."""
    INTEGER = "integer"
    """``count`` integers, each ``uniform(bound)`` with ``1 <= bound <= 2**32``."""
    COIN = "coin"
    """``count`` coin flips, each ``uniform(2)``: 0 = heads, 1 = tails (bound must be 0)."""
    SHUFFLE = "shuffle"
    """One Fisher-Yates permutation of ``0..bound-1`` (``1 <= bound <= 1024``, count must be 1)."""


@dataclass(frozen=True, slots=True)
class DrawSpec:
    """What to draw: a kind, a count and a bound, validated on construction (DrawSpecError).

    ``kind`` may be given as its string value (``"dice"``); it is stored as a :class:`DrawKind`.
    """

    kind: DrawKind
    count: int
    bound: int

    def __post_init__(self) -> None:
        """Validate the combination of kind, count and bound."""
        kind = _coerce_kind(self.kind)
        object.__setattr__(self, "kind", kind)
        if not _is_int(self.count):
            raise DrawSpecError(f"count must be an integer, got {self.count!r}")
        if not _is_int(self.bound):
            raise DrawSpecError(f"bound must be an integer, got {self.bound!r}")
        if kind is DrawKind.SHUFFLE:
            if self.count != 1:
                raise DrawSpecError(f"count must be 1 for a shuffle, got {self.count}")
            if not 1 <= self.bound <= MAX_SHUFFLE_ITEMS:
                raise DrawSpecError(
                    f"bound (items to shuffle) must be between 1 and {MAX_SHUFFLE_ITEMS}, got {self.bound}"
                )
            return
        if not 1 <= self.count <= MAX_COUNT:
            raise DrawSpecError(f"count must be between 1 and {MAX_COUNT}, got {self.count}")
        if kind is DrawKind.INTEGER:
            if not 1 <= self.bound <= MAX_BOUND:
                raise DrawSpecError(f"bound must be between 1 and {MAX_BOUND}, got {self.bound}")
        elif self.bound != 0:
            raise DrawSpecError(f"bound must be 0 for {kind.value}, got {self.bound}")

    @classmethod
    def dice(cls, count: int = 1) -> DrawSpec:
        """``count`` six-sided dice."""
        return cls(DrawKind.DICE, count, 0)

    @classmethod
    def integer(cls, bound: int, count: int = 1) -> DrawSpec:
        """``count`` integers uniform in ``0..bound-1``."""
        return cls(DrawKind.INTEGER, count, bound)

    @classmethod
    def coin(cls, count: int = 1) -> DrawSpec:
        """``count`` coin flips (0 = heads, 1 = tails)."""
        return cls(DrawKind.COIN, count, 0)

    @classmethod
    def shuffle(cls, items: int) -> DrawSpec:
        """One permutation of ``0..items-1``."""
        return cls(DrawKind.SHUFFLE, 1, items)


def _coerce_kind(kind: object) -> DrawKind:
    if isinstance(kind, DrawKind):
        return kind
    if isinstance(kind, str):
        try:
            return DrawKind(kind)
        except ValueError:
            pass
    names = ", ".join(member.value for member in DrawKind)
    raise DrawSpecError(f"kind must be one of {names}, got {kind!r}")


def _shuffle(source: ByteSource, items: int) -> tuple[int, ...]:
    permutation = list(range(items))
    for i in range(items - 1, 0, -1):
        j = source.uniform(i + 1)
        permutation[i], permutation[j] = permutation[j], permutation[i]
    return tuple(permutation)


def draw_values(key: bytes, stream: str, index: int, spec: DrawSpec) -> tuple[int, ...]:
    """Derive the values of draw ``(stream, index)`` of kind ``spec`` under stream key ``key``.

    Every draw reads its own byte source from ``B_0`` byte 0; the values of one draw consume it in
    order (the first value first).
    """
    source = ByteSource(key, stream, index)
    uniform = source.uniform
    count = spec.count
    if spec.kind is DrawKind.DICE:
        return tuple(uniform(6) + 1 for _ in range(count))
    if spec.kind is DrawKind.INTEGER:
        bound = spec.bound
        return tuple(uniform(bound) for _ in range(count))
    if spec.kind is DrawKind.COIN:
        return tuple(uniform(2) for _ in range(count))
    return _shuffle(source, spec.bound)
