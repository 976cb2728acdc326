"""Prometheus metrics for every gRPC method, named as in go-grpc-prometheus so dashboards carry over."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

disable_created_metrics()  # type: ignore[no-untyped-call] # the *_created series double the output and no dashboard reads them

RPC_STARTED = Counter(
    "grpc_server_started_total",
    "RPCs started on the server.",
    ["grpc_service", "grpc_method", "grpc_type"],
)
RPC_HANDLED = Counter(
    "grpc_server_handled_total",
    "RPCs completed on the server, by status code.",
    ["grpc_service", "grpc_method", "grpc_type", "grpc_code"],
)
RPC_LATENCY = Histogram(
    "grpc_server_handling_seconds",
    "Time from the start of an RPC to its end (for streams: the whole stream).",
    ["grpc_service", "grpc_method", "grpc_type"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0),
)
RPC_IN_FLIGHT = Gauge(
    "grpc_server_in_flight",
    "RPCs being handled right now.",
    ["grpc_service", "grpc_method"],
)
RPC_REFUSED = Counter(
    "skillclassics_rpc_refused_total",
    "Calls refused by the authorisation table before any handler ran (libs/runtime/authz.py), by the "
    "caller's service (rules-* for any rules shard, none without a certificate) and why: no_certificate, "
    "not_allowed (the caller's service may not call the method), constraint (a per-method rule such as "
    "owning the match), unlisted (the method is in no rule).",
    ["grpc_service", "grpc_method", "caller", "reason"],
)
RPC_UNDECODABLE = Counter(
    "skillclassics_rpc_undecodable_total",
    "Request messages that could not be parsed (answered INVALID_ARGUMENT).",
    ["grpc_service", "grpc_method"],
)
SERVICE_INFO = Gauge(
    "skillclassics_service_info", "Constant 1, labelled with the service's name.", ["service"]
)
STREAM_CALLS_HANDLED = Counter(
    "skillclassics_stream_calls_handled_total",
    "Calls carried inside a stream (a Play stream's actions, an Exchange stream's submits), by status "
    "code: the per-call view grpc_server_handled_total cannot give for them.",
    ["grpc_service", "grpc_method", "call", "grpc_code"],
)
STREAM_CALL_LATENCY = Histogram(
    "skillclassics_stream_call_seconds",
    "Time from receiving a call inside a stream to its answer.",
    ["grpc_service", "grpc_method", "call"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)

GROUP_COMMIT_SECONDS = Histogram(
    "skillclassics_group_commit_seconds",
    "A group commit's batch by stage: wait (its oldest unit's, from being queued until the transaction "
    "began: behind the batches before it and, on SQLite, for the process's turn at the file) and "
    "transaction (its statements up to the durable commit).",
    ["stage"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
GROUP_COMMIT_UNITS = Histogram(
    "skillclassics_group_commit_units",
    "Units of work (writes, and on SQLite reads) per committed group transaction.",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
)


class StreamCallMetrics:
    """Counts and times one kind of call carried inside a stream (labels bound once)."""

    def __init__(self, service: str, method: str, call: str) -> None:
        self._labels = (service, method, call)
        self._latency = STREAM_CALL_LATENCY.labels(service, method, call)
        self._handled: dict[str, Counter] = {}
        """The counter's child per status name, bound on first use (every action passes here)."""

    def observe(self, seconds: float, code: str) -> None:
        """One call answered after ``seconds`` with ``code`` (a grpc status name: ``OK``, ...)."""
        self._latency.observe(seconds)
        handled = self._handled.get(code)
        if handled is None:
            handled = self._handled[code] = STREAM_CALLS_HANDLED.labels(*self._labels, code)
        handled.inc()
