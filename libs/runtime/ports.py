"""The fixed local ports of every service: one table, used by the services' defaults and the launcher.

In Kubernetes every pod listens on its service's port too, so manifests and local runs agree.
"""

from __future__ import annotations

from dataclasses import dataclass

HEALTH_PORT_SHIFT = 100
"""A service's plaintext health port (for the kubelet's probes, which cannot present a certificate) is
its gRPC port plus this: 50150 for the gateway, 50160 for rules-chess."""


@dataclass(frozen=True, slots=True)
class ServicePorts:
    """Where one service listens by default."""

    grpc: int
    """The gRPC port (the service API, health and reflection)."""
    metrics: int
    """The HTTP port serving Prometheus metrics at ``/metrics``."""

    @property
    def health(self) -> int:
        """The plaintext port serving only the gRPC health service (for the kubelet's probes)."""
        return self.grpc + HEALTH_PORT_SHIFT


DEFAULT_PORTS: dict[str, ServicePorts] = {
    "gateway": ServicePorts(grpc=50050, metrics=9150),
    "matchmaking": ServicePorts(grpc=50051, metrics=9151),
    "fairness": ServicePorts(grpc=50052, metrics=9152),
    "clock": ServicePorts(grpc=50053, metrics=9153),
    "rules-chess": ServicePorts(grpc=50060, metrics=9160),
    "rules-backgammon": ServicePorts(grpc=50061, metrics=9161),
    "rules-gin": ServicePorts(grpc=50062, metrics=9162),
    "rules-go": ServicePorts(grpc=50063, metrics=9163),
    "rules-generals": ServicePorts(grpc=50064, metrics=9164),
}
