"""Run the fairness service: ``python -m services.fairness`` (configuration from the environment)."""

from libs.runtime import run_service
from services.fairness.service import FairnessService

if __name__ == "__main__":
    run_service(FairnessService, FairnessService.name)
