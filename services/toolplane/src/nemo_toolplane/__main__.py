"""Run the tool plane: `python -m nemo_toolplane` or `nemo-toolplane`."""

from __future__ import annotations

from nemo_core.server import run_service
from nemo_toolplane.app import SERVICE_NAME, build
from nemo_toolplane.settings import ToolPlaneSettings


def main() -> None:
    """Serve until SIGTERM or SIGINT."""
    run_service(SERVICE_NAME, ToolPlaneSettings, build)


if __name__ == "__main__":
    main()
