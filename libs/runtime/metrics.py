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
SERVICE_INFO = Gauge(
    "skillclassics_service_info", "Constant 1, labelled with the service's name.", ["service"]
)
