"""The backgammon rules service: :class:`~libs.match.service.RulesService` with the backgammon family.

Every die (opening rolls included) comes from the fairness service, so ``FAIRNESS_ADDRESS`` is required.
"""

from __future__ import annotations

from collections.abc import Mapping

from libs.match.service import RulesService
from libs.runtime import ServiceConfig
from services.rules_backgammon.family import BackgammonFamily

SERVICE_NAME = "rules-backgammon"


def backgammon_rules_service(config: ServiceConfig, env: Mapping[str, str] | None = None) -> RulesService:
    return RulesService(BackgammonFamily(), config, env)
