"""Results in the rules contract's terms: an engine :class:`Outcome` as a ``rules.v1.Result``."""

from __future__ import annotations

from collections.abc import Sequence

from skillclassics.rules.v1 import rules_pb2

from libs.engines.base import Outcome, Termination

TERMINATION_TO_PROTO = {t: rules_pb2.Termination.Value(f"TERMINATION_{t.value.upper()}") for t in Termination}


def settlement(outcome: Outcome, stood_in: Sequence[int]) -> rules_pb2.Settlement.ValueType:
    """What happens to the stakes (seed 002, docs/match-runtime.md "Stand-ins"): refunded to both when
    both seats were played by stand-ins, or when the seat that won was (its stand-in, or its player who
    came back after the stand-in took over, won); otherwise paid as the result says (an abort refunds,
    as always)."""
    if len(set(stood_in)) >= 2 or (outcome.winner is not None and outcome.winner in stood_in):
        return rules_pb2.SETTLEMENT_REFUNDED
    return rules_pb2.SETTLEMENT_STAKES_PAID


def result_proto(outcome: Outcome, ended_at_ms: int, stood_in: Sequence[int] = ()) -> rules_pb2.Result:
    """The contract's Result for ``outcome``; ``stood_in``: the seats a stand-in played for."""
    result = rules_pb2.Result(
        termination=TERMINATION_TO_PROTO[outcome.termination],
        tiebreak_step=outcome.tiebreak_step or "",
        detail=outcome.detail,
        score=outcome.score,
        ended_at_ms=ended_at_ms,
        stood_in=sorted(set(stood_in)),
        settlement=settlement(outcome, stood_in),
    )
    if outcome.winner is not None:
        result.winner = outcome.winner
    if outcome.cause is not None:
        result.cause = TERMINATION_TO_PROTO[outcome.cause]
    return result
