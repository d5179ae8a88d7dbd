"""The MCP edge as clients meet it: HTTP-level checks with raw requests, and the protocol with the
official MCP client (2026-07-28 by discovery, and the 2025-11-25 handshake)."""

from __future__ import annotations

import logging
import re
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services.toolplane.tests.conftest import (
    AgentTokens,
    RunningToolPlane,
    StartToolPlane,
    rules_change,
)
from services.toolplane.tests.mcp_http import MODERN, error_envelope, modern_call, post


async def test_health_is_open(toolplane: RunningToolPlane) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.get(toolplane.mcp_url.removesuffix("/mcp") + "/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_a_missing_or_unknown_token_is_401_with_a_bearer_challenge(
    toolplane: RunningToolPlane, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="nemo_toolplane.mcp.endpoint")
    missing = await post(toolplane.mcp_url, modern_call("docs.search_docs", {"query": "x"}))
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer ")
    assert "invalid_token" not in missing.headers["www-authenticate"]

    unknown = await post(
        toolplane.mcp_url, modern_call("docs.search_docs", {"query": "x"}), token="nemo_at_guess"
    )
    assert unknown.status_code == 401
    assert 'error="invalid_token"' in unknown.headers["www-authenticate"]
    problems = [r.__dict__.get("problem") for r in caplog.records if "refused" in r.getMessage()]
    assert problems == [
        "a bearer token is required",
        "the agent token is unknown, revoked or expired",
    ]
    assert all("nemo_at_guess" not in r.getMessage() for r in caplog.records)


async def test_revoked_token_is_refused(toolplane: RunningToolPlane, owner: Any) -> None:
    from nemo_toolplane.tokens import issue_token, revoke_token

    issued = await issue_token(owner, "research-agent", label="tests")
    call = modern_call("docs.search_docs", {"query": "audit"})
    assert (await post(toolplane.mcp_url, call, token=issued.token)).status_code == 200
    async with rules_change(toolplane):
        await revoke_token(owner, issued.token_id)
    assert (await post(toolplane.mcp_url, call, token=issued.token)).status_code == 401


async def test_an_origin_not_allowed_is_403(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    call = modern_call("docs.search_docs", {"query": "audit"})
    response = await post(
        toolplane.mcp_url, call, token=tokens.research, headers={"Origin": "https://evil.example"}
    )
    assert response.status_code == 403
    assert (await post(toolplane.mcp_url, call, token=tokens.research)).status_code == 200


async def test_an_allowed_origin_passes(
    start_toolplane: StartToolPlane, tokens: AgentTokens
) -> None:
    plane = await start_toolplane(allowed_origins=["https://console.nemo.test"])
    call = modern_call("docs.search_docs", {"query": "audit"})
    allowed = await post(
        plane.mcp_url, call, token=tokens.research, headers={"Origin": "https://console.nemo.test"}
    )
    assert allowed.status_code == 200
    other = await post(
        plane.mcp_url, call, token=tokens.research, headers={"Origin": "http://localhost:3000"}
    )
    assert other.status_code == 403


async def test_an_unsupported_protocol_version_is_400(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    response = await post(
        toolplane.mcp_url,
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        token=tokens.research,
        headers={"MCP-Protocol-Version": "1999-01-01"},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"]["requested"] == "1999-01-01"
    assert "2025-11-25" in error["data"]["supported"]
    assert MODERN in error["data"]["supported"]


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_get_and_delete_are_405(
    toolplane: RunningToolPlane, tokens: AgentTokens, method: str
) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.request(
            method,
            toolplane.mcp_url,
            headers={"Authorization": f"Bearer {tokens.research}", "Accept": "text/event-stream"},
        )
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


async def test_one_message_per_post_and_notifications_are_202(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    batch = [modern_call("docs.search_docs", {"query": "a"}, request_id=i) for i in (1, 2)]
    rejected = await post(toolplane.mcp_url, batch, token=tokens.research)
    assert rejected.status_code == 400
    assert rejected.json()["error"]["code"] == -32600

    too_large = await post(
        toolplane.mcp_url,
        modern_call("docs.search_docs", {"query": "a" * (1024 * 1024)}),
        token=tokens.research,
    )
    assert too_large.status_code == 413

    notification = await post(
        toolplane.mcp_url,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        token=tokens.research,
        headers={"MCP-Protocol-Version": "2025-11-25"},
    )
    assert notification.status_code == 202


async def test_request_id_is_echoed_or_assigned(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    call = modern_call("docs.search_docs", {"query": "audit"})
    given = await post(
        toolplane.mcp_url, call, token=tokens.research, headers={"X-Request-Id": "REQ-from-test-1"}
    )
    assert given.headers["x-request-id"] == "REQ-from-test-1"
    assigned = await post(toolplane.mcp_url, call, token=tokens.research)
    assert re.fullmatch(r"REQ-[0-9a-f-]{36}", assigned.headers["x-request-id"])
    invalid = await post(
        toolplane.mcp_url, call, token=tokens.research, headers={"X-Request-Id": "x" * 200}
    )
    assert invalid.status_code == 400


async def test_unknown_tool_is_a_json_rpc_invalid_params_error_and_is_audited(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    async with toolplane.mcp(tokens.research, {"X-Request-Id": "REQ-unknown-tool"}) as client:
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("learner.delete_everything", {})
    assert unknown.value.code == -32602
    [row] = await audit_rows(request_id="REQ-unknown-tool")
    assert (row["tool_id"], row["decision"], row["status"], row["error_code"]) == (
        "learner.delete_everything",
        "deny",
        "not_found",
        "RESOURCE_NOT_FOUND",
    )


async def test_invalid_arguments_are_an_is_error_result_with_the_envelope(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    async with toolplane.mcp(tokens.research, {"X-Request-Id": "REQ-invalid-args"}) as client:
        result = await client.call_tool("docs.search_docs", {"query": "audit", "limit": 11})
    envelope = error_envelope(result)
    assert envelope["success"] is False
    assert envelope["error"]["code"] == "VALIDATION_ERROR"
    assert envelope["error"]["retryable"] is False
    assert [e["field"] for e in envelope["error"]["details"]["errors"]] == ["limit"]
    [row] = await audit_rows(request_id="REQ-invalid-args")
    assert (row["tool_id"], row["decision"], row["status"], row["error_code"]) == (
        "docs.search_docs:v1",
        "deny",
        "invalid",
        "VALIDATION_ERROR",
    )


LEGACY = {"MCP-Protocol-Version": "2025-11-25"}


def _legacy_call(params: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}


@pytest.mark.parametrize(
    ("case", "body", "headers", "tool_id"),
    [
        # Refused by the SDK before any handler runs: arguments not an object, name not a string.
        ("string-args", modern_call("docs.search_docs", "x"), {}, "docs.search_docs:v1"),
        ("array-args", modern_call("docs.search_docs", [1, 2]), {}, "docs.search_docs:v1"),
        (
            "legacy-array-args",
            _legacy_call({"name": "docs.search_docs", "arguments": ["x"]}),
            LEGACY,
            "docs.search_docs:v1",
        ),
        ("number-name", _legacy_call({"name": 7, "arguments": {}}), LEGACY, None),
        ("no-name", _legacy_call({}), LEGACY, None),
        # Refused here, by the envelope check.
        ("array-params", _legacy_call(["docs.search_docs"]), LEGACY, None),
        # A notification cannot be answered, but it is still a call attempt.
        (
            "notification",
            {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "docs.search_docs"}},
            LEGACY,
            "docs.search_docs:v1",
        ),
    ],
)
async def test_a_malformed_tool_call_is_refused_and_still_audited(
    case: str,
    body: dict[str, Any],
    headers: dict[str, str],
    tool_id: str | None,
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    audit_rows: Any,
) -> None:
    request_id = f"REQ-malformed-{case}"
    response = await post(
        toolplane.mcp_url,
        body,
        token=tokens.research,
        headers={**headers, "X-Request-Id": request_id},
    )
    if case == "notification":
        assert response.status_code == 202
    else:
        assert response.json()["error"]["code"] in (-32602, -32600)
    [row] = await audit_rows(request_id=request_id)
    assert (row["agent_id"], row["decision"], row["status"], row["error_code"]) == (
        "research-agent",
        "deny",
        "invalid",
        "VALIDATION_ERROR",
    )
    # No name, or one that is not a string, is recorded as no tool, never a made-up one.
    assert row["tool_id"] == tool_id
    assert row["method"] == "tools/call"
    assert row["metadata"]["transport"] == "mcp"


RESEARCH_TOOLS = [
    "coral.get_knowledge_node",
    "coral.search_knowledge",
    "docs.get_doc",
    "docs.search_docs",
]
ENGINEERING_TOOLS = [
    "application.get",
    "application.get_environment",
    "application.get_repository",
    "application.list",
    "application.set_status",
    "docs.get_doc",
    "docs.search_docs",
]
LEARNING_TOOLS = [
    "assessment.get_mastery",
    "assessment.get_readiness",
    "coral.get_knowledge_node",
    "coral.search_knowledge",
    "docs.get_doc",
    "docs.search_docs",
    "learner.get_competency_profile",
    "learner.get_context",
    "learner.get_learning_progress",
    "learner.get_profile",
    "learning.get_current_plan",
    "learning.get_next_learning_experience",
    "nemo12.get_learner_learning_state",
]


async def test_tools_list_shows_each_agent_its_grants_in_a_stable_order(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    seen = {}
    for agent, token in (
        ("research", tokens.research),
        ("engineering", tokens.engineering),
        ("learning", tokens.learning_parent),
    ):
        async with toolplane.mcp(token) as client:
            first = [tool.name for tool in (await client.list_tools()).tools]
            again = [tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools]
        assert first == again
        seen[agent] = first
    assert seen == {
        "research": RESEARCH_TOOLS,
        "engineering": ENGINEERING_TOOLS,
        "learning": LEARNING_TOOLS,
    }


async def test_listed_tools_carry_schemas_annotations_and_the_versioned_id(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    async with toolplane.mcp(tokens.engineering) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    reader, writer = tools["application.get"], tools["application.set_status"]
    assert reader.input_schema["required"] == ["application_id"]
    assert reader.input_schema["additionalProperties"] is False
    assert "repository_path" in (reader.output_schema or {})["properties"]
    hints = {
        tool.name: (
            tool.annotations.read_only_hint,
            tool.annotations.destructive_hint,
            tool.annotations.idempotent_hint,
            tool.annotations.open_world_hint,
        )
        for tool in (reader, writer)
        if tool.annotations is not None
    }
    assert hints == {
        "application.get": (True, False, True, False),
        "application.set_status": (False, True, False, False),
    }
    meta = writer.meta or {}
    assert meta["dev.nemo/tool_id"] == "application.set_status:v1"
    assert (meta["dev.nemo/risk"], meta["dev.nemo/mode"]) == ("HIGH", "write")


async def test_the_user_header_is_ignored_for_a_bound_token_and_used_for_an_unbound_one(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    headers = {"X-Nemo12-User-Id": "U-2041-P2", "X-Nemo12-Session-Id": "S-user-header-test"}
    async with toolplane.mcp(tokens.learning_parent, headers) as client:
        await client.call_tool("docs.search_docs", {"query": "audit"})
    async with toolplane.mcp(tokens.learning_unbound, headers) as client:
        await client.call_tool("docs.search_docs", {"query": "audit"})
    rows = await audit_rows(session_id="S-user-header-test")
    assert [row["user_id"] for row in rows] == ["U-2041-P1", "U-2041-P2"]


async def test_session_ids_come_from_headers_or_are_assigned(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    call = modern_call("docs.search_docs", {"query": "audit"})
    await post(
        toolplane.mcp_url,
        call,
        token=tokens.research,
        headers={"Mcp-Session-Id": "S-from-mcp-header", "X-Request-Id": "REQ-session-1"},
    )
    await post(
        toolplane.mcp_url,
        call,
        token=tokens.research,
        headers={
            "Mcp-Session-Id": "S-from-mcp-header",
            "X-Nemo12-Session-Id": "S-from-nemo-header",
            "X-Request-Id": "REQ-session-2",
        },
    )
    await post(
        toolplane.mcp_url, call, token=tokens.research, headers={"X-Request-Id": "REQ-session-3"}
    )
    sessions = [
        (await audit_rows(request_id=f"REQ-session-{i}"))[0]["session_id"] for i in (1, 2, 3)
    ]
    assert sessions[:2] == ["S-from-mcp-header", "S-from-nemo-header"]
    assert re.fullmatch(r"S-[0-9a-f-]{36}", sessions[2])


async def test_the_2025_11_25_handshake_works_too(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    async with toolplane.mcp(tokens.research, mode="legacy") as client:
        assert client.session.protocol_version == "2025-11-25"
        with pytest.warns(MCPDeprecationWarning):
            await client.send_ping()
        names = [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool("docs.search_docs", {"query": "xac thuc"})
    assert names == RESEARCH_TOOLS
    assert not result.is_error
    assert result.structured_content["hits"]


async def test_the_official_client_negotiates_2026_07_28(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    async with toolplane.mcp(tokens.research) as client:
        assert client.session.protocol_version == MODERN
        result = await client.call_tool("docs.get_doc", {"path": "toolplane/mcp-edge"})
    assert not result.is_error
    assert result.structured_content["path"] == "docs/toolplane/mcp-edge.md"


async def test_a_traceparent_header_continues_the_callers_trace(
    toolplane: RunningToolPlane, tokens: AgentTokens, spans: InMemorySpanExporter
) -> None:
    # A client that sends W3C trace context as an HTTP header rather than in `_meta`.
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    body = modern_call("docs.search_docs", {"query": "audit"})
    reply = await post(
        toolplane.mcp_url,
        body,
        token=tokens.research,
        headers={"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"},
    )
    assert reply.status_code == 200
    served = [s for s in spans.get_finished_spans() if s.name == "tools/call docs.search_docs"]
    assert served
    assert format(served[-1].context.trace_id, "032x") == trace_id


async def test_a_calls_trace_holds_its_limit_decision_but_no_audit_batch(
    toolplane: RunningToolPlane, tokens: AgentTokens, spans: InMemorySpanExporter
) -> None:
    # One batch stores the rows of many calls, so its statement belongs to no call's trace.
    spans.clear()
    body = modern_call("docs.search_docs", {"query": "audit"})
    reply = await post(toolplane.mcp_url, body, token=tokens.research)
    assert reply.status_code == 200
    statements = [
        str((span.attributes or {}).get("db.statement", "")) for span in spans.get_finished_spans()
    ]
    assert any("take_tokens" in statement for statement in statements)
    assert not any("audit_logs" in statement for statement in statements)


@pytest.mark.parametrize("user_id", ["parent@school.vn", "U#P1"])
async def test_a_user_header_no_user_key_can_be_is_an_authorization_error(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any, user_id: str
) -> None:
    request_id = f"REQ-odd-user-{user_id.encode().hex()}"
    headers = {"X-Nemo12-User-Id": user_id, "X-Request-Id": request_id}
    async with toolplane.mcp(tokens.learning_unbound, headers) as client:
        result = await client.call_tool("learner.get_profile", {"learner_id": "L-2041-1"})
    assert result.is_error
    assert error_envelope(result)["error"]["code"] == "AUTHORIZATION_ERROR"
    [row] = await audit_rows(request_id=request_id)
    assert (row["decision"], row["status"]) == ("deny", "denied")
