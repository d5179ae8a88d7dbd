"""The shape of one JSON-RPC 2.0 message, checked before the MCP SDK sees it.

The SDK reads a message whose ``id`` is an object, a boolean or a fraction as a notification and
answers 202 (the call is silently dropped), and reports a missing ``jsonrpc`` or a non-object
``params`` as -32602 with the whole pydantic report, input values included. Here each of those
is an Invalid Request (-32600) naming the one member that is wrong. Bodies that are not JSON at
all are left to the SDK, which answers -32700.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


def _problem(message: Any) -> str | None:
    if not isinstance(message, dict):
        return "a JSON-RPC message must be a JSON object"
    if message.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    request_id = message.get("id")
    if "id" in message and (isinstance(request_id, bool) or not isinstance(request_id, str | int)):
        return "id must be a string or an integer"
    if "method" in message and not isinstance(message["method"], str):
        return "method must be a string"
    if "params" in message and not isinstance(message["params"], dict):
        return "params must be a JSON object"
    return None


@dataclass(frozen=True)
class Message:
    """One JSON body, parsed once for every check the edge makes on it."""

    value: Any

    @property
    def problem(self) -> str | None:
        """What is wrong with the envelope, or None when it is well formed."""
        return _problem(self.value)

    @property
    def is_tool_call(self) -> bool:
        """Whether it asks for ``tools/call``, however malformed the rest: such a message from
        an authenticated agent is a call, and every call is audited."""
        return isinstance(self.value, dict) and self.value.get("method") == "tools/call"

    @property
    def tool_name(self) -> object:
        """``params.name`` as sent (any JSON value), or None when absent."""
        params = self.value.get("params") if isinstance(self.value, dict) else None
        return params.get("name") if isinstance(params, dict) else None


def parse(body: bytes) -> Message | None:
    """The message in ``body``, or None when it is not JSON at all."""
    try:
        return Message(json.loads(body))
    except (ValueError, RecursionError):
        return None
