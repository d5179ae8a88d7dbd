"""Audit rows to investigate with: each names the token and where its user came from, keeps a
server-made call id beside the agent's request id, and authenticated requests refused before
they reach a tool are on record too."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb
from nemo_protos.type.v1 import user_source_pb2
from services.toolplane.tests.conftest import AgentTokens, RunningToolPlane
from services.toolplane.tests.mcp_http import modern_call, post
from services.toolplane.tests.test_servicer import call

SESSION = "S-refused-before-routing"


async def _raw(toolplane: RunningToolPlane, token: str, body: bytes, **headers: str) -> int:
    all_headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "X-Nemo12-Session-Id": SESSION,
        **headers,
    }
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.post(toolplane.mcp_url, content=body, headers=all_headers)
    return reply.status_code


@pytest.mark.parametrize(
    ("problem", "body", "headers", "status"),
    [
        ("identifier", None, {"X-Request-Id": "not a usable id"}, 400),
        ("protocol version", None, {"MCP-Protocol-Version": "1999-01-01"}, 400),
        ("batch", b"[" + json.dumps(modern_call("docs.search_docs", {})).encode() + b"]", {}, 400),
        ("body too large", b'{"x": "' + b"a" * (1024 * 1024 + 1) + b'"}', {}, 413),
    ],
)
async def test_an_authenticated_request_refused_before_routing_is_audited(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    audit_rows: Any,
    problem: str,
    body: bytes | None,
    headers: dict[str, str],
    status: int,
) -> None:
    before = {row["call_id"] for row in await audit_rows(session_id=SESSION)}
    payload = body or json.dumps(modern_call("docs.search_docs", {"query": "x"})).encode()
    assert await _raw(toolplane, tokens.learning_parent, payload, **headers) == status
    [row] = [row for row in await audit_rows(session_id=SESSION) if row["call_id"] not in before]
    assert (row["decision"], row["status"], row["error_code"]) == (
        "deny",
        "invalid",
        "VALIDATION_ERROR",
    )
    assert row["metadata"]["malformed"] == problem
    assert (row["agent_id"], row["user_id"], row["user_source"]) == (
        "learning-agent",
        "U-2041-P1",
        "token",
    )
    assert row["token_id"] == tokens.ids[0]
    # An unusable request id is not kept; the row gets a generated one.
    assert row["request_id"].startswith("REQ-")


async def test_rows_keep_a_server_made_call_id_beside_the_agents_request_id(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    headers = {"X-Request-Id": "REQ-reused"}
    replies = [
        await post(
            toolplane.mcp_url,
            modern_call("docs.search_docs", {"query": "audit"}),
            token=tokens.research,
            headers=headers,
        )
        for _ in range(2)
    ]
    over_grpc = await call(
        toolplane, tokens.research, "docs.search_docs", {"query": "audit"}, request_id="REQ-reused"
    )
    rows = await audit_rows(request_id="REQ-reused")
    call_ids = [reply.headers["x-nemo-call-id"] for reply in replies] + [over_grpc.call_id]
    assert [row["call_id"] for row in rows] == call_ids
    assert len(set(call_ids)) == 3
    assert {row["token_id"] for row in rows} == {tokens.ids[2]}
    assert {row["user_source"] for row in rows} == {"none"}


async def test_operators_read_token_source_call_and_snapshot_on_each_entry(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    async with toolplane.mcp(tokens.learning_parent, {"X-Request-Id": "REQ-listed"}) as client:
        result = await client.call_tool("learner.get_profile", {"learner_id": "L-2041-1"})
    assert not result.is_error
    await toolplane.plane.audit.flush()
    listed = await toolplane.admin_stub().ListAuditEntries(
        admin_pb.ListAuditEntriesRequest(request_id="REQ-listed"), timeout=10
    )
    [entry] = listed.entries
    assert entry.token_id == tokens.ids[0]
    assert entry.user_source == user_source_pb2.USER_SOURCE_TOKEN
    assert entry.call_id
    assert entry.input_ref.startswith("ai-context/")
