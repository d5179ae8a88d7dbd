"""Fixtures: echo servers on loopback ephemeral ports and an in-memory span exporter."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from nemo_core.server import Server
from nemo_core.telemetry import attach_span_exporter, configure_telemetry

TESTS_DIR = Path(__file__).parent
# The echo service module is imported by the tests and run with ``python -m`` by process tests.
sys.path.insert(0, str(TESTS_DIR))

from nemo_core_echo import NAME, TOKENS, EchoSettings, Running, StartEcho, build_setup  # noqa: E402


@pytest.fixture
async def start_echo() -> AsyncIterator[StartEcho]:
    """Start echo servers with settings overrides; all are shut down after the test."""
    started: list[Server] = []

    async def start(**overrides: Any) -> Running:
        values: dict[str, Any] = {"caller_tokens": TOKENS, "grace_period_seconds": 1.0}
        settings = EchoSettings(**(values | overrides))
        attempts: Counter[str] = Counter()
        server = Server(NAME, settings, build_setup(settings, attempts))
        port = await server.start()
        started.append(server)
        return Running(server, settings, f"127.0.0.1:{port}", attempts)

    yield start
    for server in started:
        await server.shutdown()


@pytest.fixture
async def echo(start_echo: StartEcho) -> Running:
    return await start_echo()


@pytest.fixture(scope="session")
def spans() -> InMemorySpanExporter:
    """Every span finished in this test process (the provider can be set only once)."""
    configure_telemetry("nemo-core-tests")
    exporter = InMemorySpanExporter()
    attach_span_exporter(exporter)
    return exporter
