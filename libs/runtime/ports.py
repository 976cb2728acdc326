"""The fixed local ports of every service: one table, used by the services' defaults and the launcher.

In Kubernetes every pod listens on its service's port too, so manifests and local runs agree.

On one machine several processes of a service (the shards of a rules family or of the clock, several
gateways: ``make run`` with ``SHARDS``, ``GATEWAYS``, ``CLOCK_SHARDS``) cannot share ports, so replica
``n`` (the shard number, or the n-th gateway; replica 0 is the table's row) listens on every port of its
row plus ``n`` × :data:`REPLICA_PORT_STRIDE`: rules-chess shard 1 on gRPC 50260, health 50360, metrics
9360; gateway 2 on 50450. The table's rows span 15 ports and health ports are gRPC + 100, so with a
stride of 200 the gRPC and health bands of every replica stay apart (gRPC bands at 50050 + 200n, health
bands at 50150 + 200n), and so do the metrics bands (9150 + 200n).
"""

from __future__ import annotations

from dataclasses import dataclass

HEALTH_PORT_SHIFT = 100
"""A service's plaintext health port (for the kubelet's probes, which cannot present a certificate) is
its gRPC port plus this: 50150 for the gateway, 50160 for rules-chess."""


REPLICA_PORT_STRIDE = 200
"""How far apart the ports of consecutive replicas of a service are on one machine (see above)."""


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


def replica_ports(name: str, replica: int = 0, offset: int = 0) -> ServicePorts:
    """The ports of replica ``replica`` of service ``name`` (a key of :data:`DEFAULT_PORTS`), every one
    shifted by ``offset`` too; :class:`KeyError` for an unknown service, :class:`ValueError` for a
    negative replica. Whether the ports are in range is the caller's check."""
    if replica < 0:
        raise ValueError(f"replica must be 0 or more, got {replica}")
    base = DEFAULT_PORTS[name]
    shift = offset + replica * REPLICA_PORT_STRIDE
    return ServicePorts(grpc=base.grpc + shift, metrics=base.metrics + shift)
