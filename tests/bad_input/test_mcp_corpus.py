"""Bad input at the MCP edge, one row per case: raw HTTP bodies, since the official client
cannot send most of them. Each row names the HTTP status and the JSON-RPC error code, or the
error envelope's code for a tool-level failure (``isError``), and the audit rows it writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import httpx
import pytest

from nemo_toolplane.mcp.endpoint import ERROR_META_KEY
from tests.stack import Stack

from .ledger import Ledger

INT32_MAX = 2**31 - 1
DEEP = '{"a":' * 5000 + "{}" + "}" * 5000
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602


@dataclass(frozen=True)
class McpCase:
    id: str
    body: bytes
    status: int
    rpc_error: int | None = None
    tool_error: str | None = None
    #: Every case is a refused request of an authenticated agent: one audit row each.
    audit_rows: int = 1
    agent: str = "engineering-agent"
    headers: dict[str, str | None] = field(default_factory=dict)


def _message(value: object) -> bytes:
    return json.dumps(value).encode()


def _call(tool: str, arguments: object) -> bytes:
    return _message(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
    )


def _tool_case(
    case_id: str, tool: str, arguments: object, error: str, agent: str = "engineering-agent"
) -> McpCase:
    return McpCase(case_id, _call(tool, arguments), 200, tool_error=error, agent=agent)


LIST = _message({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})

CASES = [
    McpCase(
        "oversized-body",
        _call("application.get", {"application_id": "x" * (2 * 1024 * 1024)}),
        413,
        INVALID_REQUEST,
    ),
    McpCase(
        "invalid-utf8-body",
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"application.get",'
        b'"arguments":{"application_id":"\xff\xfe"}}}',
        400,
        PARSE_ERROR,
    ),
    McpCase(
        "nested-arguments",
        (
            '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"application.get",'
            f'"arguments":{{"application_id":"nemo12-web","x":{DEEP}}}}}}}'
        ).encode(),
        400,
        PARSE_ERROR,
    ),
    McpCase(
        "nested-params",
        ('{"jsonrpc":"2.0","id":1,"method":"tools/list","params":' + DEEP + "}").encode(),
        400,
        PARSE_ERROR,
    ),
    _tool_case(
        "unknown-tool-argument",
        "application.get",
        {"application_id": "nemo12-web", "include_secrets": True},
        "VALIDATION_ERROR",
    ),
    _tool_case(
        "sql-application-id",
        "application.get",
        {"application_id": "' OR 1=1 --"},
        "VALIDATION_ERROR",
    ),
    _tool_case(
        "sql-learner-id",
        "learner.get_profile",
        {"learner_id": "L-2041-1'; DROP TABLE learning.learners; --"},
        "VALIDATION_ERROR",
        agent="learning-agent",
    ),
    _tool_case(
        "docs-limit-int32-max",
        "docs.search_docs",
        {"query": "deploy", "limit": INT32_MAX},
        "VALIDATION_ERROR",
        agent="research-agent",
    ),
    _tool_case(
        "knowledge-limit-int32-max",
        "coral.search_knowledge",
        {"query": "phân số", "limit": INT32_MAX},
        "VALIDATION_ERROR",
        agent="research-agent",
    ),
    *(
        McpCase(
            f"confusable-{name}",
            _call(tool, {"learner_id": "L-2041-1"}),
            200,
            INVALID_PARAMS,
            agent="learning-agent",
        )
        for name, tool in {
            "cyrillic-a": "le\u0430rner.get_profile",
            "fullwidth-dot": "learner\uff0eget_profile",
            "zero-width-joiner": "learner.get\u200d_profile",
        }.items()
    ),
    McpCase("missing-jsonrpc", _message({"id": 1, "method": "tools/list"}), 400, INVALID_REQUEST),
    McpCase(
        "wrong-jsonrpc-version",
        _message({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}),
        400,
        INVALID_REQUEST,
    ),
    *(
        McpCase(
            f"id-{name}",
            _message({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}),
            400,
            INVALID_REQUEST,
        )
        for name, request_id in {"object": {"a": 1}, "boolean": True, "fraction": 1.5}.items()
    ),
    McpCase("batch-array", b"[" + LIST + b"]", 400, INVALID_REQUEST),
    McpCase(
        "params-array",
        _message({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ["x"]}),
        400,
        INVALID_REQUEST,
    ),
    McpCase(
        "params-string",
        _message({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": "x"}),
        400,
        INVALID_REQUEST,
    ),
    McpCase(
        "arguments-array",
        _call("application.get", ["nemo12-web"]),
        200,
        INVALID_PARAMS,
    ),
    McpCase(
        "unknown-method",
        _message({"jsonrpc": "2.0", "id": 1, "method": "tools/explode"}),
        200,
        METHOD_NOT_FOUND,
    ),
    McpCase("truncated-json", b'{"jsonrpc": "2.0", "id": 1,', 400, PARSE_ERROR),
    McpCase("empty-body", b"", 400, PARSE_ERROR),
    McpCase("text-plain", LIST, 415, INVALID_REQUEST, headers={"Content-Type": "text/plain"}),
    McpCase(
        "form-data",
        b"jsonrpc=2.0&id=1&method=tools%2Flist",
        415,
        INVALID_REQUEST,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    ),
    McpCase("accepts-only-html", LIST, 406, INVALID_REQUEST, headers={"Accept": "text/html"}),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
async def test_mcp_bad_input_gets_a_precise_error(
    case: McpCase, bad_input_stack: Stack, ledger: Ledger
) -> None:
    ledger.cases_run.append(case.id)
    ledger.expected_audit_rows += case.audit_rows
    headers = {**HEADERS, "Authorization": f"Bearer {bad_input_stack.agent_tokens[case.agent]}"}
    for name, value in case.headers.items():
        headers.pop(name, None)
        if value is not None:
            headers[name] = value
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(bad_input_stack.mcp_url, content=case.body, headers=headers)
    assert response.status_code == case.status, response.text[:500]
    if case.rpc_error is not None:
        assert response.json()["error"]["code"] == case.rpc_error
    if case.tool_error is not None:
        result = response.json()["result"]
        assert result["isError"] is True
        assert "structuredContent" not in result
        assert result["_meta"][ERROR_META_KEY]["error"]["code"] == case.tool_error


async def test_a_request_without_accept_is_answered_as_json(bad_input_stack: Stack) -> None:
    """No Accept header means any media type (RFC 9110), so the edge answers JSON rather than
    refusing clients that omit it."""
    token = bad_input_stack.agent_tokens["engineering-agent"]
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    del headers["Accept"]
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(bad_input_stack.mcp_url, content=LIST, headers=headers)
    assert response.status_code == 200
    assert [tool["name"] for tool in response.json()["result"]["tools"]][:1] == ["application.get"]
