"""A refusal's machine-readable part (docs/errors.md): the status details the interceptor sends (ErrorInfo,
RetryInfo, BadRequest), the same inside a stream (ErrorDetails), and what a gateway or a client reads back
from either form; the catalogue itself (every reason has its one code and a client action)."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from skillclassics.errors.v1 import errors_pb2

from libs.runtime.errors import (
    ERROR_DOMAIN,
    ErrorReason,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Problem,
    Unavailable,
    Violation,
    details_message,
    error_for,
    error_from_refusal,
    error_from_status,
    reason_code,
    reason_name,
    reason_named,
    retry_after_ms,
    retry_in_ms,
    retry_trailers,
    status_trailers,
)


def test_the_trailers_carry_the_wait_as_metadata_and_as_a_retry_info_detail() -> None:
    reason = "the database is unavailable (connection refused); retry in 1500 ms"
    trailers = dict(retry_trailers(grpc.StatusCode.UNAVAILABLE, reason, 1500))
    assert trailers["retry-after-ms"] == "1500"
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])  # type: ignore[arg-type]
    assert (status.code, status.message) == (14, reason)  # what the call ends with, or readers reject it
    info = error_details_pb2.RetryInfo()
    assert any(detail.Unpack(info) for detail in status.details)
    assert (info.retry_delay.seconds, info.retry_delay.nanos) == (1, 500_000_000)
    assert retry_after_ms(list(trailers.items())) == 1500


def test_a_retry_info_alone_is_read_and_nonsense_is_no_guidance() -> None:
    info = error_details_pb2.RetryInfo()
    info.retry_delay.FromMilliseconds(250)
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=14, message="down", details=[detail]).SerializeToString()
    assert retry_after_ms([("grpc-status-details-bin", status)]) == 250
    assert retry_after_ms([("retry-after-ms", "soon"), ("x-request-id", "r")]) is None
    assert retry_after_ms([("grpc-status-details-bin", b"\xff\xff not a status")]) is None
    assert retry_after_ms(None) is None
    assert retry_after_ms([("retry-after-ms", "99999999999")]) == 3_600_000  # believed up to an hour


def test_a_refusal_inside_a_stream_keeps_its_wait_from_its_words() -> None:
    refused = error_for(grpc.StatusCode.UNAVAILABLE, "the database is unavailable (x); retry in 1000 ms")
    assert isinstance(refused, Unavailable)
    assert refused.retry_after_ms == 1000
    assert error_for(grpc.StatusCode.UNAVAILABLE, "rules-chess shard 0 is down").retry_after_ms is None
    assert error_for(grpc.StatusCode.NOT_FOUND, "retry in 5 ms").retry_after_ms is None
    assert retry_in_ms("slow down: retry in 40 ms") == 40


def test_every_reason_in_the_catalogue_has_its_one_code_and_a_client_action() -> None:
    for value in ErrorReason.DESCRIPTOR.values:
        options, reason = value.GetOptions(), ErrorReason.Value(value.name)
        if value.number == 0:
            assert reason_code(reason) is None
            continue
        code = options.Extensions[errors_pb2.status_code]
        assert code in grpc.StatusCode.__members__, value.name  # a real code's name
        assert grpc.StatusCode[code] is not grpc.StatusCode.OK
        assert options.Extensions[errors_pb2.client_action].strip(), value.name
        assert reason_code(reason) is grpc.StatusCode[code]
        assert reason_named(reason_name(reason)) == reason
    assert reason_name(ErrorReason.ERROR_REASON_NOT_YOUR_TURN) == "NOT_YOUR_TURN"
    assert reason_named("NO_SUCH_REASON") == ErrorReason.ERROR_REASON_UNSPECIFIED
    assert reason_name(9999) == "UNSPECIFIED"  # type: ignore[arg-type]


def test_a_reason_that_does_not_come_with_the_class_code_is_a_programming_error() -> None:
    with pytest.raises(TypeError, match="NOT_YOUR_TURN comes with FAILED_PRECONDITION"):
        InvalidArgument("x", reason=ErrorReason.ERROR_REASON_NOT_YOUR_TURN)


def test_every_refusal_sends_error_info_and_bad_request_and_reads_back_whole() -> None:
    refusal = InvalidArgument(
        "2 fields are invalid: family, idempotency_key",
        reason=ErrorReason.ERROR_REASON_INVALID_FIELDS,
        metadata={"method": "CreateTable"},
        violations=[
            Violation("family", "is required"),
            Violation("idempotency_key", "must be 1-128 characters"),
        ],
    )
    trailers = status_trailers(refusal)
    assert "retry-after-ms" not in dict(trailers)  # no guidance, no header
    status = status_pb2.Status.FromString(dict(trailers)["grpc-status-details-bin"])  # type: ignore[arg-type]
    info, bad = error_details_pb2.ErrorInfo(), error_details_pb2.BadRequest()
    assert status.details[0].Unpack(info)
    assert status.details[1].Unpack(bad)
    assert (info.reason, info.domain, dict(info.metadata)) == (
        "INVALID_FIELDS",
        ERROR_DOMAIN,
        {"method": "CreateTable"},
    )
    assert [(v.field, v.description) for v in bad.field_violations] == [
        ("family", "is required"),
        ("idempotency_key", "must be 1-128 characters"),
    ]
    problem = Problem.of(grpc.StatusCode.INVALID_ARGUMENT, refusal.message, trailers)
    assert problem.reason == "INVALID_FIELDS"
    assert problem.domain == ERROR_DOMAIN
    assert problem.violations == refusal.violations
    assert problem.retry_after_ms is None
    relayed = error_from_status(grpc.StatusCode.INVALID_ARGUMENT, refusal.message, trailers)
    assert isinstance(relayed, InvalidArgument)
    assert (relayed.reason, relayed.violations, relayed.metadata) == (
        refusal.reason,
        refusal.violations,
        refusal.metadata,
    )


def test_a_refusal_inside_a_stream_carries_the_same_details() -> None:
    refusal = Unavailable(
        "shard 0 is restarting", reason=ErrorReason.ERROR_REASON_SHARD_NOT_SERVING, retry_after_ms=250
    )
    details = details_message(refusal)
    assert details.reason == ErrorReason.ERROR_REASON_SHARD_NOT_SERVING
    assert details.retry_after_ms == 250
    back = error_from_refusal(
        14, refusal.message, errors_pb2.ErrorDetails.FromString(details.SerializeToString())
    )
    assert (back.code, back.reason, back.retry_after_ms) == (grpc.StatusCode.UNAVAILABLE, refusal.reason, 250)
    answer = Problem.from_answer(
        9, "it is White's turn", errors_pb2.ErrorDetails(reason=ErrorReason.ERROR_REASON_NOT_YOUR_TURN)
    )
    assert (answer.code, answer.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "NOT_YOUR_TURN")
    older = Problem.from_answer(9, "it is White's turn", None)  # a server from before the details
    assert (older.code, older.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "UNSPECIFIED")


def test_a_peer_reason_that_does_not_match_its_code_is_not_believed() -> None:
    lying = errors_pb2.ErrorDetails(reason=ErrorReason.ERROR_REASON_RATE_LIMITED)
    refused = error_from_refusal(5, "no match", lying)  # NOT_FOUND with a RESOURCE_EXHAUSTED reason
    assert isinstance(refused, NotFound)
    assert refused.reason == ErrorReason.ERROR_REASON_UNSPECIFIED
    assert isinstance(
        error_for(grpc.StatusCode.FAILED_PRECONDITION, "x", ErrorReason.ERROR_REASON_MATCH_OVER),
        FailedPrecondition,
    )


def test_the_errors_page_is_the_catalogue_and_every_reason_is_used() -> None:
    from tools import errors_doc

    assert errors_doc.PAGE.read_text() == errors_doc.render(), "run `make protos` (tools/errors_doc.py)"
    root = errors_doc.PAGE.parent.parent
    sources = "\n".join(
        path.read_text()
        for folder in ("services", "libs", "clients")
        for path in (root / folder).rglob("*.py")
        if "protos" not in path.parts
    )
    for value in ErrorReason.DESCRIPTOR.values:
        if value.number:  # a reason nobody refuses with would promise clients something that never comes
            assert value.name in sources or f'"{reason_name(ErrorReason.Value(value.name))}"' in sources, (
                value.name
            )
