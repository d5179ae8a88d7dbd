"""The protocol version a request carries twice (``MCP-Protocol-Version`` and the body) must be
one version, and ``tools/list`` has one page: the rules as properties over generated requests,
then as the edge answers them over HTTP."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError

from nemo_toolplane.mcp.jsonrpc import JsonRpcMessage, VersionProblem, parse, version_problem
from services.toolplane.tests.conftest import AgentTokens, RunningToolPlane
from services.toolplane.tests.mcp_http import MODERN, modern_call, post

SERVED = ("2025-06-18", "2025-11-25", MODERN)
HANDSHAKE = "2025-11-25"
HEADER_MISMATCH, UNSUPPORTED_VERSION, INVALID_PARAMS = -32020, -32022, -32602

_versions = st.one_of(
    st.sampled_from(SERVED),
    st.from_regex(r"\d{4}-\d{2}-\d{2}", fullmatch=True),
    st.text(max_size=12),
)
_headers = st.one_of(st.none(), _versions)


def _envelope(version: object) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }


def _initialize(version: object) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}},
    }


def _problem(header: str | None, body: object) -> VersionProblem | None:
    parsed = parse(json.dumps(body).encode())
    assert isinstance(parsed, JsonRpcMessage)
    return version_problem(header, parsed, SERVED)


@settings(max_examples=200, deadline=None)
@given(header=_headers, version=st.one_of(_versions, st.integers(), st.none()))
def test_an_envelope_must_name_the_headers_version(header: str | None, version: object) -> None:
    problem = _problem(header, _envelope(version))
    if header is None or header != version:
        assert problem is VersionProblem.MISMATCH
    else:
        # An agreeing version is served, or the SDK's to refuse (it lists what it serves).
        assert problem is None


@settings(max_examples=200, deadline=None)
@given(header=_headers, version=st.one_of(_versions, st.integers(), st.none()))
def test_an_initialize_must_name_the_headers_version_if_one_is_sent(
    header: str | None, version: object
) -> None:
    problem = _problem(header, _initialize(version))
    if header is None:
        assert problem is None
    elif header != version:
        assert problem is VersionProblem.MISMATCH
    else:
        assert problem is (None if header in SERVED else VersionProblem.UNSUPPORTED)


@settings(max_examples=200, deadline=None)
@given(header=_headers, method=st.sampled_from(["tools/list", "tools/call", "ping"]))
def test_a_body_that_names_no_version_is_judged_by_the_header_alone(
    header: str | None, method: str
) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"name": "x"}}
    expected = None if header is None or header in SERVED else VersionProblem.UNSUPPORTED
    assert _problem(header, body) is expected


@pytest.mark.parametrize(
    ("case", "body", "headers"),
    [
        (
            "handshake-header-modern-body",
            modern_call("docs.search_docs", {"query": "a"}),
            HANDSHAKE,
        ),
        ("no-header-modern-body", modern_call("docs.search_docs", {"query": "a"}), None),
    ],
)
async def test_a_tool_call_whose_header_and_body_disagree_is_refused_and_audited(
    case: str,
    body: dict[str, Any],
    headers: str | None,
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    audit_rows: Any,
) -> None:
    request_id = f"REQ-version-{case}"
    sent = {"X-Request-Id": request_id, "Mcp-Method": "tools/call", "Mcp-Name": "docs.search_docs"}
    response = await _post_raw(toolplane, tokens, body, headers, sent)
    assert response.status_code == 400
    assert response.json()["id"] == body["id"]
    assert response.json()["error"]["code"] == HEADER_MISMATCH
    [row] = await audit_rows(request_id=request_id)
    assert (row["tool_id"], row["status"], row["metadata"]["malformed"]) == (
        "docs.search_docs:v1",
        "invalid",
        "protocol version",
    )


async def test_an_initialize_whose_header_names_another_version_is_refused(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    body = _initialize("2025-06-18") | {"id": "init-1"}
    body["params"]["clientInfo"] = {"name": "tests", "version": "1"}
    refused = await _post_raw(toolplane, tokens, body, HANDSHAKE)
    assert refused.status_code == 400
    assert refused.json()["id"] == "init-1"
    assert refused.json()["error"]["code"] == HEADER_MISMATCH
    # Without the header (as clients send it) the handshake proceeds, and so with an equal one.
    for header in (None, "2025-06-18"):
        accepted = await _post_raw(toolplane, tokens, body, header)
        assert accepted.status_code == 200, accepted.text
        assert accepted.json()["result"]["protocolVersion"] == "2025-06-18"


async def test_an_unserved_version_is_refused_with_the_request_id_and_what_is_served(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    discovered = await post(
        toolplane.mcp_url,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "server/discover",
            "params": _envelope(MODERN)["params"],
        },
        token=tokens.research,
    )
    served_by_discover = discovered.json()["result"]["supportedVersions"]

    modern = _envelope("2999-01-01") | {"id": 31}
    refused = await _post_raw(toolplane, tokens, modern, "2999-01-01", {"Mcp-Method": "tools/list"})
    assert refused.status_code == 400
    assert (refused.json()["id"], refused.json()["error"]["code"]) == (31, UNSUPPORTED_VERSION)
    assert refused.json()["error"]["data"]["supported"] == served_by_discover

    legacy = {"jsonrpc": "2.0", "id": "list-9", "method": "tools/list"}
    refused = await _post_raw(toolplane, tokens, legacy, "2999-01-01")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (refused.json()["id"], error["code"]) == ("list-9", UNSUPPORTED_VERSION)
    # A handshake-era client is told of the handshake revisions too.
    assert {HANDSHAKE, *served_by_discover} <= set(error["data"]["supported"])


@pytest.mark.parametrize("cursor", ["", "0", "next", "eyJvZmZzZXQiOiAxMH0=", "x" * 4096])
async def test_any_tools_list_cursor_is_invalid_params(
    toolplane: RunningToolPlane, tokens: AgentTokens, cursor: str
) -> None:
    legacy = {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"cursor": cursor}}
    response = await _post_raw(toolplane, tokens, legacy, HANDSHAKE)
    assert response.json()["error"]["code"] == INVALID_PARAMS
    modern = _envelope(MODERN)
    modern["params"]["cursor"] = cursor
    response = await post(toolplane.mcp_url, modern, token=tokens.research)
    assert response.json()["error"]["code"] == INVALID_PARAMS


async def test_the_official_client_is_told_a_cursor_is_invalid(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    async with toolplane.mcp(tokens.research) as client:
        assert (await client.list_tools()).tools
        with pytest.raises(MCPError) as refused:
            await client.list_tools(cursor="page-2")
    assert refused.value.error.code == INVALID_PARAMS


async def _post_raw(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    body: dict[str, Any],
    version: str | None,
    headers: dict[str, str] | None = None,
) -> Any:
    """POST without the routing headers ``post`` derives from the body: only ``version``."""
    sent = {
        "Authorization": f"Bearer {tokens.research}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        **(headers or {}),
    }
    if version is not None:
        sent["MCP-Protocol-Version"] = version
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(toolplane.mcp_url, json=body, headers=sent)
