"""Raw HTTP requests to the MCP edge, for the checks the official client never lets one make."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx
import mcp_types

from nemo_toolplane.mcp_edge import ERROR_META_KEY

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
