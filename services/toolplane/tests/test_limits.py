"""Limits and failing dependencies: per-agent rate limit, repeated failed authentications, and an
unreachable context service (the token buckets themselves are in test_ratelimit)."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from mcp.shared.exceptions import MCPError

from nemo_core.errors import error_details
from nemo_protos.toolplane.v1 import tool_pb2
from nemo_protos.toolplane.v1 import toolplane_service_pb2 as pb
from nemo_testing.ports import free_port

from .conftest import AgentTokens, StartToolPlane
from .mcp_http import error_envelope, modern_call, post


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
    error = error_envelope(results[2])["error"]
    assert (error["code"], error["retryable"]) == ("RATE_LIMITED", True)
    assert error["details"]["retry_after_seconds"] > 0
    assert not unaffected.is_error
    rows = await audit_rows(session_id="S-rate-limit", plane=plane)
    assert [(r["status"], r["error_code"]) for r in rows][-1] == ("denied", "RATE_LIMITED")


async def test_unknown_tool_names_count_against_the_rate_too(
    start_toolplane: StartToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    # Guessing tool names must cost an agent its rate like any other call.
    plane = await start_toolplane(agent_calls_per_second=0.01, agent_call_burst=2)
    headers = {"X-Nemo12-Session-Id": "S-rate-unknown"}
    async with plane.mcp(tokens.research, headers) as client:
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("nope.first_guess", {})
        assert unknown.value.code == -32602
        assert not (await client.call_tool("docs.search_docs", {"query": "audit"})).is_error
        guesses = [await client.call_tool(f"nope.guess_{n}", {}) for n in range(3)]
    for guess in guesses:
        error = error_envelope(guess)["error"]
        assert (error["code"], error["retryable"]) == ("RATE_LIMITED", True)
    over_grpc = await plane.tools_stub().CallTool(
        pb.CallToolRequest(tool="nope.over_grpc"),
        metadata=(("authorization", f"Bearer {tokens.research}"),),
        timeout=10,
    )
    assert (over_grpc.tool_id, over_grpc.error.code) == ("", tool_pb2.ERROR_CODE_RATE_LIMITED)
    rows = await audit_rows(session_id="S-rate-unknown", plane=plane)
    assert [(r["tool_id"], r["status"], r["error_code"]) for r in rows] == [
        ("nope.first_guess", "not_found", "RESOURCE_NOT_FOUND"),
        ("docs.search_docs:v1", "success", None),
        *[(f"nope.guess_{n}", "denied", "RATE_LIMITED") for n in range(3)],
    ]


async def test_repeated_failed_authentications_block_the_address(
    start_toolplane: StartToolPlane, tokens: AgentTokens
) -> None:
    plane = await start_toolplane(auth_failures_per_minute=2)
    call = modern_call("docs.search_docs", {"query": "audit"})
    assert (await post(plane.mcp_url, call, token=tokens.research)).status_code == 200
    for _ in range(2):
        assert (await post(plane.mcp_url, call, token="nemo_at_wrong")).status_code == 401
    # Invalid tokens from the address are refused without another chance...
    for token in ("nemo_at_wrong", "nemo_at_another_guess", None):
        blocked = await post(plane.mcp_url, call, token=token)
        assert blocked.status_code == 429
        assert int(blocked.headers["retry-after"]) >= 1
    no_agent = (("authorization", "Bearer nemo_at_wrong"),)
    with pytest.raises(grpc.aio.AioRpcError) as over_grpc:
        await plane.tools_stub().ListTools(pb.ListToolsRequest(), metadata=no_agent, timeout=10)
    assert over_grpc.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_details(over_grpc.value).reason == "AUTHENTICATION_RATE_LIMITED"
    # ...but a valid token from the same address (agents behind one egress) is not locked out.
    assert (await post(plane.mcp_url, call, token=tokens.research)).status_code == 200
    listed = await plane.tools_stub().ListTools(
        pb.ListToolsRequest(),
        metadata=(("authorization", f"Bearer {tokens.research}"),),
        timeout=10,
    )
    assert listed.tools


async def test_an_unreachable_context_service_is_a_retryable_dependency_error(
    start_toolplane: StartToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    plane = await start_toolplane(
        context_address=f"127.0.0.1:{free_port()}", context_timeout_seconds=2
    )
    headers = {"X-Request-Id": "REQ-context-down"}
    async with plane.mcp(tokens.learning_parent, headers) as client:
        result = await client.call_tool("learner.get_profile", {"learner_id": "L-2041-1"})
        docs = await client.call_tool("docs.search_docs", {"query": "audit"})
    error = error_envelope(result)["error"]
    assert (error["code"], error["retryable"]) == ("DEPENDENCY_ERROR", True)
    assert not docs.is_error  # tools that need no context service keep working
    rows = await audit_rows(request_id="REQ-context-down", plane=plane)
    assert [(r["tool_id"], r["status"], r["error_code"]) for r in rows] == [
        ("learner.get_profile:v1", "error", "DEPENDENCY_ERROR"),
        ("docs.search_docs:v1", "success", None),
    ]
