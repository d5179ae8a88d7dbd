"""Raw HTTP requests to the MCP edge, for the checks the official client never lets one make."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx
import mcp_types

from nemo_toolplane.mcp.endpoint import ERROR_META_KEY

MODERN = "2026-07-28"


def modern_call(tool: str, arguments: object, *, request_id: int = 1) -> dict[str, Any]:
    """A 2026-07-28 ``tools/call`` request body (with its per-request envelope); ``arguments``
    may be any JSON value, to send malformed calls too."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }


def _routing_headers(body: Any) -> dict[str, str]:
    if not isinstance(body, dict) or "params" not in body or "_meta" not in body["params"]:
        return {}
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": body["method"]}
    if "name" in body["params"]:
        headers["Mcp-Name"] = body["params"]["name"]
    return headers


async def post(
    url: str,
    body: Any,
    *,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
    client: httpx.AsyncClient | None = None,
) -> httpx.Response:
    """POST one JSON body as an MCP client would (routing headers for modern requests)."""
    all_headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        **_routing_headers(body),
        **(headers or {}),
    }
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    if client is not None:
        return await client.post(url, json=body, headers=all_headers)
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(url, json=body, headers=all_headers)


def result_text(result: mcp_types.CallToolResult) -> str:
    """The text of a tool result's single text block."""
    [block] = result.content
    assert isinstance(block, mcp_types.TextContent)
    return block.text


def error_envelope(result: mcp_types.CallToolResult) -> dict[str, Any]:
    """The error envelope of a failed call, checked to be where every client finds it: the text
    is its JSON, ``_meta`` holds the same, and there is no ``structuredContent`` that a client
    would validate against the tool's output schema."""
    assert result.is_error, result
    assert result.structured_content is None, result.structured_content
    envelope: dict[str, Any] = (result.meta or {})[ERROR_META_KEY]
    assert json.loads(result_text(result)) == envelope
    return envelope


async def outcome(http: httpx.AsyncClient, url: str, body: Any, token: str) -> str:
    """One call's outcome in a word: "ok", the error code of a failed call (with "/<limit>"
    when a limit refused it), or the HTTP status of a refused request."""
    response = await post(url, body, token=token, client=http)
    if response.status_code != 200:
        return str(response.status_code)
    result: dict[str, Any] = response.json()["result"]
    if not result.get("isError"):
        return "ok"
    error: dict[str, Any] = result["_meta"][ERROR_META_KEY]["error"]
    limit = (error.get("details") or {}).get("limit")
    return f"{error['code']}/{limit}" if limit else str(error["code"])
