"""The gRPC side for internal agents: ToolPlaneService, through the same router, policy and audit
as MCP."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest
from google.protobuf import json_format, struct_pb2

from nemo_core.errors import error_details
from nemo_protos.toolplane.v1 import audit_pb2, tool_pb2
from nemo_protos.toolplane.v1 import toolplane_service_pb2 as pb
from nemo_toolplane.servicer import peer_host

from .conftest import AgentTokens, RunningToolPlane
from .mcp.test_endpoint import RESEARCH_TOOLS
from .mcp_http import error_envelope


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
    assert (row["tool_id"], row["method"]) == (None, "CallTool")
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
