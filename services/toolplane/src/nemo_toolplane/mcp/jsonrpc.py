"""The shape of one JSON-RPC 2.0 message, checked before the MCP SDK sees it.

The SDK reads a message whose ``id`` is an object, a boolean or a fraction as a notification and
answers 202 (the call is silently dropped), and reports a missing ``jsonrpc`` or a non-object
``params`` as -32602 with the whole pydantic report, input values included. Here each of those
is an Invalid Request (-32600) naming the one member that is wrong. Bodies that are not JSON at
all are left to the SDK, which answers -32700.

It also reads which protocol revision a body names itself, so the edge can refuse a request whose
``MCP-Protocol-Version`` header says otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum
from typing import Any

from mcp_types import PROTOCOL_VERSION_META_KEY


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
class NamedVersion:
    """A protocol revision as a body names it."""

    value: object
    #: Named by the 2026-07-28 per-request envelope (``params._meta``); else by ``initialize``.
    in_envelope: bool


@dataclass(frozen=True)
class JsonRpcMessage:
    """One JSON body, parsed once for every check the edge makes on it."""

    value: Any

    @property
    def problem(self) -> str | None:
        """What is wrong with the envelope, or None when it is well formed."""
        return _problem(self.value)

    @property
    def request_id(self) -> str | int | None:
        """The request's id when it is a valid one (to answer with), else None."""
        request_id = self.value.get("id") if isinstance(self.value, dict) else None
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return None
        return request_id

    @property
    def protocol_version(self) -> NamedVersion | None:
        """The revision the body names (any JSON value): a 2026-07-28 request in ``params._meta``,
        an ``initialize`` in ``params.protocolVersion``. Other handshake-era requests name none."""
        params = self.value.get("params") if isinstance(self.value, dict) else None
        if not isinstance(params, dict):
            return None
        meta = params.get("_meta")
        if isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta:
            return NamedVersion(meta[PROTOCOL_VERSION_META_KEY], in_envelope=True)
        if self.value.get("method") == "initialize" and "protocolVersion" in params:
            return NamedVersion(params["protocolVersion"], in_envelope=False)
        return None

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


def parse(body: bytes) -> JsonRpcMessage | None:
    """The message in ``body``, or None when it is not JSON at all."""
    try:
        return JsonRpcMessage(json.loads(body))
    except (ValueError, RecursionError):
        return None


class VersionProblem(Enum):
    """Why a request's protocol version cannot be served."""

    #: The header and the body name different revisions, or an envelope comes without a header.
    MISMATCH = "mismatch"
    #: The header names a revision not served, and the body names none of its own.
    UNSUPPORTED = "unsupported"


def version_problem(
    header: str | None, message: JsonRpcMessage | None, supported: Collection[str]
) -> VersionProblem | None:
    """What is wrong with the protocol version of a request carrying ``header`` (the
    ``MCP-Protocol-Version`` value, None when absent), or None.

    A body that names its revision must agree with the header, and an envelope needs the header:
    otherwise an intermediary routing on the header and the server reading the body act on two
    different requests. A header naming no revision in ``supported`` is a problem only for bodies
    without an envelope: for 2026-07-28 bodies the SDK refuses it itself, listing the revisions
    ``server/discover`` lists.
    """
    named = message.protocol_version if message is not None else None
    if named is not None and (named.value != header if header is not None else named.in_envelope):
        return VersionProblem.MISMATCH
    if (
        header is not None
        and header not in supported
        and not (named is not None and named.in_envelope)
    ):
        return VersionProblem.UNSUPPORTED
    return None
