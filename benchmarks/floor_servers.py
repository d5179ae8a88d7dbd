"""Floor servers: the Nemo bootstrap around only the work a service cannot avoid.

Each serves the empty call of ``benchmarks.empty_server`` through the same bootstrap, but its
handler first does what the real service must do and nothing else, then answers an empty
message. Measured next to the service, a floor tells the service's own cost apart from what any
implementation of it costs on this stack (grpc.aio, asyncpg, aiohttp, one event loop).

``python -m benchmarks.floor_servers learner-read PORT`` reads L-2041-1's tutor_hint record the way
BuildContext does (the context service's repository and pool size, on the database of the
NEMO_CONTEXT_ settings in the environment).
``python -m benchmarks.floor_servers model-call PORT PROVIDER_URL`` makes the gateway
benchmark's model call with the gateway's provider client.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import grpc.aio
from google.protobuf.empty_pb2 import Empty

from benchmarks.empty_server import serve_nemo
from benchmarks.gateway import gateway_settings, model_request
from nemo_context.purposes import purpose_named
from nemo_context.repository import PostgresLearnerRepository
from nemo_context.settings import DEVELOPMENT_IDENTIFIER_KEY, ContextSettings
from nemo_core import event_loop
from nemo_core.db import create_pool
from nemo_core.telemetry import configure_telemetry
from nemo_gateway.providers.factory import build_provider

LEARNER = "L-2041-1"
PURPOSE = "tutor_hint"


async def _serve_learner_read(port: int) -> None:
    # Traced like the context service (run_service installs the SDK there), so the floor pays
    # for its server and statement spans as the service does.
    configure_telemetry("context-floor")
    settings = ContextSettings()
    # Sized as the context service sizes its pool (nemo_context.app).
    pool = await create_pool(
        settings.database_url.get_secret_value(), max_size=settings.database_pool_size
    )
    repository = PostgresLearnerRepository(pool, identifier_key=DEVELOPMENT_IDENTIFIER_KEY.encode())
    purpose = purpose_named(PURPOSE)

    async def read(request: Empty, context: grpc.aio.ServicerContext[Empty, Empty]) -> Empty:
        # As the service reads it: as of the server's clock. An empty read measures nothing.
        if await repository.read(LEARNER, purpose, datetime.now(UTC)) is None:
            raise RuntimeError(f"{LEARNER} is not visible to the context role")
        return Empty()

    await serve_nemo(port, read, cleanup=[pool.close])


async def _serve_model_call(port: int, provider_url: str) -> None:
    settings = gateway_settings(0, provider_url)
    provider = build_provider(settings)
    assert provider is not None
    model_call = model_request(settings)

    async def call(request: Empty, context: grpc.aio.ServicerContext[Empty, Empty]) -> Empty:
        await provider.complete(model_call, None)
        return Empty()

    await serve_nemo(port, call, cleanup=[provider.aclose])


def main() -> None:
    mode, port, *rest = sys.argv[1:]
    if mode == "learner-read":
        event_loop.run(_serve_learner_read(int(port)))
    elif mode == "model-call":
        event_loop.run(_serve_model_call(int(port), rest[0]))
    else:
        raise SystemExit(f"unknown floor: {mode}")


if __name__ == "__main__":
    main()
