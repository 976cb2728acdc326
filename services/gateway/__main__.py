"""Run the gateway service: ``python -m services.gateway`` (configuration from the environment)."""

from libs.runtime import run_service
from services.gateway.service import GatewayService

if __name__ == "__main__":
    run_service(GatewayService, GatewayService.name)
