"""Run the clock service: ``python -m services.clock`` (configuration from the environment)."""

from libs.runtime import run_service
from services.clock.service import ClockService

if __name__ == "__main__":
    run_service(ClockService, ClockService.name)
