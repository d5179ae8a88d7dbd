"""Every refusal leaves exactly one audit row naming the method and, where known, the tool: gRPC
calls with unusable ids or a refused credential, bodies the edge cannot parse, each message of a
batch, refused requests that are no tool call (which never pass for one), media types read
case-insensitively, and requests whose headers or body come too slowly."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import grpc
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_core.errors import error_details
from nemo_protos.toolplane.v1 import toolplane_service_pb2 as pb
from services.toolplane.tests.conftest import AgentTokens, RunningToolPlane, StartToolPlane
from services.toolplane.tests.mcp_http import MODERN, modern_call
from services.toolplane.tests.test_servicer import agent, arguments

_SETTINGS = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
#: What an id must not be: empty is generated instead, so these are the unusable ones.
_BAD_IDS = st.one_of(
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=129, max_size=200),
    st.text(min_size=1, max_size=20).filter(lambda s: any(not 0x21 <= ord(c) <= 0x7E for c in s)),
)


async def _rows(plane: RunningToolPlane, owner: Any, column: str, value: str) -> list[Any]:
    await plane.plane.audit.flush()
    return list(await owner.fetch(f"SELECT * FROM toolplane.audit_logs WHERE {column} = $1", value))


def _headers(token: str, **extra: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
        **extra,
    }


@_SETTINGS
@given(field=st.sampled_from(["session_id", "user_id", "request_id"]), bad=_BAD_IDS)
async def test_grpc_calls_refused_for_an_unusable_id_are_audited_once(
    toolplane: RunningToolPlane, tokens: AgentTokens, owner: Any, field: str, bad: str
) -> None:
    marker = f"S-ids-{uuid.uuid4()}" if field != "session_id" else f"REQ-ids-{uuid.uuid4()}"
    known = {"request_id": marker} if field == "session_id" else {"session_id": marker}
    request = pb.CallToolRequest(
        tool="docs.search_docs", arguments=arguments({"query": "x"}), **{field: bad}, **known
    )
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await toolplane.tools_stub().CallTool(request, metadata=agent(tokens.research), timeout=10)
    assert error_details(refused.value).reason == "INVALID_IDENTIFIER"
    [row] = await _rows(toolplane, owner, next(iter(known)), marker)
    assert (row["method"], row["tool_id"], row["status"], row["agent_id"]) == (
        "CallTool",
        "docs.search_docs:v1",
        "invalid",
        "research-agent",
    )
    assert bad not in (row["session_id"], row["user_id"], row["request_id"])


async def test_grpc_list_and_refused_credentials_are_audited_as_what_they_were(
    toolplane: RunningToolPlane, tokens: AgentTokens, owner: Any
) -> None:
    # ListTools has no ids in its request; a refused credential is recorded under the ids sent.
    marker = f"REQ-cred-{uuid.uuid4()}"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await toolplane.tools_stub().CallTool(
            pb.CallToolRequest(tool="learner.get_profile", request_id=marker),
            metadata=agent("nemo_at_not-a-token"),
            timeout=10,
        )
    assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
    [row] = await _rows(toolplane, owner, "request_id", marker)
    assert (row["method"], row["tool_id"], row["agent_id"], row["credential_kind"]) == (
        "CallTool",
        "learner.get_profile:v1",
        None,
        "agent_token",
    )
    assert (row["status"], row["error_code"]) == ("denied", "AUTHENTICATION_ERROR")


@_SETTINGS
@given(data=st.data())
async def test_a_body_that_is_not_utf8_is_400_with_one_row(
    toolplane: RunningToolPlane, tokens: AgentTokens, owner: Any, data: st.DataObject
) -> None:
    body = json.dumps(modern_call("docs.search_docs", {"query": data.draw(st.text())})).encode()
    at = data.draw(st.integers(0, len(body)))
    bad = data.draw(st.sampled_from([b"\x80", b"\xc3", b"\xff\xfe", b"\xed\xa0\x80"]))
    marker = f"REQ-utf8-{uuid.uuid4()}"
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            toolplane.mcp_url,
            content=body[:at] + bad + body[at:],
            headers=_headers(tokens.research, **{"X-Request-Id": marker}),
        )
    assert (response.status_code, response.json()["error"]["code"]) == (400, -32700)
    [row] = await _rows(toolplane, owner, "request_id", marker)
    assert (row["method"], row["tool_id"], row["metadata"]["malformed"]) == (
        "POST /mcp",
        None,
        "body is not UTF-8",
    )


@pytest.mark.parametrize("depth", [65, 1_000, 5_000])
async def test_a_body_nested_a_thousand_levels_deep_is_400_with_one_row(
    toolplane: RunningToolPlane, tokens: AgentTokens, owner: Any, depth: int
) -> None:
    nested = "[" * depth + "]" * depth
    call = modern_call("docs.search_docs", {"q": "NESTED"})
    body = json.dumps(call).replace('"NESTED"', nested)
    marker = f"REQ-deep-{uuid.uuid4()}"
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            toolplane.mcp_url,
            content=body.encode(),
            headers=_headers(tokens.research, **{"X-Request-Id": marker}),
        )
    assert (response.status_code, response.json()["error"]["code"]) == (400, -32700)
    [row] = await _rows(toolplane, owner, "request_id", marker)
    assert row["metadata"]["malformed"] == "body is nested too deep"


_MESSAGES = st.one_of(
    st.builds(
        lambda name: {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name}},
        st.sampled_from(["docs.search_docs", "learner.get_profile", "no.such_tool"]),
    ),
    st.sampled_from(
        [
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
        ]
    ),
)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(batch=st.lists(_MESSAGES, min_size=1, max_size=80))
async def test_a_batch_leaves_one_row_per_message_naming_its_method_and_tool(
    toolplane: RunningToolPlane, tokens: AgentTokens, owner: Any, batch: list[dict[str, Any]]
) -> None:
    marker = f"S-batch-{uuid.uuid4()}"
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            toolplane.mcp_url,
            content=json.dumps(batch).encode(),
            headers=_headers(tokens.research, **{"X-Nemo12-Session-Id": marker}),
        )
    assert response.status_code == 400
    rows = await _rows(toolplane, owner, "session_id", marker)
    kept = batch[:64]
    assert len(rows) == len(kept)
    names = {
        "docs.search_docs": "docs.search_docs:v1",
        "learner.get_profile": "learner.get_profile:v1",
    }
    expected = sorted(
        (
            m["method"],
            names.get(m["params"]["name"], m["params"]["name"])
            if m["method"] == "tools/call"
            else None,
        )
        for m in kept
    )
    assert sorted((row["method"], row["tool_id"]) for row in rows) == expected
    assert len({row["call_id"] for row in rows}) == len(rows)


@pytest.mark.parametrize("method", ["tools/list", "ping"])
async def test_list_and_ping_are_never_recorded_as_tool_calls(
    toolplane: RunningToolPlane, tokens: AgentTokens, owner: Any, method: str
) -> None:
    marker = f"S-{method.replace('/', '-')}-{uuid.uuid4()}"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method}).encode()
    async with httpx.AsyncClient(timeout=10) as http:
        answered = await http.post(
            toolplane.mcp_url,
            content=body,
            headers=_headers(tokens.research, **{"X-Nemo12-Session-Id": marker}),
        )
        assert answered.status_code == 200
        assert await _rows(toolplane, owner, "session_id", marker) == []
        refused = await http.post(
            toolplane.mcp_url,
            content=body,
            headers=_headers(
                tokens.research,
                **{"X-Nemo12-Session-Id": marker, "MCP-Protocol-Version": "1999-01-01"},
            ),
        )
        assert refused.status_code == 400
        unknown = await http.post(
            toolplane.mcp_url,
            content=json.dumps({"jsonrpc": "2.0", "id": 2, "method": "no/such"}).encode(),
            headers=_headers(tokens.research, **{"X-Nemo12-Session-Id": marker}),
        )
        assert unknown.json()["error"]["code"] == -32601
    rows = await _rows(toolplane, owner, "session_id", marker)
    assert sorted((row["method"], row["tool_id"]) for row in rows) == sorted(
        [(method, None), ("no/such", None)]
    )


@_SETTINGS
@given(
    spelling=st.lists(st.booleans(), min_size=16, max_size=16).map(
        lambda upper: "".join(
            c.upper() if up else c for c, up in zip("application/json", upper, strict=True)
        )
    ),
    parameters=st.sampled_from(["", "; charset=utf-8", ";CHARSET=UTF-8", ' ; charset="utf-8"']),
)
async def test_json_media_types_are_read_case_insensitively(
    toolplane: RunningToolPlane, tokens: AgentTokens, spelling: str, parameters: str
) -> None:
    content_type = spelling + parameters
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            toolplane.mcp_url,
            content=body,
            headers=_headers(tokens.research, **{"Content-Type": content_type}),
        )
    assert response.status_code == 200, (content_type, response.text)
    assert response.json()["result"]["tools"]


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/jsonx", "", "multipart/form-data"]
)
async def test_other_media_types_are_415_with_one_row(
    toolplane: RunningToolPlane, tokens: AgentTokens, owner: Any, content_type: str
) -> None:
    marker = f"REQ-media-{uuid.uuid4()}"
    body = json.dumps(modern_call("docs.search_docs", {"query": "x"})).encode()
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            toolplane.mcp_url,
            content=body,
            headers=_headers(
                tokens.research,
                **{
                    "Content-Type": content_type,
                    "X-Request-Id": marker,
                    "MCP-Protocol-Version": MODERN,
                },
            ),
        )
    assert response.status_code == 415
    [row] = await _rows(toolplane, owner, "request_id", marker)
    assert (row["method"], row["tool_id"], row["metadata"]["malformed"]) == (
        "tools/call",
        "docs.search_docs:v1",
        "media type",
    )


@pytest.fixture(scope="module")
async def impatient(start_toolplane: StartToolPlane) -> RunningToolPlane:
    """A tool plane that waits half a second for headers and for a body."""
    return await start_toolplane(http_header_timeout_seconds=0.5, http_body_timeout_seconds=0.5)


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
    async with asyncio.timeout(seconds):
        return await reader.read()


async def test_headers_that_come_too_slowly_close_the_connection(
    impatient: RunningToolPlane,
) -> None:
    port = int(impatient.mcp_url.split(":")[2].split("/")[0])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    await writer.drain()

    # A header a byte at a time, for longer than the bound: the server closes the connection.
    async def trickle() -> None:
        for byte in b"X-Slow: " + b"a" * 100:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.05)

    trickling = asyncio.create_task(trickle())
    try:
        assert await _closed_within(reader, 10) == b""
    finally:
        trickling.cancel()
        writer.close()


async def test_a_body_that_comes_too_slowly_is_408_with_one_row(
    impatient: RunningToolPlane, tokens: AgentTokens, owner: Any
) -> None:
    port = int(impatient.mcp_url.split(":")[2].split("/")[0])
    marker = f"REQ-slow-body-{uuid.uuid4()}"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
        f"Authorization: Bearer {tokens.research}\r\nX-Request-Id: {marker}\r\n"
        "Content-Length: 1000\r\n\r\n{"
    )
    writer.write(head.encode())
    await writer.drain()
    try:
        answer = await _closed_within(reader, 10)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408")
    [row] = await _rows(impatient, owner, "request_id", marker)
    assert (row["method"], row["metadata"]["malformed"]) == ("POST /mcp", "body timeout")
