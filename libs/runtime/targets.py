"""Where a channel connects: one address, or every replica of a service with the calls spread over them.

A service that runs as several interchangeable replicas (matchmaking: one pairing leader, every replica
serving the lobby) is named to its callers in one of two ways, and each becomes a gRPC target whose
calls are balanced per call (``round_robin``), not per connection:

- a comma-separated list of IP addresses with ports, ``127.0.0.1:50051,127.0.0.1:50251`` (what ``make
  run`` gives the callers of several matchmaking replicas): the target ``ipv4:`` (or ``ipv6:``) of them;
- a ``dns:///name:port`` target, e.g. a Kubernetes headless Service whose name resolves to every ready
  pod: passed as it is.

gRPC skips a replica whose connection failed (until it answers again), so a killed replica costs the
calls that were on it, not the calls after; and a caller may name methods that are safe to run twice
(reads, and writes that a repeat returns unchanged): a call of one of those that ends ``UNAVAILABLE``
(its replica killed or shutting down under it) is tried again, on the next replica, by gRPC itself
(:func:`retry_policy`). A single ``host:port`` is left as it is (one connection, as
before). A list naming hosts rather than IP addresses is refused: gRPC can only balance over names
through its DNS resolver, which a ``dns:///`` target selects.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Sequence

from libs.runtime.config import ConfigError

ROUND_ROBIN = json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})
"""The service config that spreads calls over every ready address of a target."""


RETRY_ATTEMPTS = 3
"""Attempts at most for a retryable call (the first included); all within the call's own deadline."""


def retry_policy(service: str, methods: Sequence[str]) -> dict[str, object]:
    """A gRPC ``methodConfig`` entry: ``methods`` of ``service`` (its full name) are tried again, up to
    :data:`RETRY_ATTEMPTS` in all with a short backoff, when they end ``UNAVAILABLE``. gRPC only retries a
    call that had no answer yet (no response headers), so a repeat is a second delivery of the same
    request: only methods that are safe to run twice may be named."""
    return {
        "name": [{"service": service, "method": method} for method in methods],
        "retryPolicy": {
            "maxAttempts": RETRY_ATTEMPTS,
            "initialBackoff": "0.05s",
            "maxBackoff": "0.5s",
            "backoffMultiplier": 2,
            "retryableStatusCodes": ["UNAVAILABLE"],
        },
    }


def _service_config(balanced: bool, retry: Sequence[dict[str, object]]) -> list[tuple[str, object]]:
    config: dict[str, object] = {}
    if balanced:
        config["loadBalancingConfig"] = [{"round_robin": {}}]
    if retry:
        config["methodConfig"] = list(retry)
    return [("grpc.service_config", json.dumps(config))] if config else []


class TargetError(ConfigError):
    """An address list that gRPC cannot balance over (a configuration error: the service does not start)."""


def replica_target(
    address: str, retry: Sequence[dict[str, object]] = ()
) -> tuple[str, list[tuple[str, object]]]:
    """The gRPC target for ``address`` and the channel options it needs (see the module's text), with
    the ``retry`` policies (:func:`retry_policy`) if any; :class:`TargetError` for a list that is not of
    ``ip:port`` addresses of one IP version."""
    address = address.strip()
    if address.startswith("dns:///"):
        return address, _service_config(True, retry)
    parts = [part.strip() for part in address.split(",")]
    if len(parts) == 1:
        return address, _service_config(False, retry)
    versions: set[int] = set()
    for part in parts:
        host, sep, port = part.rpartition(":")
        if not sep or not port.isdigit():
            raise TargetError(f"{part!r} in {address!r} is not host:port")
        try:
            versions.add(ipaddress.ip_address(host.strip("[]")).version)
        except ValueError:
            raise TargetError(
                f"{part!r} in {address!r} names a host: a list of replicas must be IP addresses "
                "(or name them once with a dns:/// target, e.g. a headless Service)"
            ) from None
    if len(versions) != 1:
        raise TargetError(f"{address!r} mixes IPv4 and IPv6 addresses")
    scheme = "ipv4" if versions == {4} else "ipv6"
    return f"{scheme}:{','.join(parts)}", _service_config(True, retry)
