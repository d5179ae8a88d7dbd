"""Fixtures of the whole-system tests: the three services as separate processes.

- ``start_stack`` (function scope): a factory of fresh stacks, each stopped at the end of the
  test; for fault tests that stop, kill or starve a service.
- ``stack`` (session scope, started on first use): one stack shared by the journeys (and other
  tests that only call it), with the scripted model provider and the OTLP receiver below.
- ``scripted_provider`` and ``otlp_receiver`` (session scope): the shared stack's model API and
  telemetry receiver; tests reset the provider's script before using it.
- ``fresh_otlp_receiver``: a receiver for a stack the test starts itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from nemo_testing.otlp import OtlpReceiver
from nemo_testing.providers import ScriptedProvider
from tests.stack import Stack, StackFactory
from tests.stack import start_stack as launch_stack


@pytest.fixture(scope="session")
async def scripted_provider() -> AsyncIterator[ScriptedProvider]:
    """The model API of the shared stack (OpenAI wire format)."""
    async with ScriptedProvider() as provider:
        yield provider


@pytest.fixture(scope="session")
async def otlp_receiver() -> AsyncIterator[OtlpReceiver]:
    """Traces and metrics exported by the shared stack's processes."""
    async with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture
async def fresh_otlp_receiver() -> AsyncIterator[OtlpReceiver]:
    """An OTLP receiver of the test's own, for the telemetry of a stack it starts."""
    async with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="session")
async def stack(
    owner_dsn: str,
    tmp_path_factory: pytest.TempPathFactory,
    scripted_provider: ScriptedProvider,
    otlp_receiver: OtlpReceiver,
) -> AsyncIterator[Stack]:
    """One running stack for the session, on the session database."""
    running = await launch_stack(
        owner_dsn,
        tmp_path_factory.mktemp("stack"),
        provider_base_url=scripted_provider.openai_base_url,
        otlp_endpoint=otlp_receiver.endpoint,
    )
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def start_stack(owner_dsn: str, tmp_path: Path) -> AsyncIterator[StackFactory]:
    """Start fresh stacks (default database: the session's); all stop when the test ends."""
    started: list[Stack] = []

    async def start(dsn: str | None = None, **options: Any) -> Stack:
        running = await launch_stack(
            dsn or owner_dsn, tmp_path / f"stack-{len(started)}", **options
        )
        started.append(running)
        return running

    try:
        yield start
    finally:
        for running in started:
            await running.stop()
