"""The MCP edge: Streamable HTTP on ``/mcp``, stateless, JSON responses.

The official SDK's low-level server speaks the protocol (revisions 2025-11-25 with ``initialize``
and 2026-07-28 with per-request envelopes and ``server/discover``). In front of it, this module's
ASGI endpoint does what belongs to the tool plane, in this order (after the browser checks of
:mod:`nemo_toolplane.mcp.origins`: foreign ``Origin`` 403, foreign ``Host`` 421):

1. ``Authorization: Bearer <agent token>`` missing or unknown -> 401 with ``WWW-Authenticate``,
   before any other table is read (logged, not audited: there is no agent to audit); 429
   instead when the client address has failed too often (:mod:`nemo_toolplane.agent_auth`,
   which the gRPC edge shares);
2. any method but POST -> 405 with ``Allow: POST`` (there is no stream to GET, no session to
   DELETE);
3. the principal {agent, session, user, request} is handed to the SDK's handlers of the request
   (in a context variable, which also tells the endpoint whether the router got the call) and
   ``X-Request-Id`` is echoed on the response;
4. a body over 1 MiB -> 413, a batch or a malformed JSON-RPC envelope -> 400 (-32600);
5. an ``MCP-Protocol-Version`` header that disagrees with the revision the body names -> 400
   (-32020), one naming no revision served here -> 400 (-32022).

``tools/list`` shows the tools the agent's grants let it see, on one page (so any cursor is
-32602); ``tools/call`` goes through the router. An unknown tool is a JSON-RPC error (-32602);
every tool-level failure, invalid arguments included, is a result with ``isError: true`` whose
text is the error envelope as JSON, with the same envelope under ``_meta["dev.nemo/error"]``
and no ``structuredContent`` (which clients check against the tool's output schema). A
``tools/call`` refused before it reaches the router (by the checks here, or by the SDK: arguments
that are not an object, a name that is not a string) keeps its protocol error and is audited as
invalid input all the same.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from opentelemetry import context as otel_context
from opentelemetry import propagate
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from nemo_toolplane.agent_auth import AgentAuthenticator, AuthRefusal, bearer_token
from nemo_toolplane.audit.log import CallStatus
from nemo_toolplane.envelope import ErrorCode, ToolError
from nemo_toolplane.mcp.jsonrpc import JsonRpcMessage, VersionProblem, parse, version_problem
from nemo_toolplane.principal import (
    InvalidIdentifier,
    Principal,
    build_principal,
    refusal_principal,
)
from nemo_toolplane.registry import Registry
from nemo_toolplane.router import ListedTool, ToolRouter
from nemo_toolplane.rules.store import AgentRules

logger = logging.getLogger(__name__)

SERVER_NAME = "nemo-toolplane"
SUPPORTED_PROTOCOL_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
_META_PREFIX = "dev.nemo/"
#: Where a failed call's result carries the error envelope for code to read.
ERROR_META_KEY = f"{_META_PREFIX}error"
#: Largest request body accepted; tool arguments are small.
MAX_BODY_BYTES = 1024 * 1024
_AUTHENTICATION_REQUIRED = ToolError(
    ErrorCode.AUTHENTICATION_ERROR,
    "a valid agent token is required (Authorization: Bearer <token>)",
)

INSTRUCTIONS = (
    "Nemo tool plane: capabilities on the Nemo learning platform. Learner data is pseudonymous "
    "(learner_ref); every call is authorized by your grants and policies and audited. Failures "
    "come back as results with isError whose text is the JSON envelope {success, error: {code, "
    f'message, retryable, details}}}} (also in _meta "{ERROR_META_KEY}"); APPROVAL_REQUIRED '
    "means a person must approve, then repeat the call."
)


def mcp_tool(listed: ListedTool) -> types.Tool:
    """A tool as ``tools/list`` shows it (under its listed name; the versioned id in ``_meta``)."""
    tool = listed.tool
    hints = tool.hints
    return types.Tool(
        name=listed.name,
        description=tool.description,
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=hints.read_only,
            destructive_hint=hints.destructive,
            idempotent_hint=hints.idempotent,
            open_world_hint=hints.open_world,
        ),
        _meta={
            f"{_META_PREFIX}tool_id": tool.tool_id,
            f"{_META_PREFIX}version": tool.version,
            f"{_META_PREFIX}category": tool.category,
            f"{_META_PREFIX}risk": tool.risk.value,
            f"{_META_PREFIX}mode": tool.mode.value,
        },
    )


def error_result(envelope: dict[str, Any]) -> types.CallToolResult:
    """A tool-level failure as a result every client can read: the envelope as JSON text (what a
    model sees) and under ``_meta`` (for code). ``structuredContent`` stays empty: a client
    validates it against the tool's output schema, which describes success, and rejects the whole
    result when it does not match."""
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(envelope, ensure_ascii=False))],
        is_error=True,
        _meta={ERROR_META_KEY: envelope},
    )


@dataclass
class _AdmittedRequest:
    """What the endpoint admitted, for the SDK's handlers of the same request."""

    principal: Principal
    rules: AgentRules
    routed: bool = False
    """Set by the handler once a tools/call reached the router (which audits it)."""


# Set by the endpoint around the SDK's handling of one request; the SDK's tasks for the request
# start inside it, so they see the value (and share the object, which carries ``routed`` back).
_admitted: ContextVar[_AdmittedRequest | None] = ContextVar("nemo_mcp_admitted", default=None)


def _caller(*, routing: bool = False) -> tuple[Principal, AgentRules]:
    """The principal and rules the endpoint admitted for this request; ``routing`` tells the
    endpoint that the router (which audits) has the call."""
    admitted = _admitted.get()
    if admitted is None:
        raise MCPError(
            types.INTERNAL_ERROR,
            "request reached the server unauthenticated",
            _AUTHENTICATION_REQUIRED.envelope(),
        )
    if routing:
        admitted.routed = True
    return admitted.principal, admitted.rules


def build_mcp_server(router: ToolRouter, registry: Registry) -> Server[Any]:
    """The SDK's low-level server with the two tool handlers."""

    def input_schema(name: str) -> dict[str, Any] | None:
        # Lets the SDK check Mcp-Param-* headers without running tools/list on every call.
        tool = registry.resolve(name)
        return tool.input_schema if tool is not None else None

    listed: dict[str, types.Tool] = {}

    async def list_tools(
        _ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if params is not None and params.cursor is not None:
            # The first page is the whole list, so no cursor this server could have issued exists.
            raise MCPError(types.INVALID_PARAMS, "Invalid cursor: every tool is on the first page")
        tools = router.list_tools(*_caller())
        for tool in tools:
            if tool.name not in listed:
                listed[tool.name] = mcp_tool(tool)
        return types.ListToolsResult(tools=[listed[tool.name] for tool in tools])

    async def call_tool(
        _ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        principal, rules = _caller(routing=True)
        outcome = await router.call(
            principal, rules, params.name, params.arguments, transport="mcp"
        )
        if outcome.status is CallStatus.NOT_FOUND:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        if outcome.error is not None:
            return error_result(outcome.error.envelope())
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(outcome.output, ensure_ascii=False))],
            structured_content=outcome.output,
        )

    return Server(
        SERVER_NAME,
        version="1",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _jsonrpc_error(
    status: int, code: int, message: str, *, request_id: str | int | None = None, **extra: Any
) -> Response:
    body: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": message},
    }
    data = extra.pop("data", None)
    if data is not None:
        body["error"]["data"] = data
    return Response(
        json.dumps(body), status_code=status, media_type="application/json", headers=extra or None
    )


def _version_refusal(header: str | None, message: JsonRpcMessage | None) -> Response | None:
    """The answer to a request whose protocol version cannot be served here, or None."""
    problem = version_problem(header, message, SUPPORTED_PROTOCOL_VERSIONS)
    request_id = message.request_id if message is not None else None
    if problem is VersionProblem.MISMATCH:
        return _jsonrpc_error(
            400,
            types.HEADER_MISMATCH,
            "MCP-Protocol-Version header does not match the protocol version of the body",
            request_id=request_id,
        )
    if problem is VersionProblem.UNSUPPORTED:
        return _jsonrpc_error(
            400,
            types.UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            request_id=request_id,
            data={"supported": list(SUPPORTED_PROTOCOL_VERSIONS), "requested": (header or "")[:64]},
        )
    return None


async def _read_body(receive: Receive) -> bytes | None:
    """The request body, or None once it grows past :data:`MAX_BODY_BYTES` (the rest unread)."""
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


@dataclass(frozen=True)
class _Post:
    """One admitted POST as the checks before the SDK see it."""

    #: None when it was larger than :data:`MAX_BODY_BYTES`.
    body: bytes | None
    #: The ``MCP-Protocol-Version`` header, when sent.
    version_header: str | None

    @cached_property
    def message(self) -> JsonRpcMessage | None:
        """The parsed body; None when there is none, or it is not JSON."""
        return parse(self.body) if self.body is not None else None

    @property
    def tool_call(self) -> JsonRpcMessage | None:
        """The message when it asks for ``tools/call``, however malformed the rest."""
        message = self.message
        return message if message is not None and message.is_tool_call else None


@dataclass(frozen=True)
class _Refusal:
    """The answer to a POST refused before the SDK sees it, and how its audit row names it."""

    response: Response
    #: The fixed label the audit row carries (never the input).
    problem: str
    #: Audited only when set; an audited refusal names the tool a ``tools/call`` asked for.
    audited: bool = True
    tool_name: object = None


def _too_large(post: _Post) -> _Refusal | None:
    if post.body is not None:
        return None
    return _Refusal(
        _jsonrpc_error(413, types.INVALID_REQUEST, "Request body too large"), "body too large"
    )


def _batch(post: _Post) -> _Refusal | None:
    # JSON-RPC batches were removed from MCP: exactly one message per POST.
    if post.body is None or post.body.lstrip()[:1] != b"[":
        return None
    batch = _jsonrpc_error(400, types.INVALID_REQUEST, "Send exactly one JSON-RPC message per POST")
    return _Refusal(batch, "batch")


def _malformed_envelope(post: _Post) -> _Refusal | None:
    problem = post.message.problem if post.message is not None else None
    if problem is None:
        return None
    invalid = _jsonrpc_error(400, types.INVALID_REQUEST, f"Invalid Request: {problem}")
    # Only a call is audited here: any other malformed message is no attempt to use a tool.
    tool_call = post.tool_call
    return _Refusal(
        invalid,
        "JSON-RPC envelope",
        audited=tool_call is not None,
        tool_name=tool_call.tool_name if tool_call is not None else None,
    )


def _unserved_version(post: _Post) -> _Refusal | None:
    refused = _version_refusal(post.version_header, post.message)
    if refused is None:
        return None
    tool_call = post.tool_call
    return _Refusal(
        refused, "protocol version", tool_name=tool_call.tool_name if tool_call else None
    )


#: What the endpoint refuses before the SDK sees a POST, in this order; the first that applies
#: answers (the numbers 4 and 5 of the module docstring).
_CHECKS: tuple[Callable[[_Post], _Refusal | None], ...] = (
    _too_large,
    _batch,
    _malformed_envelope,
    _unserved_version,
)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the already-read body over once, then the rest of the stream."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


class McpEndpoint:
    """The ASGI app of ``/mcp``: the checks above, then the SDK's session manager."""

    def __init__(
        self,
        router: ToolRouter,
        registry: Registry,
        authenticator: AgentAuthenticator,
    ) -> None:
        self.server = build_mcp_server(router, registry)
        self.manager = StreamableHTTPSessionManager(
            app=self.server, json_response=True, stateless=True
        )
        self._router = router
        self._authenticator = authenticator

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The SDK's session manager must run for the edge's lifetime."""
        async with self.manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        admitted = await self._admit(scope)
        if isinstance(admitted, Response):
            await admitted(scope, receive, send)
            return
        principal = admitted.principal
        ids = [(b"x-request-id", principal.request_id.encode()),
               (b"x-nemo-call-id", principal.call_id.encode())]  # fmt: skip

        async def send_with_request_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *ids]
            await send(message)

        post = _Post(await _read_body(receive), Headers(scope=scope).get("mcp-protocol-version"))
        for check in _CHECKS:
            if (refusal := check(post)) is not None:
                # Refused here, an authenticated request still leaves its audit row.
                if refusal.audited:
                    self._router.refuse(
                        principal, refusal.tool_name, transport="mcp", problem=refusal.problem
                    )
                await refusal.response(scope, receive, send_with_request_id)
                return
        assert post.body is not None  # noqa: S101  narrows the type: _too_large let it through
        # W3C trace context from the HTTP headers; the SDK prefers one carried in `_meta`.
        trace = otel_context.attach(propagate.extract(Headers(scope=scope)))
        handed_over = _admitted.set(admitted)
        try:
            await self.manager.handle_request(
                scope, _replay(post.body, receive), send_with_request_id
            )
        finally:
            _admitted.reset(handed_over)
            otel_context.detach(trace)
        if (tool_call := post.tool_call) is not None and not admitted.routed:
            # The SDK answered it without calling the handler (its parameters do not fit).
            self._router.refuse(
                principal, tool_call.tool_name, transport="mcp", problem="tools/call parameters"
            )

    async def _admit(self, scope: Scope) -> _AdmittedRequest | Response:
        headers = Headers(scope=scope)
        client = scope.get("client")
        source = client[0] if client else "unknown"
        agent = await self._authenticator.authenticate(
            bearer_token(headers.get("authorization")), source
        )
        if isinstance(agent, AuthRefusal):
            return _refusal_response(agent, source)
        if scope["method"] != "POST":
            return _jsonrpc_error(405, types.INVALID_REQUEST, "Method not allowed", Allow="POST")

        session_id = headers.get("x-nemo12-session-id") or headers.get("mcp-session-id")
        user_id, request_id = headers.get("x-nemo12-user-id"), headers.get("x-request-id")
        try:
            principal = build_principal(
                agent.identity, session_id=session_id, user_id=user_id, request_id=request_id
            )
        except InvalidIdentifier as invalid:
            # Audited under the ids that are usable: an unusable one is not kept.
            refused = refusal_principal(
                agent.identity, session_id=session_id, user_id=user_id, request_id=request_id
            )
            self._router.refuse(refused, None, transport="mcp", problem="identifier")
            return _jsonrpc_error(400, types.INVALID_REQUEST, str(invalid))
        return _AdmittedRequest(principal, agent.rules)


def _refusal_response(refusal: AuthRefusal, source: str) -> Response:
    """401 with a challenge, or 429 when the address has failed too often."""
    if refusal.retry_after_seconds is not None:
        retry = refusal.retry_after_seconds
        limited = ToolError(
            ErrorCode.RATE_LIMITED,
            "too many failed authentications from this address",
            details={"retry_after_seconds": retry},
        )
        return _jsonrpc_error(
            429,
            types.INVALID_REQUEST,
            "Too many failed authentications",
            data=limited.envelope(),
            **{"Retry-After": str(retry)},
        )
    logger.warning(
        "mcp request refused: no valid agent token",
        extra={
            "source": source,
            "problem": "unknown token" if refusal.token_sent else "no bearer token",
        },
    )
    challenge = 'Bearer realm="nemo-toolplane"' + (
        ', error="invalid_token"' if refusal.token_sent else ""
    )
    # The same envelope as every tool-level failure, so an agent branches on one code.
    return _jsonrpc_error(
        401,
        types.INVALID_REQUEST,
        "Authentication required",
        data=_AUTHENTICATION_REQUIRED.envelope(),
        **{"WWW-Authenticate": challenge},
    )
