"""The go rules service: :class:`~libs.match.service.RulesService` with the go family.

Go has no chance, so unlike backgammon and gin it needs no fairness service.
"""

from __future__ import annotations

from collections.abc import Mapping

from libs.match.service import RulesService
from libs.runtime import ServiceConfig
from services.rules_go.family import GoFamily

SERVICE_NAME = "rules-go"


def go_rules_service(config: ServiceConfig, env: Mapping[str, str] | None = None) -> RulesService:
    return RulesService(GoFamily(), config, env)
