"""Run the go rules service: ``python -m services.rules_go`` (configuration from the environment)."""

from libs.runtime import run_service
from services.rules_go.service import SERVICE_NAME, go_rules_service

if __name__ == "__main__":
    run_service(go_rules_service, SERVICE_NAME)
