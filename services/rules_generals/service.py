"""The Game of the Generals rules service: :class:`~libs.match.service.RulesService` with the generals
family.

The setup's completion at its deadline and the first mover come from the fairness service, so
``FAIRNESS_ADDRESS`` is required.
"""

from __future__ import annotations

from collections.abc import Mapping

from libs.match.service import RulesService
from libs.runtime import ServiceConfig
from services.rules_generals.family import GeneralsFamily

SERVICE_NAME = "rules-generals"


def generals_rules_service(config: ServiceConfig, env: Mapping[str, str] | None = None) -> RulesService:
    return RulesService(GeneralsFamily(), config, env)
