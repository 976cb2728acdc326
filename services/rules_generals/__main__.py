"""Run the Game of the Generals rules service: ``python -m services.rules_generals`` (configuration from the
environment)."""

from libs.runtime import run_service
from services.rules_generals.service import SERVICE_NAME, generals_rules_service

if __name__ == "__main__":
    run_service(generals_rules_service, SERVICE_NAME)
