"""The services of the local stack, in start order: one line per service.

A service whose module does not exist (yet) is skipped, so the list can name the planned services
before they are written; the launcher starts those that are there. Names are the keys of
:data:`libs.runtime.ports.DEFAULT_PORTS`, which gives each service its ports.

:func:`scale_out` turns that list into several processes of the sharded services and of the gateway:
replica ``n`` of a service is named ``<service>-<n>`` (replica 0 keeps the plain name, so a stack of one
of each is named as before): ``rules-chess-1`` is rules-chess shard 1, ``clock-1`` clock shard 1,
``gateway-1`` the second gateway, ``matchmaking-1`` matchmaking's second replica.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """One service of the stack: its name and the module ``python -m`` runs."""

    name: str
    """The service's name, a key of :data:`~libs.runtime.ports.DEFAULT_PORTS`."""
    module: str
    """The module started as ``python -m <module>``."""
    example: tuple[str, str] | None = None
    """An example call the launcher prints: the method path and a JSON request."""
    service: str = ""
    """The service this process is a replica of (its ports' row, its certificate's name); empty: ``name``."""
    replica: int = 0
    """Which replica: the shard number of a rules or clock process, the n-th gateway (ports shift by it)."""
    stage: int = 0
    """When it starts: the services of a stage start together, once every service of the stages before
    (those it calls) is SERVING."""

    @property
    def kind(self) -> str:
        """The service this process runs, e.g. ``rules-chess`` for ``rules-chess-1``."""
        return self.service or self.name

    def as_replica(self, replica: int) -> ServiceSpec:
        """Replica ``replica`` of this service: named ``<service>-<replica>`` (replica 0: ``<service>``)."""
        if replica == self.replica:
            return self
        kind = self.kind
        name = kind if replica == 0 else f"{kind}-{replica}"
        return replace(
            self, name=name, service=kind, replica=replica, example=self.example if replica == 0 else None
        )


SERVICES: tuple[ServiceSpec, ...] = (
    ServiceSpec("fairness", "services.fairness"),
    ServiceSpec("clock", "services.clock"),
    ServiceSpec(
        "rules-chess",
        "services.rules_chess",
        example=("skillclassics.rules.v1.RulesService/ListMatches", '{"page_size":10}'),
        stage=1,
    ),
    ServiceSpec("rules-backgammon", "services.rules_backgammon", stage=1),
    ServiceSpec("rules-gin", "services.rules_gin", stage=1),
    ServiceSpec("rules-go", "services.rules_go", stage=1),
    ServiceSpec("rules-generals", "services.rules_generals", stage=1),
    ServiceSpec("matchmaking", "services.matchmaking", stage=2),
    ServiceSpec("gateway", "services.gateway", stage=3),
)
"""Every service of the stack in start order (a service starts after those it calls; those of one
:attr:`~ServiceSpec.stage`, which do not call each other, start together)."""


SCALABLE = ("clock", "gateway", "matchmaking")
"""Besides the rules families, the services that may run as several processes (the clock by shard, the
gateway and matchmaking's replicas side by side); fairness runs once."""


def scale_out(
    services: Iterable[ServiceSpec],
    *,
    shards: int | Mapping[str, int] = 1,
    gateways: int = 1,
    clock_shards: int = 1,
    matchmakers: int = 1,
) -> tuple[ServiceSpec, ...]:
    """``services`` with ``shards`` processes of every rules family (or, given a mapping from family
    to count, that many of the families it names and one of the others), ``gateways`` gateways,
    ``clock_shards`` clock shards and ``matchmakers`` matchmaking replicas, each right after the previous
    replica (so the start order holds)."""
    counts = {"gateway": gateways, "clock": clock_shards, "matchmaking": matchmakers}
    scalars = (gateways, clock_shards, matchmakers)
    for count in (*scalars, *(shards.values() if isinstance(shards, Mapping) else [shards])):
        if count < 1:
            raise ValueError(f"a service needs at least one process, got {count}")
    if isinstance(shards, Mapping):
        families = {spec.kind.removeprefix("rules-") for spec in services if spec.kind.startswith("rules-")}
        unknown = sorted(set(shards) - families)
        if unknown:
            raise ValueError(
                f"no rules service for {', '.join(unknown)} (families: {', '.join(sorted(families))})"
            )
    scaled: list[ServiceSpec] = []
    for spec in services:
        if spec.kind.startswith("rules-"):
            family = spec.kind.removeprefix("rules-")
            count = shards.get(family, 1) if isinstance(shards, Mapping) else shards
        else:
            count = counts.get(spec.kind, 1)
        scaled += [spec.as_replica(replica) for replica in range(count)]
    return tuple(scaled)


def parse_shards(text: str) -> int | dict[str, int]:
    """``SHARDS``: a count for every rules family (``2``), or counts by family (``chess=2,gin=3``, the
    others 1); :class:`ValueError` when it is neither."""
    text = text.strip()
    if not text:
        return 1
    if "=" not in text:
        return int(text)
    counts: dict[str, int] = {}
    for part in text.split(","):
        family, sep, count = part.partition("=")
        if not sep or not family.strip():
            raise ValueError(f"expected FAMILY=COUNT, got {part!r}")
        counts[family.strip().lower()] = int(count)
    return counts


def module_exists(module: str) -> bool:
    """Whether ``python -m <module>`` has something to run, without importing the module itself.

    A package counts only once it has a ``__main__.py``; parent packages are imported to find it.
    """
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    if spec.submodule_search_locations is None:
        return True
    return any((Path(location) / "__main__.py").is_file() for location in spec.submodule_search_locations)


def available_services(services: Iterable[ServiceSpec] = SERVICES) -> tuple[ServiceSpec, ...]:
    """The services among ``services`` whose module exists, in the same order."""
    return tuple(spec for spec in services if module_exists(spec.module))


def service_spec(name: str) -> ServiceSpec:
    """The registered service called ``name``; :class:`KeyError` when there is none."""
    for spec in SERVICES:
        if spec.name == name:
            return spec
    raise KeyError(name)
