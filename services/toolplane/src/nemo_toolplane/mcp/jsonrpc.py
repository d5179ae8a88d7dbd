"""The shape of one JSON-RPC 2.0 message, checked before the MCP SDK sees it.

The SDK reads a message whose ``id`` is an object, a boolean or a fraction as a notification and
answers 202 (the call is silently dropped), and reports a missing ``jsonrpc`` or a non-object
``params`` as -32602 with the whole pydantic report, input values included. Here each of those
is an Invalid Request (-32600) naming the one member that is wrong. A body that is not UTF-8, not
JSON, or nested deeper than any message needs (:data:`MAX_DEPTH`) is unparsable: a Parse error
(-32700) here, before any parser meets a thousand levels of brackets.

It also reads which protocol revision a body names itself, so the edge can refuse a request whose
``MCP-Protocol-Version`` header says otherwise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum
from typing import Any

from mcp_types import PROTOCOL_VERSION_META_KEY

#: Deepest nesting of arrays and objects accepted in a message (tool arguments are shallow).
MAX_DEPTH = 64
# What an audit row keeps of a method name a body gives.
_METHOD = re.compile(r"[A-Za-z0-9_./:-]{1,64}")


class Unparsable(Enum):
    """Why a body is no JSON-RPC message at all."""

    NOT_UTF8 = "body is not UTF-8"
    NOT_JSON = "body is not JSON"
    TOO_DEEP = "body is nested too deep"


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest deeper than ``limit`` (iteratively: no recursion)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


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
    def method(self) -> str | None:
        """The method it names, when that is a plausible method name (an audit row keeps it)."""
        method = self.value.get("method") if isinstance(self.value, dict) else None
        return method if isinstance(method, str) and _METHOD.fullmatch(method) else None

    @property
    def is_batch(self) -> bool:
        return isinstance(self.value, list)

    def elements(self) -> list[JsonRpcMessage]:
        """The messages of a batch (the message itself otherwise)."""
        return [JsonRpcMessage(item) for item in self.value] if self.is_batch else [self]

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


def parse(body: bytes) -> JsonRpcMessage | Unparsable:
    """The message (or batch) in ``body``, or why there is none."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return Unparsable.NOT_UTF8
    try:
        value = json.loads(text)
    except RecursionError:
        return Unparsable.TOO_DEEP
    except ValueError:
        return Unparsable.NOT_JSON
    if _depth_exceeds(value, MAX_DEPTH):
        return Unparsable.TOO_DEEP
    return JsonRpcMessage(value)


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
