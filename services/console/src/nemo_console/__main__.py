"""Run the console: `python -m nemo_console` or `nemo-console`."""

from __future__ import annotations

import uvicorn

from nemo_console.app import create_app
from nemo_console.settings import ConsoleSettings
from nemo_core.logs import configure_logging
from nemo_core.settings import load_settings
from nemo_core.telemetry import configure_telemetry

SERVICE_NAME = "console"


def main() -> None:
    """Serve until SIGTERM or SIGINT (uvicorn finishes the requests in flight first)."""
    configure_logging(SERVICE_NAME)
    settings = load_settings(ConsoleSettings)
    configure_logging(SERVICE_NAME, settings.log_level)
    configure_telemetry(SERVICE_NAME)
    host, _, port = settings.listen_address.rpartition(":")
    uvicorn.run(
        create_app(settings),
        host=host.strip("[]"),
        port=int(port),
        log_config=None,
        access_log=False,
        proxy_headers=False,
        timeout_graceful_shutdown=int(settings.grace_period_seconds),
        server_header=False,
    )


if __name__ == "__main__":
    main()
