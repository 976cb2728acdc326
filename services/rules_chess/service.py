"""The chess rules service: :class:`~libs.match.service.RulesService` with the chess family."""

from __future__ import annotations

from collections.abc import Mapping

from libs.match.service import RulesService
from libs.runtime import ServiceConfig
from services.rules_chess.family import ChessFamily

SERVICE_NAME = "rules-chess"


def chess_rules_service(config: ServiceConfig, env: Mapping[str, str] | None = None) -> RulesService:
    return RulesService(ChessFamily(), config, env)
