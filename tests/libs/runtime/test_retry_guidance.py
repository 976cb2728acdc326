"""Retry guidance on a refusal: what the interceptor puts beside an ``UNAVAILABLE`` status, and what a
gateway reads back from a backend's refusal to pass it on (docs/gateway.md, "Errors and retry guidance")."""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from libs.runtime.errors import (
    Unavailable,
    error_for,
    retry_after_ms,
    retry_in_ms,
    retry_trailers,
)


def test_the_trailers_carry_the_wait_as_metadata_and_as_a_retry_info_detail() -> None:
    reason = "the database is unavailable (connection refused); retry in 1500 ms"
    trailers = dict(retry_trailers(grpc.StatusCode.UNAVAILABLE, reason, 1500))
    assert trailers["retry-after-ms"] == "1500"
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])  # type: ignore[arg-type]
    assert (status.code, status.message) == (14, reason)  # what the call ends with, or readers reject it
    info = error_details_pb2.RetryInfo()
    assert status.details[0].Unpack(info)
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
