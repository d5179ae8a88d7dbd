"""The edge as an OAuth resource server, against the real local authorization server: its
metadata, the challenge that starts a host's sign-in, a person's token acting as the agent its
client maps to, scopes narrowing the grants, unregistered clients, and the same token over gRPC."""

from __future__ import annotations

import base64
import json
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import struct_pb2

from nemo_core.errors import error_details
from nemo_devtools.oauth_client import register_client
from nemo_ops.oauth_clients import add_client, remove_client
from nemo_protos.toolplane.v1 import toolplane_service_pb2 as pb
from nemo_testing.oauth import OAuthServer
from nemo_toolplane.tool_kinds import Scope
from services.toolplane.tests.conftest import RunningToolPlane, rules_change
from services.toolplane.tests.mcp_http import MODERN, modern_call, post

LEARNING_AGENT_LIST = {
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
}


async def _token(server: OAuthServer, plane: RunningToolPlane, user: str, *scopes: str) -> str:
    tokens = await server.tokens(
        user, resource=plane.settings.oauth_resource, scopes=scopes or [s.value for s in Scope]
    )
    return tokens.access_token


async def _list(plane: RunningToolPlane, token: str) -> set[str]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = await post(
        plane.mcp_url, body, token=token, headers={"MCP-Protocol-Version": "2025-11-25"}
    )
    assert response.status_code == 200, response.text
    return {tool["name"] for tool in response.json()["result"]["tools"]}


async def test_the_metadata_names_the_resource_its_issuer_and_the_tools_scopes(
    oauth_plane: RunningToolPlane, oauth_server: OAuthServer
) -> None:
    resource = oauth_plane.settings.oauth_resource
    root = oauth_plane.mcp_url.removesuffix("/mcp")
    async with httpx.AsyncClient(timeout=10) as http:
        for path in (
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
        ):
            response = await http.get(root + path, headers={"Origin": "https://claude.ai"})
            assert response.status_code == 200
            assert response.headers["access-control-allow-origin"] == "*"
            document = response.json()
            assert document["resource"] == resource
            assert document["authorization_servers"] == [oauth_server.issuer]
            assert document["scopes_supported"] == [scope.value for scope in Scope]
            assert document["bearer_methods_supported"] == ["header"]


async def test_no_credential_gets_a_challenge_to_sign_in_and_an_audit_row(
    oauth_plane: RunningToolPlane, audit_rows: Any
) -> None:
    response = await post(
        oauth_plane.mcp_url,
        modern_call("docs.search_docs", {"query": "x"}),
        headers={"X-Request-Id": "REQ-oauth-no-credential"},
    )
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    root = oauth_plane.mcp_url.removesuffix("/mcp")
    assert f'resource_metadata="{root}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert f'scope="{" ".join(s.value for s in Scope)}"' in challenge
    assert "error=" not in challenge
    [row] = await audit_rows(request_id="REQ-oauth-no-credential", plane=oauth_plane)
    assert (row["agent_id"], row["tool_id"], row["method"], row["credential_kind"]) == (
        None,
        None,
        "POST /mcp",
        "none",
    )
    assert (row["status"], row["error_code"]) == ("denied", "AUTHENTICATION_ERROR")


async def test_a_parent_signed_in_through_the_dev_client_reads_their_child_only(
    oauth_plane: RunningToolPlane, oauth_server: OAuthServer, audit_rows: Any
) -> None:
    tokens = await oauth_server.tokens(
        "U-2041-P1", resource=oauth_plane.settings.oauth_resource, scopes=["learner.read"]
    )
    own = await post(
        oauth_plane.mcp_url,
        modern_call("learner.get_profile", {"learner_id": "L-2041-1"}),
        token=tokens.access_token,
        headers={"X-Request-Id": "REQ-oauth-own-child"},
    )
    assert own.status_code == 200
    assert own.json()["result"]["structuredContent"]["profile"]["grade"] == 8
    other = await post(
        oauth_plane.mcp_url,
        modern_call("learner.get_profile", {"learner_id": "L-2041-2"}),
        token=tokens.access_token,
    )
    assert other.json()["result"]["_meta"]["dev.nemo/error"]["error"]["code"] == (
        "AUTHORIZATION_ERROR"
    )
    [row] = await audit_rows(request_id="REQ-oauth-own-child", plane=oauth_plane)
    payload = tokens.access_token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert (row["agent_id"], row["user_id"], row["user_source"]) == (
        "learning-agent",
        "U-2041-P1",
        "token",
    )
    assert (row["credential_kind"], row["token_id"], row["client_id"], row["subject"]) == (
        "oauth",
        claims["jti"],
        oauth_server.client_id,
        "U-2041-P1",
    )
    assert row["scopes"] == ["learner.read"]
    assert (row["method"], row["status"]) == ("tools/call", "success")


@pytest.mark.parametrize(
    "scopes",
    [
        ("learner.read",),
        ("docs.read",),
        ("knowledge.read", "docs.read"),
        ("learner.read", "knowledge.read", "docs.read", "application.read", "application.write"),
        ("application.read", "application.write", "learner.write"),
    ],
)
async def test_tools_list_shows_the_tools_both_granted_and_in_scope(
    oauth_plane: RunningToolPlane, oauth_server: OAuthServer, scopes: tuple[str, ...]
) -> None:
    token = await _token(oauth_server, oauth_plane, "U-2041-P1", *scopes)
    registry = oauth_plane.plane.router._registry
    expected = {
        name
        for name in LEARNING_AGENT_LIST
        if registry.resolve(name).scope.value in scopes  # type: ignore[union-attr]
    }
    assert await _list(oauth_plane, token) == expected


async def test_a_granted_tool_outside_the_scopes_is_403_naming_the_scope_to_ask_for(
    oauth_plane: RunningToolPlane, oauth_server: OAuthServer, audit_rows: Any
) -> None:
    token = await _token(oauth_server, oauth_plane, "U-2041-P1", "docs.read")
    response = await post(
        oauth_plane.mcp_url,
        modern_call("learner.get_profile", {"learner_id": "L-2041-1"}),
        token=token,
        headers={"X-Request-Id": "REQ-oauth-scope"},
    )
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="learner.read"' in challenge
    assert response.json()["error"]["data"]["error"]["details"] == {
        "required_scope": "learner.read"
    }
    [row] = await audit_rows(request_id="REQ-oauth-scope", plane=oauth_plane)
    assert (row["tool_id"], row["status"], row["error_code"]) == (
        "learner.get_profile:v1",
        "denied",
        "AUTHORIZATION_ERROR",
    )
    assert row["metadata"]["rule"] == "scope"
    # A tool never granted answers as unknown, scope or not: nothing tells it exists.
    ungranted = await post(
        oauth_plane.mcp_url,
        modern_call(
            "application.set_status", {"application_id": "x", "status": "active", "reason": "r"}
        ),
        token=token,
    )
    assert ungranted.status_code != 403
    assert "www-authenticate" not in ungranted.headers
    assert ungranted.json()["error"]["code"] == -32602


async def test_an_unregistered_client_is_refused_until_an_operator_maps_it(
    oauth_plane: RunningToolPlane, oauth_server: OAuthServer, owner: Any, audit_rows: Any
) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        registered = await register_client(
            http,
            await oauth_server.metadata(),
            {
                "client_name": "a host nobody mapped",
                "redirect_uris": ["http://127.0.0.1:8976/callback"],
                "token_endpoint_auth_method": "none",
                "application_type": "native",
                "grant_types": ["authorization_code", "refresh_token"],
            },
        )
    client_id = registered["client_id"]
    tokens = await oauth_server.tokens(
        "U-2041-P2",
        resource=oauth_plane.settings.oauth_resource,
        scopes=["docs.read"],
        client_id=client_id,
    )
    call = modern_call("docs.search_docs", {"query": "audit"})
    refused = await post(
        oauth_plane.mcp_url,
        call,
        token=tokens.access_token,
        headers={"X-Request-Id": "REQ-oauth-unmapped"},
    )
    assert refused.status_code == 403
    assert client_id in refused.json()["error"]["message"]
    assert "nemo oauth-clients add" in refused.json()["error"]["message"]
    [row] = await audit_rows(request_id="REQ-oauth-unmapped", plane=oauth_plane)
    assert (row["agent_id"], row["client_id"], row["subject"], row["error_code"]) == (
        None,
        client_id,
        "U-2041-P2",
        "AUTHORIZATION_ERROR",
    )
    try:
        async with rules_change(oauth_plane):
            await add_client(owner, client_id, "research-agent", "tests")
        accepted = await post(oauth_plane.mcp_url, call, token=tokens.access_token)
        assert accepted.status_code == 200
        assert accepted.json()["result"].get("isError") is not True
    finally:
        async with rules_change(oauth_plane):
            await remove_client(owner, client_id)
    assert (await post(oauth_plane.mcp_url, call, token=tokens.access_token)).status_code == 403


async def test_grpc_takes_the_same_token_with_the_same_scopes(
    oauth_plane: RunningToolPlane, oauth_server: OAuthServer
) -> None:
    token = await _token(oauth_server, oauth_plane, "U-2041-P1", "learner.read")
    arguments = struct_pb2.Struct()
    arguments.update({"learner_id": "L-2041-3"})
    stub = oauth_plane.tools_stub()
    metadata = (("authorization", f"Bearer {token}"),)
    own = await stub.CallTool(
        pb.CallToolRequest(tool="learner.get_profile", arguments=arguments),
        metadata=metadata,
        timeout=10,
    )
    assert own.success, own
    listed = await stub.ListTools(pb.ListToolsRequest(), metadata=metadata, timeout=10)
    assert {tool.name for tool in listed.tools} == {
        name for name in LEARNING_AGENT_LIST if not name.startswith(("docs.", "coral."))
    }
    outside = await stub.CallTool(
        pb.CallToolRequest(tool="docs.search_docs", arguments=struct_pb2.Struct()),
        metadata=metadata,
        timeout=10,
    )
    assert outside.error.details["required_scope"] == "docs.read"


async def test_an_authorization_sent_twice_is_refused_on_both_edges_and_audited(
    oauth_plane: RunningToolPlane, oauth_server: OAuthServer, audit_rows: Any
) -> None:
    token = await _token(oauth_server, oauth_plane, "U-2041-P1", "docs.read")
    raw = json.dumps(modern_call("docs.search_docs", {"query": "x"})).encode()
    headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "docs.search_docs"),
        ("X-Request-Id", "REQ-oauth-twice-mcp"),
        ("Authorization", f"Bearer {token}"),
        ("Authorization", "Bearer nemo_at_someone-else"),
    ]
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(oauth_plane.mcp_url, content=raw, headers=headers)
    assert response.status_code == 400
    [row] = await audit_rows(request_id="REQ-oauth-twice-mcp", plane=oauth_plane)
    assert (row["agent_id"], row["credential_kind"], row["metadata"]["malformed"]) == (
        None,
        None,
        "duplicate Authorization header",
    )
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await oauth_plane.tools_stub().CallTool(
            pb.CallToolRequest(tool="docs.search_docs", request_id="REQ-oauth-twice-grpc"),
            metadata=(("authorization", f"Bearer {token}"), ("authorization", f"Bearer {token}")),
            timeout=10,
        )
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(refused.value).reason == "DUPLICATE_AUTHORIZATION"
    [row] = await audit_rows(request_id="REQ-oauth-twice-grpc", plane=oauth_plane)
    assert (row["method"], row["tool_id"]) == ("CallTool", "docs.search_docs:v1")


async def test_a_static_agent_token_keeps_working_beside_oauth(
    oauth_plane: RunningToolPlane, tokens: Any
) -> None:
    response = await post(
        oauth_plane.mcp_url,
        modern_call("docs.search_docs", {"query": "audit"}),
        token=tokens.research,
    )
    assert response.status_code == 200
    assert response.json()["result"].get("isError") is not True
