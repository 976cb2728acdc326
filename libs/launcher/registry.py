"""The services of the local stack, in start order: one line per service.

A service whose module does not exist (yet) is skipped, so the list can name the planned services
before they are written; the launcher starts those that are there. Names are the keys of
:data:`libs.runtime.ports.DEFAULT_PORTS`, which gives each service its ports.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass
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


SERVICES: tuple[ServiceSpec, ...] = (
    ServiceSpec("fairness", "services.fairness"),
    ServiceSpec("clock", "services.clock"),
    ServiceSpec(
        "rules-chess",
        "services.rules_chess",
        example=("skillclassics.rules.v1.RulesService/ListMatches", '{"page_size":10}'),
    ),
    ServiceSpec("rules-backgammon", "services.rules_backgammon"),
    ServiceSpec("rules-gin", "services.rules_gin"),
    ServiceSpec("rules-go", "services.rules_go"),
    ServiceSpec("rules-generals", "services.rules_generals"),
    ServiceSpec("matchmaking", "services.matchmaking"),
    ServiceSpec("gateway", "services.gateway"),
)
"""Every service of the stack in start order (a service starts after those it calls)."""


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
