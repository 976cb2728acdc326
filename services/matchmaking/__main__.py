"""Run the matchmaking service: ``python -m services.matchmaking`` (configuration from the environment)."""

from libs.runtime import run_service
from services.matchmaking.service import MatchmakingService

if __name__ == "__main__":
    run_service(MatchmakingService, MatchmakingService.name)
