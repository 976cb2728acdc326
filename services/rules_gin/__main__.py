"""Run the gin rummy rules service: ``python -m services.rules_gin`` (configuration from the environment)."""

from libs.runtime import run_service
from services.rules_gin.service import SERVICE_NAME, gin_rules_service

if __name__ == "__main__":
    run_service(gin_rules_service, SERVICE_NAME)
