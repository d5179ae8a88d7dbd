"""Run the gateway: `python -m nemo_gateway` or `nemo-gateway`."""

from __future__ import annotations

from nemo_core.server import run_service
from nemo_gateway.app import SERVICE_NAME, build
from nemo_gateway.settings import GatewaySettings


def main() -> None:
    """Serve until SIGTERM or SIGINT."""
    run_service(SERVICE_NAME, GatewaySettings, build)


if __name__ == "__main__":
    main()
