"""Limits across two tool plane processes on one database: an agent's calls, a user's calls and
an address's failed authentications are counted once for the sum of both replicas, however the
calls are spread over them."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from pathlib import Path

import asyncpg
import httpx

from services.toolplane.tests.conftest import AgentTokens
from services.toolplane.tests.mcp_http import modern_call, outcome
from services.toolplane.tests.processes import toolplane_process

#: Slow enough that nothing refills while a test runs.
STILL = "0.0001"
AGENT_BURST, USER_BURST, AUTH_FAILURES = 9, 4, 5
SEARCH = modern_call("docs.search_docs", {"query": "audit"})


def _spreads() -> list[list[int]]:
    """Which replica each of 40 requests goes to: alternating, all but one on one replica, and
    random orders."""
    rng = random.Random(15)  # noqa: S311  test data, not a secret
    return [
        [n % 2 for n in range(40)],
        [0] + [1] * 39,
        *([rng.randrange(2) for _ in range(40)] for _ in range(2)),
    ]


async def test_limits_hold_for_the_sum_of_two_replicas(
    toolplane_dsn: str, tokens: AgentTokens, owner: asyncpg.Connection, tmp_path: Path
) -> None:
    limits = {
        "agent_calls_per_second": STILL,
        "agent_call_burst": str(AGENT_BURST),
        "user_calls_per_second": STILL,
        "user_call_burst": str(USER_BURST),
        "auth_failures_per_minute": str(AUTH_FAILURES),
        # 80 concurrent calls queue for the pools' connections on a busy machine: past the
        # default half second a replica would fall back to its own buckets (tested in
        # test_calls), and this test is about the shared ones.
        "limits_timeout_seconds": "30",
    }
    async with contextlib.AsyncExitStack() as stack:
        urls = [
            (await stack.enter_async_context(
                toolplane_process(toolplane_dsn, tmp_path / f"replica-{n}.log", **limits)
            ))[1]
            for n in range(2)
        ]  # fmt: skip
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
        for spread in _spreads():
            await owner.execute("DELETE FROM toolplane.rate_buckets")
            # Failures first and alone: their bucket refills a token every 60 / AUTH_FAILURES s.
            failures = await asyncio.gather(
                *(outcome(http, urls[n], SEARCH, "nemo_at_guess") for n in spread)
            )
            # Concurrently, each request to the replica the spread names.
            research, parent = await asyncio.gather(
                asyncio.gather(*(outcome(http, urls[n], SEARCH, tokens.research) for n in spread)),
                asyncio.gather(
                    *(outcome(http, urls[n], SEARCH, tokens.learning_parent) for n in spread)
                ),
            )
            assert Counter(failures) == {"401": AUTH_FAILURES, "429": 40 - AUTH_FAILURES}, spread
            assert Counter(research) == {
                "ok": AGENT_BURST,
                "RATE_LIMITED/agent on *": 40 - AGENT_BURST,
            }, spread
            assert Counter(parent) == {
                "ok": USER_BURST,
                "RATE_LIMITED/agent+user on *": 40 - USER_BURST,
            }, spread
