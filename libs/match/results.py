"""Results in the rules contract's terms: an engine :class:`Outcome` as a ``rules.v1.Result``."""

from __future__ import annotations

from skillclassics.rules.v1 import rules_pb2

from libs.engines.base import Outcome, Termination

TERMINATION_TO_PROTO = {t: rules_pb2.Termination.Value(f"TERMINATION_{t.value.upper()}") for t in Termination}


def result_proto(outcome: Outcome, ended_at_ms: int) -> rules_pb2.Result:
    """The contract's Result for ``outcome``."""
    result = rules_pb2.Result(
        termination=TERMINATION_TO_PROTO[outcome.termination],
        tiebreak_step=outcome.tiebreak_step or "",
        detail=outcome.detail,
        score=outcome.score,
        ended_at_ms=ended_at_ms,
    )
    if outcome.winner is not None:
        result.winner = outcome.winner
    if outcome.cause is not None:
        result.cause = TERMINATION_TO_PROTO[outcome.cause]
    return result
