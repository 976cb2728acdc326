"""Errors a service raises to refuse a request, each carrying its gRPC status code and a readable reason.

The runtime's interceptor is the one place that turns them into gRPC statuses; any other exception is
logged and returned as INTERNAL without leaking state.
"""

from __future__ import annotations

from typing import ClassVar

import grpc

MAX_REASON_CHARS = 500
"""The longest reason a refusal carries: a reason quotes the caller's input, which is bounded here, in
one place, so an echoed 20,000-character move cannot come back whole (and overflow a gateway's
metadata on the way)."""
MAX_SHOWN_CHARS = 64
"""How much of one echoed value :func:`shown` keeps."""


def truncated(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """``text``, cut to ``limit`` characters with a note of how much was left out."""
    if len(text) <= limit:
        return text
    kept = max(limit - 24, 0)
    return f"{text[:kept]}... ({len(text) - kept} more)"


def shown(value: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """A caller's value as a reason quotes it: ``repr``, cut to ``limit`` characters."""
    return truncated(repr(value), limit)


class ServiceError(Exception):
    """A request the service refuses, with a reason a person can read (at most
    :data:`MAX_REASON_CHARS` characters: longer reasons are cut)."""

    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.UNKNOWN

    def __init__(self, reason: str) -> None:
        reason = truncated(reason)
        super().__init__(reason)
        self.reason = reason


class InvalidArgument(ServiceError):
    """The request is malformed: a field is missing, out of range or badly formed."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(ServiceError):
    """The request names something that does not exist."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(ServiceError):
    """The request would create something that exists already."""

    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(ServiceError):
    """The request is well formed but not allowed in the current state (an illegal or late action)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class PermissionDenied(ServiceError):
    """The caller may not do this (acting for another seat)."""

    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(ServiceError):
    """The caller did not prove who they are."""

    code = grpc.StatusCode.UNAUTHENTICATED


class ResourceExhausted(ServiceError):
    """A limit was reached (rate, size, capacity); the caller may retry later."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(ServiceError):
    """A dependency is down or the service is draining; the caller may retry."""

    code = grpc.StatusCode.UNAVAILABLE


# -- status codes as numbers (a refusal carried inside a stream) --------------------------------------------

_CODES = {int(code.value[0]): code for code in grpc.StatusCode}
_ERRORS: dict[grpc.StatusCode, type[ServiceError]] = {
    kind.code: kind
    for kind in (
        InvalidArgument,
        NotFound,
        AlreadyExists,
        FailedPrecondition,
        PermissionDenied,
        Unauthenticated,
        ResourceExhausted,
        Unavailable,
    )
}
for _code in grpc.StatusCode:
    # Another service may refuse with any code (ABORTED, INTERNAL, ...): each gets its own class, so the
    # code survives wherever the error goes (an answer inside a stream, or the interceptor).
    if _code not in _ERRORS and _code is not grpc.StatusCode.OK:
        _ERRORS[_code] = type(
            f"Refused{_code.name.title().replace('_', '')}",
            (ServiceError,),
            {"code": _code, "__doc__": f"A call a service refused with {_code.name}."},
        )


def status_code(number: int) -> grpc.StatusCode:
    """The gRPC status code with this number (``UNKNOWN`` for a number gRPC does not define)."""
    return _CODES.get(number, grpc.StatusCode.UNKNOWN)


def code_number(code: grpc.StatusCode) -> int:
    """The number of a gRPC status code, as a refusal inside a stream carries it."""
    return int(code.value[0])


def internal_error_reason(request_id: str) -> str:
    """The reason an ``INTERNAL`` answer gives: nothing of the failure itself (that is in the log, under
    the request id), only the request id to quote, when there is one."""
    return f"internal error (request id {request_id})" if request_id else "internal error"


def error_for(code: grpc.StatusCode, reason: str) -> ServiceError:
    """The :class:`ServiceError` that refuses with ``code`` (``UNKNOWN`` for ``OK``, which refuses
    nothing: a refusal saying OK is malformed and must not pass as a success)."""
    if code is grpc.StatusCode.OK:
        code = grpc.StatusCode.UNKNOWN
    return _ERRORS[code](reason or code.name)
