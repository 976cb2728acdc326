"""The gin rummy rules service: :class:`~libs.match.service.RulesService` with the gin family.

Every shuffle and the first dealer come from the fairness service, so ``FAIRNESS_ADDRESS`` is required.
"""

from __future__ import annotations

from collections.abc import Mapping

from libs.match.service import RulesService
from libs.runtime import ServiceConfig
from services.rules_gin.family import GinFamily

SERVICE_NAME = "rules-gin"


def gin_rules_service(config: ServiceConfig, env: Mapping[str, str] | None = None) -> RulesService:
    return RulesService(GinFamily(), config, env)
