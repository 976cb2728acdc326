"""Contract figures: what the declared request rules (docs/validation.md) and the error details
(docs/errors.md) cost per call, beside the cost of parsing the request, which every call pays anyway.

- validation: ``libs.runtime.validation.check`` on a gateway ``SubmitActionRequest`` (a match id pattern,
  a key length, a chess move two messages deep), on a ``CreateTableRequest`` (a clock, a fee range, a
  currency, an enum), and on a type without rules;
- details: building a refusal's ``grpc-status-details-bin`` (``ErrorInfo`` and ``BadRequest``) and reading
  it back as a client does (``Problem.of``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import grpc
from skillclassics.chess.v1 import chess_pb2
from skillclassics.gateway.v1 import gateway_pb2
from skillclassics.rules.v1 import rules_pb2

from libs.runtime import validation
from libs.runtime.errors import ErrorReason, InvalidArgument, Problem, Violation, status_trailers

ROUNDS = 50_000


def _us(function: Callable[[], object], rounds: int = ROUNDS) -> float:
    function()  # compiled and cached before the clock starts
    best = float("inf")
    for _ in range(5):
        began = time.perf_counter()
        for _ in range(rounds):
            function()
        best = min(best, (time.perf_counter() - began) / rounds * 1e6)
    return best


async def run() -> None:
    submit_bytes = gateway_pb2.SubmitActionRequest(
        match_id="chess.0.0720f8bbf504413fb8599f5e130a0462",
        idempotency_key="k-1",
        action=rules_pb2.Action(chess=chess_pb2.ChessAction(move="e4")),
    ).SerializeToString()
    submit = gateway_pb2.SubmitActionRequest.FromString(submit_bytes)
    table = gateway_pb2.CreateTableRequest(
        family="chess",
        time_control=rules_pb2.TimeControl(base_ms=300_000),
        currency="USD",
        idempotency_key="t-1",
    )
    plain = gateway_pb2.WhoAmIRequest()
    print(f"validation, SubmitActionRequest:   {_us(lambda: validation.check(submit)):6.2f} us per call")
    print(f"validation, CreateTableRequest:    {_us(lambda: validation.check(table)):6.2f} us per call")
    print(f"validation, a type without rules:  {_us(lambda: validation.check(plain)):6.2f} us per call")
    parse = _us(lambda: gateway_pb2.SubmitActionRequest.FromString(submit_bytes))
    print(f"parsing the SubmitActionRequest:    {parse:6.2f} us per call (for scale)")
    refusal = InvalidArgument(
        "invalid request to CreateTable: family is required",
        reason=ErrorReason.ERROR_REASON_INVALID_FIELDS,
        violations=[Violation("family", "is required")],
    )
    trailers = status_trailers(refusal)
    built = _us(lambda: status_trailers(refusal), 20_000)
    print(f"refusal details, built:            {built:6.2f} us per refusal")
    read = _us(lambda: Problem.of(grpc.StatusCode.INVALID_ARGUMENT, refusal.message, trailers), 20_000)
    print(f"refusal details, read by a client: {read:6.2f} us per refusal")
