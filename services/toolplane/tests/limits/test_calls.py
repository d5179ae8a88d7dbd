"""Limits and failing dependencies: call limits per agent, per user and per tool, repeated failed
authentications, a limits store that does not answer, and an unreachable context service (the
buckets themselves are in test_shared and test_local; the limits across two processes in
test_replicas, a store that cannot be reached in test_unreachable)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import grpc
import pytest
from mcp.shared.exceptions import MCPError

from nemo_core.db import connect
from nemo_core.errors import error_details
from nemo_protos.toolplane.v1 import tool_pb2
from nemo_protos.toolplane.v1 import toolplane_service_pb2 as pb
from nemo_testing.ports import free_port
from nemo_toolplane.tokens import issue_token
from services.toolplane.tests.conftest import AgentTokens, RunningToolPlane, StartToolPlane
from services.toolplane.tests.mcp_http import error_envelope, modern_call, post


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


async def _search(plane: RunningToolPlane, token: str, **headers: str) -> dict[str, Any] | None:
    """One docs search; the error envelope's error when it failed, else None."""
    async with plane.mcp(token, headers) as client:
        result = await client.call_tool("docs.search_docs", {"query": "audit"})
    return error_envelope(result)["error"] if result.is_error else None


async def test_each_user_of_an_agent_has_a_limit_of_their_own(
    start_toolplane: StartToolPlane, tokens: AgentTokens, owner: asyncpg.Connection
) -> None:
    plane = await start_toolplane(
        agent_calls_per_second=0.001,
        agent_call_burst=4,
        user_calls_per_second=0.001,
        user_call_burst=2,
    )
    other = await issue_token(owner, "learning-agent", user_id="U-2041-P2", label="tests")
    try:
        first_user = [await _search(plane, tokens.learning_parent) for _ in range(5)]
        second_user = [await _search(plane, other.token) for _ in range(2)]
        nobody = await _search(plane, tokens.learning_unbound)
    finally:
        await owner.execute("DELETE FROM toolplane.agent_tokens WHERE id = $1", other.token_id)
    assert first_user[:2] == [None, None]
    for refused in first_user[2:]:
        assert refused is not None
        assert (refused["code"], refused["details"]["limit"]) == ("RATE_LIMITED", "agent+user on *")
    # The first user's refused calls spent nothing of the agent's four: two are left for the
    # second user, and then the agent is out for everyone, a call made for nobody too.
    assert second_user == [None, None]
    assert nobody is not None
    assert (nobody["code"], nobody["details"]["limit"]) == ("RATE_LIMITED", "agent on *")


async def test_a_tool_limit_counts_the_calls_of_its_tools_only(
    start_toolplane: StartToolPlane, tokens: AgentTokens
) -> None:
    limit = {"tools": "docs.get_doc", "per": ["agent", "tool"], "per_second": 0.001, "burst": 1}
    plane = await start_toolplane(tool_call_limits=[limit])
    async with plane.mcp(tokens.research) as client:
        pages = [
            await client.call_tool("docs.get_doc", {"path": "toolplane/audit"}) for _ in range(2)
        ]
        search = await client.call_tool("docs.search_docs", {"query": "audit"})
    async with plane.mcp(tokens.engineering) as other_agent:
        other = await other_agent.call_tool("docs.get_doc", {"path": "toolplane/audit"})
    assert [page.is_error for page in pages] == [False, True]
    refused = error_envelope(pages[1])["error"]
    assert (refused["code"], refused["details"]["limit"]) == (
        "RATE_LIMITED",
        "agent+tool on docs.get_doc",
    )
    assert not search.is_error
    assert not other.is_error


@asynccontextmanager
async def _limits_store_locked(owner_dsn: str) -> AsyncIterator[None]:
    """The buckets' table held by another transaction: every decision waits on it."""
    locker = await connect(owner_dsn)
    try:
        async with locker.transaction():
            await locker.execute("LOCK TABLE toolplane.rate_buckets IN ACCESS EXCLUSIVE MODE")
            yield
    finally:
        await locker.close()


async def test_without_the_limits_store_reads_are_limited_by_the_replica_and_writes_refused(
    start_toolplane: StartToolPlane,
    tokens: AgentTokens,
    owner: asyncpg.Connection,
    owner_dsn: str,
    audit_rows: Any,
) -> None:
    plane = await start_toolplane(
        agent_calls_per_second=0.001, agent_call_burst=3, limits_timeout_seconds=0.2
    )
    write = {"application_id": "nemo12-foundry", "status": "maintenance", "reason": "outage"}
    async with _limits_store_locked(owner_dsn):
        reads = [await _search(plane, tokens.research, **{"X-Request-Id": "REQ-lim-read"})
                 for _ in range(4)]  # fmt: skip
        async with plane.mcp(tokens.engineering, {"X-Request-Id": "REQ-lim-write"}) as client:
            written = await client.call_tool("application.set_status", write)
        failed_authentication = await post(
            plane.mcp_url, modern_call("docs.search_docs", {"query": "audit"}), token="nemo_at_x"
        )
    assert reads[:3] == [None, None, None]
    assert reads[3] is not None
    assert reads[3]["code"] == "RATE_LIMITED"
    refused = error_envelope(written)["error"]
    assert (refused["code"], refused["retryable"]) == ("DEPENDENCY_ERROR", True)
    assert failed_authentication.status_code == 401
    # Nothing of the write ran: no approval was even requested.
    assert not await owner.fetchval(
        "SELECT count(*) FROM toolplane.approvals WHERE arguments_json LIKE '%outage%'"
    )
    rows = await audit_rows(request_id="REQ-lim-read", plane=plane)
    assert [r["metadata"].get("limits") for r in rows] == ["local"] * 4
    (row,) = await audit_rows(request_id="REQ-lim-write", plane=plane)
    assert (row["status"], row["error_code"], row["metadata"]["limits"]) == (
        "error",
        "DEPENDENCY_ERROR",
        "unavailable",
    )
    # Once the store answers again, it decides: its agent bucket is still full.
    assert await _search(plane, tokens.research) is None
