"""Errors a service raises to refuse a request, each carrying its gRPC status code, a readable message and a
reason from the catalogue (``skillclassics.errors.v1.ErrorReason``, docs/errors.md).

The runtime's interceptor is the one place that turns them into gRPC statuses; any other exception is
first offered to the translators registered with :func:`translate_with` (the persistence layer's turns
an unreachable database into :class:`Unavailable`), and otherwise logged and returned as INTERNAL
without leaking state.

Every refusal goes out with its machine-readable part in the trailing metadata
``grpc-status-details-bin`` (:func:`status_trailers`): a ``google.rpc.Status`` whose details are an
``ErrorInfo`` (the reason's name, the domain, the refusal's metadata), a ``RetryInfo`` when the refusal
carries retry guidance (``retry_after_ms``, also sent as ``retry-after-ms``) and a ``BadRequest`` naming
each invalid field. A refusal inside a stream carries the same as an ``ErrorDetails`` message
(:func:`details_message`); :func:`error_from_status` and :func:`error_from_refusal` read either form back,
so a gateway relays a backend's refusal whole and a client reads the details, not the words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any, ClassVar

import google.rpc.error_details_pb2 as error_details_pb2
import google.rpc.status_pb2 as status_pb2
import grpc
from google.protobuf import any_pb2, duration_pb2
from skillclassics.errors.v1 import errors_pb2
from skillclassics.errors.v1.errors_pb2 import ErrorReason as ErrorReason

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


ERROR_DOMAIN = "skillclassics.io"
"""The ``ErrorInfo.domain`` of every SkillClassics refusal."""
SERVICE_METADATA = "service"
"""The ``ErrorInfo`` metadata key naming the service a refusal is about: the one behind a gateway that is
down, slow or not configured ("matchmaking", "rules-chess shard 0")."""
_REASON_PREFIX = "ERROR_REASON_"


def reason_name(reason: ErrorReason.ValueType) -> str:
    """A reason as ``ErrorInfo.reason`` names it: ``"NOT_YOUR_TURN"`` (the enum name without its prefix);
    ``"UNSPECIFIED"`` for a number this version does not know."""
    try:
        return ErrorReason.Name(reason).removeprefix(_REASON_PREFIX)
    except ValueError:
        return "UNSPECIFIED"


def reason_named(name: str) -> ErrorReason.ValueType:
    """The reason ``ErrorInfo.reason`` names (``UNSPECIFIED`` for a name this version does not know)."""
    try:
        return ErrorReason.Value(_REASON_PREFIX + name)
    except ValueError:
        return ErrorReason.ERROR_REASON_UNSPECIFIED


def _reason_codes() -> dict[int, grpc.StatusCode]:
    codes = {}
    for value in ErrorReason.DESCRIPTOR.values:
        name = value.GetOptions().Extensions[errors_pb2.status_code]
        if name:
            codes[value.number] = grpc.StatusCode[name]
    return codes


_REASON_CODES = _reason_codes()


def reason_code(reason: ErrorReason.ValueType) -> grpc.StatusCode | None:
    """The status code that always comes with ``reason`` (its ``status_code`` option in the catalogue);
    ``None`` for ``UNSPECIFIED``."""
    return _REASON_CODES.get(int(reason))


@dataclass(frozen=True)
class Violation:
    """One invalid field of a request: its dotted path from the request message and what is wrong."""

    field: str
    description: str


class ServiceError(Exception):
    """A request the service refuses: a reason from the catalogue, a message a person can read (at most
    :data:`MAX_REASON_CHARS` characters: longer ones are cut), and optionally retry guidance, metadata
    about what the refusal concerns and the invalid fields. The reason must be one that comes with the
    class's status code (a programming error otherwise, raised as ``TypeError`` when the error is made)."""

    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        message: str,
        *,
        reason: ErrorReason.ValueType,
        retry_after_ms: int | None = None,
        metadata: Mapping[str, str] | None = None,
        violations: Iterable[Violation] = (),
    ) -> None:
        message = truncated(message)
        super().__init__(message)
        expected = reason_code(reason)
        if expected is not None and expected is not self.code:
            raise TypeError(f"reason {reason_name(reason)} comes with {expected.name}, not {self.code.name}")
        self.message = message
        self.reason = reason
        self.retry_after_ms = retry_after_ms
        """How long the caller should wait before trying again (``None``: no guidance), sent beside the
        status as ``retry-after-ms`` and a ``RetryInfo`` detail."""
        self.metadata = {key: truncated(value, MAX_SHOWN_CHARS) for key, value in (metadata or {}).items()}
        self.violations = tuple(violations)


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


def invalid_field(field: str, problem: str) -> InvalidArgument:
    """The refusal of a request whose ``field`` (a dotted path) is invalid for a reason the contract's
    declared rules cannot say (it depends on state or configuration): ``INVALID_FIELDS`` with the one
    violation, and the message "<field> <problem>"."""
    return InvalidArgument(
        f"{field} {problem}",
        reason=ErrorReason.ERROR_REASON_INVALID_FIELDS,
        violations=[Violation(field, problem)],
    )


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


def status_trailers(error: ServiceError) -> tuple[tuple[str, str | bytes], ...]:
    """The trailing metadata of a call ``error`` ends: the ``google.rpc.Status`` with its details
    (``grpc-status-details-bin``, which gRPC's own libraries read: ``grpc_status.rpc_status.from_call``)
    and, with retry guidance, ``retry-after-ms`` (easy to read from any client). The status's code and
    message are those the call ends with, or readers reject it."""
    status = status_pb2.Status(code=code_number(error.code), message=error.message)
    for detail in _status_details(error):
        packed = any_pb2.Any()
        packed.Pack(detail)
        status.details.append(packed)
    trailers: tuple[tuple[str, str | bytes], ...] = ((STATUS_DETAILS_METADATA, status.SerializeToString()),)
    if error.retry_after_ms is not None:
        trailers = ((RETRY_AFTER_METADATA, str(error.retry_after_ms)), *trailers)
    return trailers


def _status_details(error: ServiceError) -> list[Any]:
    details: list[Any] = [
        error_details_pb2.ErrorInfo(
            reason=reason_name(error.reason), domain=ERROR_DOMAIN, metadata=error.metadata
        )
    ]
    if error.retry_after_ms is not None:
        delay = duration_pb2.Duration(**_duration(error.retry_after_ms))
        details.append(error_details_pb2.RetryInfo(retry_delay=delay))
    if error.violations:
        details.append(
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description)
                    for v in error.violations
                ]
            )
        )
    return details


def retry_trailers(
    code: grpc.StatusCode, message: str, retry_after_ms: int
) -> tuple[tuple[str, str | bytes], ...]:
    """The trailing metadata that tells a caller to retry after ``retry_after_ms`` (a refusal with no
    reason of its own: for tests and fakes standing in for a peer)."""
    return status_trailers(error_for(code, message, retry_after_ms=retry_after_ms))


def details_message(error: ServiceError) -> errors_pb2.ErrorDetails:
    """``error``'s machine-readable part as a refusal inside a stream carries it."""
    details = errors_pb2.ErrorDetails(
        reason=error.reason,
        metadata=error.metadata,
        field_violations=[
            errors_pb2.FieldViolation(field=v.field, description=v.description) for v in error.violations
        ],
    )
    if error.retry_after_ms is not None:
        details.retry_after_ms = error.retry_after_ms
    return details


def error_from_refusal(code: int, message: str, details: errors_pb2.ErrorDetails | None) -> ServiceError:
    """The refusal a stream carried (a status code number, a message and its :func:`details_message`)."""
    if details is None:
        return error_for(status_code(code), message)
    return error_for(
        status_code(code),
        message,
        details.reason,
        retry_after_ms=min(max(details.retry_after_ms, 0), MAX_RETRY_AFTER_MS)
        if details.HasField("retry_after_ms")
        else None,
        metadata=dict(details.metadata),
        violations=[Violation(v.field, v.description) for v in details.field_violations],
    )


def error_from_status(
    code: grpc.StatusCode, message: str, metadata: Iterable[tuple[str, str | bytes]] | None
) -> ServiceError:
    """The refusal a call ended with, read from its code, message and trailing ``metadata`` (the status
    details a SkillClassics service sends; a peer that sent none gives a reason-less refusal). A gateway
    relays a backend's refusal with this, whole."""
    problem = Problem.of(code, message, metadata)
    return error_for(
        code,
        message,
        reason_named(problem.reason),
        retry_after_ms=problem.retry_after_ms,
        metadata=problem.metadata,
        violations=problem.violations,
    )


@dataclass(frozen=True)
class Problem:
    """What a client reads of a refused call: the code, the message, and the status details (reason,
    domain, metadata, retry guidance, invalid fields). Read it with :meth:`of` or :meth:`from_rpc_error`."""

    code: grpc.StatusCode
    message: str
    reason: str = "UNSPECIFIED"
    """The ``ErrorInfo`` reason, such as ``"NOT_YOUR_TURN"`` (``"UNSPECIFIED"`` when there was none)."""
    domain: str = ""
    metadata: Mapping[str, str] = dataclass_field(default_factory=dict)
    retry_after_ms: int | None = None
    violations: tuple[Violation, ...] = ()

    @classmethod
    def of(
        cls, code: grpc.StatusCode, message: str, metadata: Iterable[tuple[str, str | bytes]] | None
    ) -> Problem:
        """The problem a call's code, message and trailing metadata describe."""
        header, found = _read_trailers(metadata)
        wait = found.pop("retry_after_ms", None)
        return cls(code=code, message=message, retry_after_ms=header if header is not None else wait, **found)

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> Problem:
        """The problem of a failed call as grpc raised it."""
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        message = error.details() if hasattr(error, "details") else str(error)
        trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
        return cls.of(code, message or "", trailers)

    @classmethod
    def from_answer(cls, code: int, message: str, details: errors_pb2.ErrorDetails | None) -> Problem:
        """The problem of a refusal inside a stream (a PlayAnswer's or Refusal's code, message, details)."""
        error = error_from_refusal(code, message, details)
        return cls(
            code=error.code,
            message=error.message,
            reason=reason_name(error.reason),
            domain=ERROR_DOMAIN if details is not None else "",
            metadata=error.metadata,
            retry_after_ms=error.retry_after_ms,
            violations=error.violations,
        )


def _read_trailers(metadata: Iterable[tuple[str, str | bytes]] | None) -> tuple[int | None, dict[str, Any]]:
    """A call's trailing metadata read once: the ``retry-after-ms`` wait (``None``: none, or malformed)
    and what its status details say, as :class:`Problem` fields (``retry_after_ms`` from a
    ``RetryInfo``)."""
    header: int | None = None
    found: dict[str, Any] = {}
    for key, value in metadata or ():
        if key == RETRY_AFTER_METADATA and header is None:
            text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
            if text.isdigit():
                header = min(int(text), MAX_RETRY_AFTER_MS)
        elif key == STATUS_DETAILS_METADATA and isinstance(value, bytes) and not found:
            found = _parse_details(value)
    return header, found


def _parse_details(serialized: bytes) -> dict[str, Any]:
    status = status_pb2.Status()
    try:
        status.ParseFromString(serialized)
    except Exception:  # a malformed status from a peer: no details
        return {}
    found: dict[str, Any] = {}
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        bad = error_details_pb2.BadRequest()
        retry = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            found.update(
                reason=info.reason or "UNSPECIFIED", domain=info.domain, metadata=dict(info.metadata)
            )
        elif detail.Unpack(bad):
            found["violations"] = tuple(Violation(v.field, v.description) for v in bad.field_violations)
        elif detail.Unpack(retry):
            delay = retry.retry_delay
            total = int(delay.seconds) * 1000 + int(delay.nanos) // 1_000_000
            found["retry_after_ms"] = min(max(total, 0), MAX_RETRY_AFTER_MS)
    return found


def _duration(milliseconds: int) -> dict[str, int]:
    return {"seconds": milliseconds // 1000, "nanos": (milliseconds % 1000) * 1_000_000}


def retry_after_ms(metadata: Iterable[tuple[str, str | bytes]] | None) -> int | None:
    """The retry guidance in a call's trailing ``metadata`` (``retry-after-ms``, else a ``RetryInfo``
    detail of its status); ``None`` when there is none or it is malformed. A gateway relaying a backend's
    refusal passes this on."""
    header, found = _read_trailers(metadata)
    return header if header is not None else found.get("retry_after_ms")


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


def error_for(
    code: grpc.StatusCode,
    message: str,
    reason: ErrorReason.ValueType = ErrorReason.ERROR_REASON_UNSPECIFIED,
    *,
    retry_after_ms: int | None = None,
    metadata: Mapping[str, str] | None = None,
    violations: Iterable[Violation] = (),
) -> ServiceError:
    """The :class:`ServiceError` that refuses with ``code`` (``UNKNOWN`` for ``OK``, which refuses
    nothing: a refusal saying OK is malformed and must not pass as a success). A reason that does not
    come with ``code`` (a peer's mistake) is dropped rather than believed. Without explicit retry guidance,
    an ``UNAVAILABLE`` message that asks for a wait in words ("retry in N ms") gives it."""
    if code is grpc.StatusCode.OK:
        code = grpc.StatusCode.UNKNOWN
    if reason_code(reason) is not code:
        reason = ErrorReason.ERROR_REASON_UNSPECIFIED
    if retry_after_ms is None and code is grpc.StatusCode.UNAVAILABLE:
        retry_after_ms = retry_in_ms(message)
    return _ERRORS[code](
        message or code.name,
        reason=reason,
        retry_after_ms=retry_after_ms,
        metadata=metadata,
        violations=violations,
    )


_RETRY_IN = re.compile(r"retry in (\d{1,9}) ms")


def retry_in_ms(reason: str) -> int | None:
    """The wait a reason asks for in words ("retry in N ms"), or ``None``."""
    found = _RETRY_IN.search(reason)
    return min(int(found[1]), MAX_RETRY_AFTER_MS) if found else None
