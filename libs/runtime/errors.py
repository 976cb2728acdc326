"""Errors a service raises to refuse a request, each carrying its gRPC status code and a readable reason.

The runtime's interceptor is the one place that turns them into gRPC statuses; any other exception is
first offered to the translators registered with :func:`translate_with` (the persistence layer's turns
an unreachable database into :class:`Unavailable`), and otherwise logged and returned as INTERNAL
without leaking state.

A refusal the caller may retry can carry retry guidance (``retry_after_ms``): the interceptor sends it as
the ``retry-after-ms`` trailing metadata and as a ``google.rpc.RetryInfo`` detail of the status
(:func:`retry_trailers`), and the reason says it in words ("retry in N ms"), which is also what a
refusal inside a stream carries (docs/gateway.md, "Errors and retry guidance").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import ClassVar

import google.rpc.error_details_pb2 as error_details_pb2
import google.rpc.status_pb2 as status_pb2
import grpc
from google.protobuf import any_pb2, duration_pb2

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

    def __init__(self, reason: str, *, retry_after_ms: int | None = None) -> None:
        reason = truncated(reason)
        super().__init__(reason)
        self.reason = reason
        self.retry_after_ms = retry_after_ms
        """How long the caller should wait before trying again (``None``: no guidance), sent beside the
        status as :func:`retry_trailers`."""


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


RETRY_AFTER_METADATA = "retry-after-ms"
"""The trailing metadata key of a refusal's retry guidance: the wait in milliseconds, as decimal text."""
STATUS_DETAILS_METADATA = "grpc-status-details-bin"
"""Where gRPC carries a status's ``google.rpc.Status`` (with its details, such as ``RetryInfo``)."""
MAX_RETRY_AFTER_MS = 3_600_000
"""The longest wait guidance read from a peer is believed (an hour); longer is taken as this."""


def retry_trailers(
    code: grpc.StatusCode, reason: str, retry_after_ms: int
) -> tuple[tuple[str, str | bytes], ...]:
    """The trailing metadata that tells a caller to retry after ``retry_after_ms``: ``retry-after-ms``
    (easy to read from any client) and the status with a ``google.rpc.RetryInfo`` detail (the standard
    form, which gRPC's own libraries read: ``grpc_status.rpc_status.from_call``). The status's code and
    message must be those the call ends with, or readers reject it."""
    info = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(**_duration(retry_after_ms)))
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=code_number(code), message=reason, details=[detail])
    return (
        (RETRY_AFTER_METADATA, str(retry_after_ms)),
        (STATUS_DETAILS_METADATA, status.SerializeToString()),
    )


def _duration(milliseconds: int) -> dict[str, int]:
    return {"seconds": milliseconds // 1000, "nanos": (milliseconds % 1000) * 1_000_000}


def retry_after_ms(metadata: Iterable[tuple[str, str | bytes]] | None) -> int | None:
    """The retry guidance in a call's trailing ``metadata`` (``retry-after-ms``, else a ``RetryInfo``
    detail of its status); ``None`` when there is none or it is malformed. A gateway relaying a backend's
    refusal passes this on."""
    info: int | None = None
    for key, value in metadata or ():
        if key == RETRY_AFTER_METADATA:
            text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
            if text.isdigit():
                return min(int(text), MAX_RETRY_AFTER_MS)
        elif key == STATUS_DETAILS_METADATA and isinstance(value, bytes) and info is None:
            info = _retry_info_ms(value)
    return info


def _retry_info_ms(serialized: bytes) -> int | None:
    status = status_pb2.Status()
    try:
        status.ParseFromString(serialized)
    except Exception:  # a malformed status from a peer: no guidance
        return None
    for detail in status.details:
        retry = error_details_pb2.RetryInfo()
        if detail.Unpack(retry):
            delay = retry.retry_delay
            total = int(delay.seconds) * 1000 + int(delay.nanos) // 1_000_000
            return min(max(total, 0), MAX_RETRY_AFTER_MS)
    return None


# -- translators: exceptions of other layers that mean a refusal -----------------------------------------

Translator = Callable[[BaseException], "ServiceError | None"]
_translators: list[Translator] = []


def translate_with(translator: Translator) -> None:
    """Register ``translator``: the interceptor (and a stream's refusals) offer it every exception that
    is not a :class:`ServiceError`; what it returns is answered instead of ``INTERNAL``. The runtime
    itself knows nothing of databases: :mod:`libs.persistence.failures` registers its classifier."""
    if translator not in _translators:
        _translators.append(translator)


def translated(error: BaseException) -> ServiceError | None:
    """The refusal a registered translator makes of ``error`` (``None``: none does: it is a failure)."""
    if isinstance(error, ServiceError):
        return error
    for translator in _translators:
        refusal = translator(error)
        if refusal is not None:
            return refusal
    return None


def error_for(code: grpc.StatusCode, reason: str) -> ServiceError:
    """The :class:`ServiceError` that refuses with ``code`` (``UNKNOWN`` for ``OK``, which refuses
    nothing: a refusal saying OK is malformed and must not pass as a success). A refusal inside a stream
    has no metadata: an ``UNAVAILABLE`` one gives its retry guidance in its reason ("retry in N ms"),
    which is kept as the error's ``retry_after_ms``, so a gateway relaying it as a call's status sends
    the guidance in metadata too."""
    if code is grpc.StatusCode.OK:
        code = grpc.StatusCode.UNKNOWN
    wait = retry_in_ms(reason) if code is grpc.StatusCode.UNAVAILABLE else None
    return _ERRORS[code](reason or code.name, retry_after_ms=wait)


_RETRY_IN = re.compile(r"retry in (\d{1,9}) ms")


def retry_in_ms(reason: str) -> int | None:
    """The wait a reason asks for in words ("retry in N ms"), or ``None``."""
    found = _RETRY_IN.search(reason)
    return min(int(found[1]), MAX_RETRY_AFTER_MS) if found else None
