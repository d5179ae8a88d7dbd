"""Fixtures: the gateway served on loopback, talking to a scripted provider server (a real HTTP
server speaking the OpenAI and Anthropic wire formats) and, for learner prompts and chat, to the
real context service on the session's database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc.aio
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from nemo_core.server import Server
from nemo_core.settings import DEFAULT_CALLER_TOKEN_METADATA_KEY
from nemo_core.telemetry import attach_span_exporter, configure_telemetry
from nemo_gateway.app import SERVICE_NAME, build
from nemo_gateway.settings import GatewaySettings
from nemo_protos.gateway.v1 import gateway_service_pb2_grpc
from nemo_testing.providers import ScriptedProvider

from .gateway_testing import (
    CONTEXT_CLIENT_TOKEN,
    INTERNAL_TOKEN,
    LLM_KEY,
    Gateway,
    StartGateway,
    start_context_service,
)


@pytest.fixture(scope="session")
async def scripted_server() -> AsyncIterator[ScriptedProvider]:
    async with ScriptedProvider() as server:
        yield server


@pytest.fixture
def provider(scripted_server: ScriptedProvider) -> ScriptedProvider:
    """The scripted provider with an empty script and log."""
    scripted_server.reset()
    return scripted_server


@pytest.fixture
async def start_gateway(provider: ScriptedProvider) -> AsyncIterator[StartGateway]:
    """Start gateways talking to the scripted provider; settings can be overridden."""
    started: list[tuple[Server, grpc.aio.Channel]] = []

    async def start(**overrides: Any) -> Gateway:
        wire = overrides.get("provider", "openai")
        values: dict[str, Any] = {
            "listen_address": "127.0.0.1:0",
            "caller_tokens": {"internal": INTERNAL_TOKEN},
            "client_token": CONTEXT_CLIENT_TOKEN,
            # Nothing listens there: tests that need the context service pass its address.
            "context_address": "127.0.0.1:9",
            "provider": wire,
            "llm_base_url": provider.anthropic_base_url
            if wire == "anthropic"
            else provider.openai_base_url,
            "llm_api_key": LLM_KEY,
            "retry_backoff_seconds": 0.01,
            "retry_backoff_max_seconds": 0.05,
            "fallback_reserve_seconds": 0.05,
            "grace_period_seconds": 0.5,
            "log_level": "WARNING",
        }
        settings = GatewaySettings(**(values | overrides))
        server = Server(SERVICE_NAME, settings, await build(settings))
        port = await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        started.append((server, channel))
        return Gateway(
            server,
            settings,
            gateway_service_pb2_grpc.GatewayServiceStub(channel),
            ((DEFAULT_CALLER_TOKEN_METADATA_KEY, INTERNAL_TOKEN),),
        )

    yield start
    for server, channel in started:
        await channel.close()
        await server.shutdown()


@pytest.fixture(scope="session")
async def context_address(
    context_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """The real context service, in this process, on the session's database."""
    async with start_context_service(context_dsn, tmp_path_factory.mktemp("context")) as address:
        yield address


@pytest.fixture(scope="session")
def spans() -> InMemorySpanExporter:
    """Every span finished in this test process."""
    configure_telemetry("gateway-tests")
    exporter = InMemorySpanExporter()
    attach_span_exporter(exporter)
    return exporter
