"""The gRPC side: ToolPlaneService for internal agents (same router, policy and audit as MCP) and
the operators' ToolPlaneAdminService."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from google.protobuf import json_format, struct_pb2

from nemo_core.errors import error_details
from nemo_protos.toolplane.v1 import audit_pb2, tool_pb2
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb
from nemo_protos.toolplane.v1 import toolplane_service_pb2 as pb
from nemo_toolplane.servicer import peer_host

from .conftest import AgentTokens, RunningToolPlane
from .mcp.test_endpoint import RESEARCH_TOOLS
from .mcp_http import error_envelope, post


def agent(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


def arguments(value: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(value)
    return message


async def call(
    toolplane: RunningToolPlane, token: str, tool: str, args: dict[str, Any], **fields: str
) -> pb.CallToolResponse:
    request = pb.CallToolRequest(tool=tool, arguments=arguments(args), **fields)
    response: pb.CallToolResponse = await toolplane.tools_stub().CallTool(
        request, metadata=agent(token), timeout=10
    )
    return response


async def test_an_agent_token_is_required_on_top_of_the_caller_token(
    toolplane: RunningToolPlane,
) -> None:
    stub = toolplane.tools_stub()
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await stub.ListTools(pb.ListToolsRequest(), timeout=10)
    assert missing.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert error_details(missing.value).reason == "AGENT_UNAUTHENTICATED"
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await stub.ListTools(pb.ListToolsRequest(), metadata=agent("nemo_at_nope"), timeout=10)
    assert error_details(unknown.value).reason == "AGENT_UNAUTHENTICATED"


async def test_list_tools_is_the_agents_grants_with_schemas(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    response = await toolplane.tools_stub().ListTools(
        pb.ListToolsRequest(), metadata=agent(tokens.research), timeout=10
    )
    assert [tool.name for tool in response.tools] == RESEARCH_TOOLS
    search = next(tool for tool in response.tools if tool.name == "docs.search_docs")
    assert (search.tool_id, search.version, search.category) == ("docs.search_docs:v1", 1, "docs")
    assert (search.risk, search.mode) == (tool_pb2.RISK_LOW, tool_pb2.TOOL_MODE_READ)
    assert json.loads(search.input_schema_json)["properties"]["limit"]["maximum"] == 10
    assert search.annotations.read_only
    assert not search.annotations.destructive


async def test_call_tool_returns_the_result_and_audits_the_grpc_call(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    response = await call(
        toolplane, tokens.research, "docs.search_docs", {"query": "phê duyệt", "limit": 2},
        request_id="REQ-grpc-1", session_id="S-grpc-1",
    )  # fmt: skip
    assert response.success
    assert (response.request_id, response.tool_id) == ("REQ-grpc-1", "docs.search_docs:v1")
    assert response.decision == audit_pb2.DECISION_ALLOW
    hits = json_format.MessageToDict(response.result)["hits"]
    assert 1 <= len(hits) <= 2
    assert hits[0]["path"] == "docs/toolplane/policy-and-approvals.md"
    [row] = await audit_rows(request_id="REQ-grpc-1")
    assert (row["session_id"], row["status"], row["metadata"]["transport"]) == (
        "S-grpc-1",
        "success",
        "grpc",
    )


async def test_denials_and_unknown_tools_are_envelopes_not_statuses(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    denied = await call(toolplane, tokens.research, "docs.search_docs", {"query": "a", "x": 1})
    assert not denied.success
    assert denied.decision == audit_pb2.DECISION_DENY
    assert denied.error.code == tool_pb2.ERROR_CODE_VALIDATION_ERROR
    unknown = await call(toolplane, tokens.research, "docs.nope", {})
    assert (unknown.tool_id, unknown.error.code) == ("", tool_pb2.ERROR_CODE_RESOURCE_NOT_FOUND)
    assert unknown.decision == audit_pb2.DECISION_DENY


async def test_a_call_without_a_tool_name_is_refused_and_still_audited(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as malformed:
        await call(toolplane, tokens.research, "", {}, request_id="REQ-grpc-no-tool")
    assert malformed.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(malformed.value).reason == "TOOL_REQUIRED"
    [row] = await audit_rows(request_id="REQ-grpc-no-tool")
    assert (row["agent_id"], row["decision"], row["status"], row["error_code"]) == (
        "research-agent",
        "deny",
        "invalid",
        "VALIDATION_ERROR",
    )
    assert row["tool_id"].startswith("invalid:")
    assert row["metadata"]["transport"] == "grpc"


async def test_an_argument_with_no_value_is_refused_and_still_audited(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    request = pb.CallToolRequest(
        tool="docs.search_docs", arguments=arguments({"query": "login"}), request_id="REQ-kindless"
    )
    request.arguments.fields["page"].list_value.values.add()  # a Value with no kind set
    with pytest.raises(grpc.aio.AioRpcError) as malformed:
        await toolplane.tools_stub().CallTool(request, metadata=agent(tokens.research), timeout=10)
    assert malformed.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(malformed.value).reason == "MALFORMED_REQUEST"
    [row] = await audit_rows(request_id="REQ-kindless")
    assert (row["decision"], row["status"], row["error_code"]) == (
        "deny",
        "invalid",
        "VALIDATION_ERROR",
    )


async def test_call_tool_requires_a_deadline(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    # It may call the context service, which must not hold the call forever.
    request = pb.CallToolRequest(
        tool="learner.get_profile",
        arguments=arguments({"learner_id": "L-2041-1"}),
        request_id="REQ-grpc-no-deadline",
    )
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await toolplane.tools_stub().CallTool(request, metadata=agent(tokens.learning_parent))
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(refused.value).reason == "DEADLINE_REQUIRED"
    assert await audit_rows(request_id="REQ-grpc-no-deadline") == []
    # Listing calls nothing else, so it needs none.
    listed = await toolplane.tools_stub().ListTools(
        pb.ListToolsRequest(), metadata=agent(tokens.research)
    )
    assert listed.tools


async def test_the_grpc_and_mcp_envelopes_are_the_same(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    bad = {"query": "audit", "limit": 0}
    over_grpc = await call(toolplane, tokens.research, "docs.search_docs", bad)
    async with toolplane.mcp(tokens.research) as client:
        over_mcp = error_envelope(await client.call_tool("docs.search_docs", bad))
    assert over_mcp["error"]["code"] == "VALIDATION_ERROR"
    assert tool_pb2.ErrorCode.Name(over_grpc.error.code) == "ERROR_CODE_VALIDATION_ERROR"
    assert over_grpc.error.message == over_mcp["error"]["message"]
    assert over_grpc.error.retryable is over_mcp["error"]["retryable"] is False
    assert json_format.MessageToDict(over_grpc.error.details) == over_mcp["error"]["details"]


async def test_operators_issue_and_revoke_tokens(toolplane: RunningToolPlane) -> None:
    admin = toolplane.admin_stub()
    issued = await admin.IssueAgentToken(
        admin_pb.IssueAgentTokenRequest(agent_id="research-agent", label="tests: grpc"), timeout=10
    )
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    version = {"MCP-Protocol-Version": "2025-11-25"}
    assert (
        await post(toolplane.mcp_url, body, token=issued.token, headers=version)
    ).status_code == 200
    revoked = await admin.RevokeAgentToken(
        admin_pb.RevokeAgentTokenRequest(token_id=issued.token_id), timeout=10
    )
    assert revoked.revoke_time.seconds > 0
    assert (
        await post(toolplane.mcp_url, body, token=issued.token, headers=version)
    ).status_code == 401
    for request, reason in (
        (admin_pb.IssueAgentTokenRequest(agent_id="ghost-agent"), "AGENT_NOT_FOUND"),
        (admin_pb.IssueAgentTokenRequest(), "AGENT_REQUIRED"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await admin.IssueAgentToken(request, timeout=10)
        assert error_details(refused.value).reason == reason
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await admin.RevokeAgentToken(admin_pb.RevokeAgentTokenRequest(token_id="nope"), timeout=10)
    assert unknown.value.code() is grpc.StatusCode.NOT_FOUND


async def test_operators_read_the_audit_log_newest_first(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    for n in range(3):
        await call(toolplane, tokens.research, "docs.search_docs", {"query": "audit"},
                   session_id="S-grpc-audit-list", request_id=f"REQ-grpc-list-{n}")  # fmt: skip
    await toolplane.plane.audit.flush()
    admin = toolplane.admin_stub()
    one = await admin.ListAuditEntries(
        admin_pb.ListAuditEntriesRequest(request_id="REQ-grpc-list-1"), timeout=10
    )
    [entry] = one.entries
    assert (entry.agent_id, entry.tool_id, entry.session_id) == (
        "research-agent",
        "docs.search_docs:v1",
        "S-grpc-audit-list",
    )
    assert (entry.decision, entry.status) == (
        audit_pb2.DECISION_ALLOW,
        audit_pb2.CALL_STATUS_SUCCESS,
    )
    page = admin_pb.ListAuditEntriesRequest(agent_id="research-agent", page_size=2)
    first = await admin.ListAuditEntries(page, timeout=10)
    page.page_token = first.next_page_token
    second = await admin.ListAuditEntries(page, timeout=10)
    ids = [e.audit_id for e in [*first.entries, *second.entries]]
    assert ids == sorted(ids, reverse=True)
    assert len(set(ids)) == 4
    assert [e.request_id for e in first.entries] == ["REQ-grpc-list-2", "REQ-grpc-list-1"]


async def test_audit_entries_carry_their_time_and_duration_and_filter_by_start_time(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    before = datetime.now(UTC)
    await call(toolplane, tokens.research, "docs.search_docs", {"query": "audit"},
               session_id="S-grpc-audit-time", request_id="REQ-grpc-time")  # fmt: skip
    after = datetime.now(UTC)
    await toolplane.plane.audit.flush()
    admin = toolplane.admin_stub()
    [entry] = (
        await admin.ListAuditEntries(
            admin_pb.ListAuditEntriesRequest(request_id="REQ-grpc-time"), timeout=10
        )
    ).entries
    created = entry.create_time.ToDatetime(UTC)
    assert before - timedelta(seconds=1) <= created <= after + timedelta(seconds=1)
    # Measured inside the server, so within what the client saw.
    assert timedelta(0) < entry.duration.ToTimedelta() <= after - before

    async def listed(start: datetime) -> list[str]:
        request = admin_pb.ListAuditEntriesRequest(request_id="REQ-grpc-time")
        request.start_time.FromDatetime(start)
        return [e.request_id for e in (await admin.ListAuditEntries(request, timeout=10)).entries]

    assert await listed(created) == ["REQ-grpc-time"]
    assert await listed(created + timedelta(microseconds=1)) == []


@pytest.mark.parametrize(
    ("peer", "host"),
    [
        ("ipv4:127.0.0.1:50123", "127.0.0.1"),
        ("ipv6:[::1]:50123", "::1"),
        ("unix:/tmp/socket", "unix:/tmp/socket"),
    ],
)
def test_failed_authentications_are_counted_per_client_address(peer: str, host: str) -> None:
    assert peer_host(peer) == host


def _token(position: str) -> str:
    """A token in the page-token format: URL-safe base64 of JSON naming the listing first."""
    return base64.urlsafe_b64encode(f'["audit",{position}]'.encode()).decode()


@pytest.mark.parametrize(
    "token",
    [
        _token("99999999999999999999"),  # beyond a bigint
        _token("9223372036854775808"),  # one beyond
        _token("-5"),
        _token("0"),
        _token('"12"'),  # the id as text
        _token("12.0"),
        _token("true"),
        _token("12,13"),
        base64.urlsafe_b64encode(b'["approvals",12]').decode(),  # another listing's
        base64.urlsafe_b64encode(b"12").decode(),  # a bare id, as tokens once were
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        "not base64 at all!",
        "tệp",
    ],
)
async def test_every_malformed_audit_page_token_is_an_invalid_argument(
    token: str, toolplane: RunningToolPlane
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await toolplane.admin_stub().ListAuditEntries(
            admin_pb.ListAuditEntriesRequest(page_token=token), timeout=10
        )
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(refused.value).reason == "INVALID_PAGE_TOKEN"


async def test_the_largest_audit_page_token_is_accepted(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    # At least one row below the largest id, whichever tests ran before.
    await call(toolplane, tokens.research, "docs.search_docs", {"query": "audit"},
               session_id="S-grpc-audit-max", request_id="REQ-grpc-max")  # fmt: skip
    await toolplane.plane.audit.flush()
    response = await toolplane.admin_stub().ListAuditEntries(
        admin_pb.ListAuditEntriesRequest(page_token=_token("9223372036854775807"), page_size=1),
        timeout=10,
    )
    assert len(response.entries) == 1
