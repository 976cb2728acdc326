"""Run the chess rules service: ``python -m services.rules_chess`` (configuration from the environment)."""

from libs.runtime import run_service
from services.rules_chess.service import SERVICE_NAME, chess_rules_service

if __name__ == "__main__":
    run_service(chess_rules_service, SERVICE_NAME)
