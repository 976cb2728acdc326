"""The game families the platform serves, each read from its own declaration.

The rules services are the launcher's registry (``libs/launcher/registry.py``, one line per service): a
service named ``rules-<family>`` whose package has a ``family`` module declares its family there as
``FAMILY`` (a :class:`~libs.match.family.Family`). Matchmaking, the chaos checks and anything else that must
know every family read them here, so a new family is added without touching them (read the family's own
declaration rather than keep a list of one's own; docs/architecture.md, "Adding a family").
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping

from libs.launcher.registry import SERVICES
from libs.match.family import Family

RULES_PREFIX = "rules-"


@functools.cache
def rules_families() -> Mapping[str, Family]:
    """Every family with a rules service, by name, in the registry's order."""
    found: dict[str, Family] = {}
    for spec in SERVICES:
        if not spec.kind.startswith(RULES_PREFIX):
            continue
        try:
            module = importlib.import_module(f"{spec.module}.family")
        except ModuleNotFoundError:  # the registry may name a service before it is written
            continue
        family: Family = module.FAMILY
        expected = spec.kind.removeprefix(RULES_PREFIX)
        if family.name != expected:
            raise ValueError(f"{spec.module}.family declares {family.name!r}, but its service is {spec.kind}")
        found[family.name] = family
    return found
