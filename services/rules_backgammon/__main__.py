"""Run the backgammon rules service: ``python -m services.rules_backgammon`` (configuration from the
environment)."""

from libs.runtime import run_service
from services.rules_backgammon.service import SERVICE_NAME, backgammon_rules_service

if __name__ == "__main__":
    run_service(backgammon_rules_service, SERVICE_NAME)
