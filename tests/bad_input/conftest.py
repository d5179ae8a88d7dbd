"""One stack of three service processes for the whole corpus, and what it must not change."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.stack import Stack, start_stack

from .ledger import Ledger, row_counts


@pytest.fixture(scope="package")
async def bad_input_stack(
    owner_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    stack = await start_stack(
        owner_dsn,
        tmp_path_factory.mktemp("bad-input-stack"),
        # The corpus sends more tool calls in a burst than a real agent may; the rate limiter is
        # not what these cases test.
        extra_env={
            "toolplane": {
                "NEMO_TOOLPLANE_AGENT_CALL_BURST": "1000",
                "NEMO_TOOLPLANE_USER_CALL_BURST": "1000",
                "NEMO_TOOLPLANE_TOOL_CALL_LIMITS": "[]",
            }
        },
    )
    try:
        yield stack
    finally:
        await stack.stop()


@pytest.fixture(scope="package")
async def ledger(bad_input_stack: Stack, owner_dsn: str) -> Ledger:
    return Ledger(
        pids={name: service.pid for name, service in bad_input_stack.services.items()},
        counts=await row_counts(owner_dsn),
    )
