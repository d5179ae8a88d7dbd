"""The shape of one JSON-RPC 2.0 message, checked before the MCP SDK sees it.

The SDK reads a message whose ``id`` is an object, a boolean or a fraction as a notification and
answers 202 (the call is silently dropped), and reports a missing ``jsonrpc`` or a non-object
``params`` as -32602 with the whole pydantic report, input values included. Here each of those
is an Invalid Request (-32600) naming the one member that is wrong. Bodies that are not JSON at
all are left to the SDK, which answers -32700.
"""

from __future__ import annotations

import json
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


def shape_problem(body: bytes) -> str | None:
    """What is wrong with the envelope of ``body``, or None when it is well formed or not JSON."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return _problem(message)
