"""Limits and failing dependencies: per-agent rate limit, repeated failed authentications, and an
unreachable context service."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from nemo.toolplane.v1 import toolplane_service_pb2 as pb
from nemo_core.errors import error_details
from nemo_testing.ports import free_port
from nemo_toolplane.ratelimit import KeyedRateLimiter

from .conftest import AgentTokens, StartToolPlane
from .mcp_http import modern_call, post


async def test_an_agent_over_its_rate_gets_rate_limited(
    start_toolplane: StartToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    plane = await start_toolplane(agent_calls_per_second=0.01, agent_call_burst=2)
    headers = {"X-Nemo12-Session-Id": "S-rate-limit"}
    async with plane.mcp(tokens.research, headers) as client:
        results = [await client.call_tool("docs.search_docs", {"query": "audit"}) for _ in range(3)]
    async with plane.mcp(tokens.engineering) as other_agent:
        unaffected = await other_agent.call_tool("docs.search_docs", {"query": "audit"})
    assert [r.is_error for r in results] == [False, False, True]
    error = results[2].structured_content["error"]
    assert (error["code"], error["retryable"]) == ("RATE_LIMITED", True)
    assert error["details"]["retry_after_seconds"] > 0
    assert not unaffected.is_error
    rows = await audit_rows(session_id="S-rate-limit", plane=plane)
    assert [(r["status"], r["error_code"]) for r in rows][-1] == ("denied", "RATE_LIMITED")


async def test_repeated_failed_authentications_block_the_address(
    start_toolplane: StartToolPlane, tokens: AgentTokens
) -> None:
    plane = await start_toolplane(auth_failures_per_minute=2)
    call = modern_call("docs.search_docs", {"query": "audit"})
    assert (await post(plane.mcp_url, call, token=tokens.research)).status_code == 200
    for _ in range(2):
        assert (await post(plane.mcp_url, call, token="nemo_at_wrong")).status_code == 401
    blocked = await post(plane.mcp_url, call, token=tokens.research)
    assert blocked.status_code == 429
    assert int(blocked.headers["retry-after"]) >= 1
    with pytest.raises(grpc.aio.AioRpcError) as over_grpc:
        await plane.tools_stub().ListTools(
            pb.ListToolsRequest(),
            metadata=(("authorization", f"Bearer {tokens.research}"),),
            timeout=10,
        )
    assert over_grpc.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_details(over_grpc.value).reason == "AUTHENTICATION_RATE_LIMITED"


async def test_an_unreachable_context_service_is_a_retryable_dependency_error(
    start_toolplane: StartToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    plane = await start_toolplane(
        context_address=f"127.0.0.1:{free_port()}", context_timeout_seconds=2
    )
    headers = {"X-Request-Id": "REQ-context-down"}
    async with plane.mcp(tokens.learning_parent, headers) as client:
        result = await client.call_tool("learner.get_profile", {"learner_id": "L-1"})
        docs = await client.call_tool("docs.search_docs", {"query": "audit"})
    error = result.structured_content["error"]
    assert (error["code"], error["retryable"]) == ("DEPENDENCY_ERROR", True)
    assert not docs.is_error  # tools that need no context service keep working
    rows = await audit_rows(request_id="REQ-context-down", plane=plane)
    assert [(r["tool_id"], r["status"], r["error_code"]) for r in rows] == [
        ("learner.get_profile:v1", "error", "DEPENDENCY_ERROR"),
        ("docs.search_docs:v1", "success", None),
    ]


def test_token_buckets_refill_at_their_rate() -> None:
    now = [0.0]
    limiter = KeyedRateLimiter(2, 3, clock=lambda: now[0])
    assert [limiter.acquire("a") for _ in range(4)] == [True, True, True, False]
    assert limiter.acquire("b")
    assert limiter.retry_after("a") == pytest.approx(0.5)
    now[0] = 0.5
    assert limiter.acquire("a")
    assert not limiter.acquire("a")
    now[0] = 100
    assert [limiter.acquire("a") for _ in range(4)] == [True, True, True, False]


def test_idle_buckets_are_forgotten_to_bound_memory() -> None:
    now = [0.0]
    limiter = KeyedRateLimiter(1, 1, max_keys=2, clock=lambda: now[0])
    limiter.acquire("a")
    limiter.acquire("b")
    now[0] = 10
    limiter.acquire("c")
    assert not limiter.exhausted("a")  # forgotten, so full again
    assert len(limiter._buckets) <= 3
