"""Run the context service: `python -m nemo_context` or `nemo-context`."""

from __future__ import annotations

from nemo_context.app import SERVICE_NAME, build
from nemo_context.settings import ContextSettings
from nemo_core.server import run_service


def main() -> None:
    """Serve until SIGTERM or SIGINT."""
    run_service(SERVICE_NAME, ContextSettings, build)


if __name__ == "__main__":
    main()
