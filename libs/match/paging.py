"""``ListMatches`` pages (AIP-158): the page size and the opaque page token.

Pages are keyset pages over match id order: a token holds the last match id of the page it follows, and
the next page is the matches after it. So a page never depends on how many matches came before it, and
matches created while a caller pages through never make an earlier match appear twice or go missing.

A token also holds what it is valid for: the service's family and shard and the request's statuses
filter. A token of another filter, of another shard or family, or one that is not a token at all is
``INVALID_ARGUMENT`` with a reason. Tokens are base64url text with a checksum, so a mangled one is
refused rather than read as another position; they are not secret and not signed: a token only names a
position in a listing that every caller may read anyway.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass

from libs.runtime.errors import ErrorReason, InvalidArgument, invalid_field

DEFAULT_PAGE_SIZE = 100
"""The page size of a request that gives none (``page_size`` 0)."""
MAX_PAGE_SIZE = 1_000
"""The largest page: a larger ``page_size`` is served as this."""
MAX_TOKEN_LENGTH = 1_024
"""Longer than any token this service issues (a match id is at most 128 characters)."""
_VERSION = 1
_CHECK_BYTES = 8
_CHECK_CONTEXT = b"skillclassics.rules.v1.ListMatches page token\x00"


def page_size(requested: int) -> int:
    """The number of matches a page holds for a request's ``page_size``."""
    if requested < 0:  # (the contract's rules refuse it before a call gets here)
        raise invalid_field("page_size", f"must not be negative, got {requested}")
    if requested == 0:
        return DEFAULT_PAGE_SIZE
    return min(requested, MAX_PAGE_SIZE)


@dataclass(frozen=True, slots=True)
class PageScope:
    """What a token is valid for: one shard of one family, one statuses filter."""

    family: str
    shard: str
    statuses: tuple[str, ...]
    """The filter's status names, sorted (empty: every status)."""

    @classmethod
    def of(cls, family: str, shard: int | str, statuses: Sequence[str]) -> PageScope:
        return cls(family, str(shard), tuple(sorted(set(statuses))))


def encode_token(scope: PageScope, after: str) -> str:
    """The token of the page after match ``after`` in ``scope``."""
    body = json.dumps(
        {"v": _VERSION, "f": scope.family, "s": scope.shard, "st": list(scope.statuses), "a": after},
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    return base64.urlsafe_b64encode(body + _check(body)).rstrip(b"=").decode("ascii")


def decode_token(token: str, scope: PageScope) -> str:
    """The match id a request's ``page_token`` continues after; ``INVALID_ARGUMENT`` unless it is a token
    this service issued for ``scope``."""
    issued = _read(token)
    if issued is None:
        raise InvalidArgument(
            "page_token is not a page token of ListMatches: pass back a next_page_token as it came, "
            "or leave page_token empty for the first page",
            reason=ErrorReason.ERROR_REASON_INVALID_PAGE_TOKEN,
        )
    if (issued.family, issued.shard) != (scope.family, scope.shard):
        raise InvalidArgument(
            f"page_token was issued by {issued.family} shard {issued.shard}, not by this service "
            f"({scope.family} shard {scope.shard})",
            reason=ErrorReason.ERROR_REASON_INVALID_PAGE_TOKEN,
        )
    if issued.statuses != scope.statuses:
        raise InvalidArgument(
            f"page_token was issued for {_filter(issued.statuses)}, but this request has "
            f"{_filter(scope.statuses)}: send the statuses of the request that returned it, or leave "
            "page_token empty to start over",
            reason=ErrorReason.ERROR_REASON_INVALID_PAGE_TOKEN,
        )
    return issued.after


@dataclass(frozen=True, slots=True)
class _Token:
    family: str
    shard: str
    statuses: tuple[str, ...]
    after: str


def _read(token: str) -> _Token | None:
    """What a well-formed token of this version says, or ``None``."""
    if not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        return None
    body, check = raw[:-_CHECK_BYTES], raw[-_CHECK_BYTES:]
    if len(raw) <= _CHECK_BYTES or not hmac.compare_digest(check, _check(body)):
        return None
    try:
        fields = json.loads(body)
    except ValueError:
        return None
    if not isinstance(fields, dict) or fields.get("v") != _VERSION:
        return None
    family, shard, after, statuses = fields.get("f"), fields.get("s"), fields.get("a"), fields.get("st")
    if not (isinstance(family, str) and isinstance(shard, str) and isinstance(after, str) and after):
        return None
    if not isinstance(statuses, list) or not all(isinstance(status, str) for status in statuses):
        return None
    return _Token(family, shard, tuple(statuses), after)


def _check(body: bytes) -> bytes:
    return hashlib.sha256(_CHECK_CONTEXT + body).digest()[:_CHECK_BYTES]


def _filter(statuses: Sequence[str]) -> str:
    if not statuses:
        return "no statuses filter"
    return "statuses " + ", ".join(f"MATCH_STATUS_{status.upper()}" for status in statuses)


__all__: Sequence[str] = [
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "PageScope",
    "decode_token",
    "encode_token",
    "page_size",
]
