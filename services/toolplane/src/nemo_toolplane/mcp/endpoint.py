"""The MCP edge: Streamable HTTP on ``/mcp``, stateless, JSON responses.

The official SDK's low-level server speaks the protocol (revisions 2025-11-25 with ``initialize``
and 2026-07-28 with per-request envelopes and ``server/discover``). In front of it, this module's
ASGI endpoint does what belongs to the tool plane, in this order (after the browser checks of
:mod:`nemo_toolplane.mcp.origins`: foreign ``Origin`` 403, foreign ``Host`` 421):

1. more than one ``Authorization`` header -> 400 (which one counts would depend on who reads);
2. ``Authorization: Bearer <credential>``, an agent token or an OAuth access token
   (:mod:`nemo_toolplane.agent_auth`, which the gRPC edge shares): missing or invalid -> 401 with
   a ``WWW-Authenticate`` challenge naming the resource metadata, an OAuth client mapped to no
   agent -> 403, a credential that cannot be checked now -> 503; 429 instead when the client
   address has failed too often;
3. any method but POST -> 405 with ``Allow: POST`` (there is no stream to GET, no session to
   DELETE);
4. the body, read within ``body_timeout_seconds`` (408 past it), over 1 MiB -> 413; a media type
   other than JSON -> 415; a body that is not UTF-8 JSON nested at most
   :data:`~nemo_toolplane.mcp.jsonrpc.MAX_DEPTH` deep -> 400 (-32700);
5. an unusable session, user or request id -> 400; a batch or a malformed JSON-RPC envelope ->
   400 (-32600); an ``MCP-Protocol-Version`` header that disagrees with the revision the body
   names -> 400 (-32020), one naming no revision served here -> 400 (-32022);
6. the principal {agent, session, user, request} is handed to the SDK's handlers of the request
   (in a context variable, which also tells the endpoint whether the router got the call) and
   ``X-Request-Id`` is echoed on the response.

Every refusal, at any of these steps, by the browser checks (:meth:`McpEndpoint.refuse_browser`)
or by the SDK itself, leaves exactly one audit row naming the method (the JSON-RPC method, or the
HTTP method and path when the body names none) and, for a ``tools/call``, the tool; a batch
leaves one row per message. The failed-authentication limiter's 429 is the one answer without a
row: it only comes after the failures that tripped it, each with its row, and a flood of them
must not fill the log.

``tools/list`` shows the tools the agent's grants (and an OAuth token's scopes) let it see, on
one page (so any cursor is -32602); ``tools/call`` goes through the router. An unknown tool is a
JSON-RPC error (-32602); a granted tool outside an OAuth token's scopes is 403 with
``error="insufficient_scope"`` and the scope to ask for; every other tool-level failure, invalid
arguments included, is a result with ``isError: true`` whose text is the error envelope as JSON,
with the same envelope under ``_meta["dev.nemo/error"]`` and no ``structuredContent`` (which
clients check against the tool's output schema).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
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

from nemo_core.oauth.config import OAuthConfig
from nemo_toolplane.agent_auth import AgentAuthenticator, AuthRefusal, RefusalKind, bearer_token
from nemo_toolplane.audit.log import CallStatus
from nemo_toolplane.envelope import ErrorCode, ToolError
from nemo_toolplane.mcp.challenges import bearer_challenge
from nemo_toolplane.mcp.jsonrpc import (
    JsonRpcMessage,
    Unparsable,
    VersionProblem,
    parse,
    version_problem,
)
from nemo_toolplane.principal import (
    AgentIdentity,
    InvalidIdentifier,
    Principal,
    build_principal,
    new_call_id,
    new_request_id,
    new_session_id,
    refusal_principal,
    usable_id,
)
from nemo_toolplane.registry import Registry
from nemo_toolplane.router import ListedTool, Refusal, ToolRouter, Unidentified
from nemo_toolplane.rules.store import AgentRules

logger = logging.getLogger(__name__)

SERVER_NAME = "nemo-toolplane"
SUPPORTED_PROTOCOL_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
_META_PREFIX = "dev.nemo/"
#: Where a failed call's result carries the error envelope for code to read.
ERROR_META_KEY = f"{_META_PREFIX}error"
#: Largest request body accepted; tool arguments are small.
MAX_BODY_BYTES = 1024 * 1024
#: Most audit rows one batch leaves (one per message); the rest are counted on the last row.
MAX_BATCH_ROWS = 64
#: Longest a refusal's response body is kept to tell whether the SDK refused the request.
_KEPT_ERROR_BYTES = 64 * 1024
_JSON_MEDIA_TYPE = "application/json"

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
            f"{_META_PREFIX}scope": tool.scope.value,
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
    missing_scope: str | None = None
    """Set by the handler when the router refused the call for a scope the token lacks."""


# Set by the endpoint around the SDK's handling of one request; the SDK's tasks for the request
# start inside it, so they see the value (and share the object, which carries ``routed`` back).
_admitted: ContextVar[_AdmittedRequest | None] = ContextVar("nemo_mcp_admitted", default=None)


def _caller(*, routing: bool = False) -> _AdmittedRequest:
    """What the endpoint admitted for this request; ``routing`` tells the endpoint that the
    router (which audits) has the call."""
    admitted = _admitted.get()
    if admitted is None:
        unauthenticated = ToolError(ErrorCode.AUTHENTICATION_ERROR, "a credential is required")
        raise MCPError(
            types.INTERNAL_ERROR,
            "request reached the server unauthenticated",
            unauthenticated.envelope(),
        )
    if routing:
        admitted.routed = True
    return admitted


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
        admitted = _caller()
        tools = router.list_tools(admitted.principal, admitted.rules)
        for tool in tools:
            if tool.name not in listed:
                listed[tool.name] = mcp_tool(tool)
        return types.ListToolsResult(tools=[listed[tool.name] for tool in tools])

    async def call_tool(
        _ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        admitted = _caller(routing=True)
        outcome = await router.call(
            admitted.principal, admitted.rules, params.name, params.arguments, transport="mcp"
        )
        if outcome.status is CallStatus.NOT_FOUND:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        if outcome.error is not None:
            required = outcome.error.details.get("required_scope")
            if isinstance(required, str):
                # Answered 403 with a challenge naming the scope (the endpoint sets the status).
                admitted.missing_scope = required
                raise MCPError(
                    types.INVALID_REQUEST, outcome.error.message, outcome.error.envelope()
                )
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


class _BodyTooLarge(Exception):
    pass


async def _read_body(receive: Receive) -> bytes:
    """The request body; :class:`_BodyTooLarge` once it grows past :data:`MAX_BODY_BYTES` (the
    rest unread)."""
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def media_type(content_type: str | None) -> str:
    """The media type of a ``Content-Type`` value, lower-cased (RFC 9110: case-insensitive)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


@dataclass(frozen=True)
class _Post:
    """One admitted POST as the checks before the SDK see it."""

    body: bytes
    #: The ``MCP-Protocol-Version`` header, when sent.
    version_header: str | None
    content_type: str | None

    @cached_property
    def parsed(self) -> JsonRpcMessage | Unparsable:
        return parse(self.body)

    @property
    def message(self) -> JsonRpcMessage | None:
        """The parsed body; None when it cannot be parsed."""
        parsed = self.parsed
        return parsed if isinstance(parsed, JsonRpcMessage) else None


@dataclass(frozen=True)
class _Refused:
    """The answer to a POST refused before the SDK sees it, and how its audit row names it."""

    response: Response
    #: The fixed label the audit row carries (never the input).
    problem: str


def _wrong_media_type(post: _Post) -> _Refused | None:
    if media_type(post.content_type) == _JSON_MEDIA_TYPE:
        return None
    response = _jsonrpc_error(
        415, types.INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json"
    )
    return _Refused(response, "media type")


def _unparsable(post: _Post) -> _Refused | None:
    parsed = post.parsed
    if isinstance(parsed, JsonRpcMessage):
        return None
    return _Refused(
        _jsonrpc_error(400, types.PARSE_ERROR, f"Parse error: {parsed.value}"), parsed.value
    )


def _batch(post: _Post) -> _Refused | None:
    # JSON-RPC batches were removed from MCP: exactly one message per POST.
    if post.message is None or not post.message.is_batch:
        return None
    batch = _jsonrpc_error(400, types.INVALID_REQUEST, "Send exactly one JSON-RPC message per POST")
    return _Refused(batch, "batch")


def _malformed_envelope(post: _Post) -> _Refused | None:
    problem = post.message.problem if post.message is not None else None
    if problem is None:
        return None
    invalid = _jsonrpc_error(400, types.INVALID_REQUEST, f"Invalid Request: {problem}")
    return _Refused(invalid, "JSON-RPC envelope")


def _unserved_version(post: _Post) -> _Refused | None:
    refused = _version_refusal(post.version_header, post.message)
    return None if refused is None else _Refused(refused, "protocol version")


#: What the endpoint refuses of a body before the SDK sees it, in this order; the first that
#: applies answers (step 4 and 5 of the module docstring, after the ids).
_CHECKS: tuple[Callable[[_Post], _Refused | None], ...] = (
    _wrong_media_type,
    _unparsable,
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


def _with_json_media_type(scope: Scope) -> Scope:
    """``scope`` with its ``Content-Type`` media type in lower case, as the SDK compares it."""
    headers = [
        (name, value.lower() if name == b"content-type" else value)
        for name, value in scope["headers"]
    ]
    return {**scope, "headers": headers}


@dataclass
class _Answer:
    """What the SDK answered a request, watched on its way out."""

    status: int = 0
    body: bytearray = field(default_factory=bytearray)

    def refused(self) -> bool:
        """Whether the answer is an HTTP or JSON-RPC error (a result is neither)."""
        if self.status >= 400:
            return True
        if b'"error"' not in self.body:
            return False
        try:
            answer = json.loads(bytes(self.body))
        except ValueError:
            return False
        return isinstance(answer, dict) and "error" in answer


class McpEndpoint:
    """The ASGI app of ``/mcp``: the checks above, then the SDK's session manager."""

    def __init__(
        self,
        router: ToolRouter,
        registry: Registry,
        authenticator: AgentAuthenticator,
        *,
        body_timeout_seconds: float = 10.0,
        oauth: OAuthConfig | None = None,
    ) -> None:
        self.server = build_mcp_server(router, registry)
        self.manager = StreamableHTTPSessionManager(
            app=self.server, json_response=True, stateless=True
        )
        self._router = router
        self._authenticator = authenticator
        self._body_timeout = body_timeout_seconds
        self._oauth = oauth

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The SDK's session manager must run for the edge's lifetime."""
        async with self.manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        http_method = f"{scope['method']} {scope['path']}"
        sender = _sender(headers)
        authorizations = headers.getlist("authorization")
        if len(authorizations) > 1:
            refused = Unidentified(sender.request_id, sender.session_id, credential=None)
            await self._refuse(refused, http_method, "duplicate Authorization header")
            response = _jsonrpc_error(
                400, types.INVALID_REQUEST, "Send exactly one Authorization header"
            )
            await response(scope, receive, send)
            return
        client = scope.get("client")
        source = client[0] if client else "unknown"
        token = bearer_token(authorizations[0] if authorizations else None)
        agent = await self._authenticator.authenticate(token, source)
        if isinstance(agent, AuthRefusal):
            if agent.retry_after_seconds is None:
                refused = Unidentified(sender.request_id, sender.session_id, agent.credential)
                await self._refuse(refused, http_method, agent.kind.value, code=agent.kind.code)
            await self._refusal_response(agent, source)(scope, receive, send)
            return

        ids = _Ids.of(headers)
        if scope["method"] != "POST":
            principal = ids.usable(agent.identity)
            await self._refuse(principal, http_method, "HTTP method")
            await _jsonrpc_error(405, types.INVALID_REQUEST, "Method not allowed", Allow="POST")(
                scope, receive, send
            )
            return
        await self._post(scope, receive, send, agent.identity, agent.rules, ids, http_method)

    async def refuse_browser(self, scope: Scope, problem: str, details: Mapping[str, str]) -> None:
        """Audit a request the browser checks (:mod:`nemo_toolplane.mcp.origins`) refused
        before its credential was read."""
        refused = replace(_sender(Headers(scope=scope)), credential=None)
        method = f"{scope['method']} {scope['path']}"
        code = ErrorCode.AUTHORIZATION_ERROR
        await self._router.refuse(
            refused, Refusal(method, problem, "mcp", code=code, details=details)
        )

    async def _post(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        identity: AgentIdentity,
        rules: AgentRules,
        ids: _Ids,
        http_method: str,
    ) -> None:
        try:
            principal, invalid = ids.principal(identity), None
        except InvalidIdentifier as problem:
            # Audited under the ids that are usable: an unusable one is not kept.
            principal, invalid = ids.usable(identity), problem
        request_ids = [(b"x-request-id", principal.request_id.encode()),
                       (b"x-nemo-call-id", principal.call_id.encode())]  # fmt: skip

        async def send_ids(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *request_ids]
            await send(message)

        headers = Headers(scope=scope)
        try:
            async with asyncio.timeout(self._body_timeout):
                body = await _read_body(receive)
        except (_BodyTooLarge, TimeoutError) as problem:
            too_large = isinstance(problem, _BodyTooLarge)
            label = "body too large" if too_large else "body timeout"
            await self._refuse(principal, http_method, label)
            status, text = (
                (413, "Request body too large") if too_large else (408, "Request timeout")
            )
            await _jsonrpc_error(status, types.INVALID_REQUEST, text)(scope, receive, send_ids)
            return
        post = _Post(body, headers.get("mcp-protocol-version"), headers.get("content-type"))
        message = post.message
        method = (message.method if message is not None else None) or http_method
        tool_name = message.tool_name if message is not None and message.is_tool_call else None
        if invalid is not None:
            await self._refuse(principal, method, "identifier", tool_name=tool_name)
            await _jsonrpc_error(400, types.INVALID_REQUEST, str(invalid))(scope, receive, send_ids)
            return
        for check in _CHECKS:
            if (refused := check(post)) is not None:
                if refused.problem == "batch" and message is not None:
                    await self._refuse_batch(principal, message)
                else:
                    await self._refuse(principal, method, refused.problem, tool_name=tool_name)
                await refused.response(scope, receive, send_ids)
                return
        assert message is not None  # noqa: S101  narrows the type: _unparsable let it through
        await self._hand_over(
            _with_json_media_type(scope),
            _replay(body, receive),
            send_ids,
            _AdmittedRequest(principal, rules),
            message,
        )

    async def _hand_over(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        admitted: _AdmittedRequest,
        message: JsonRpcMessage,
    ) -> None:
        """The SDK answers; the endpoint watches the answer, to turn a missing scope into 403
        and to audit whatever the SDK refused without the router."""
        answer = _Answer()

        async def watched(event: Message) -> None:
            if event["type"] == "http.response.start":
                answer.status = event["status"]
                if admitted.missing_scope is not None:
                    challenge = bearer_challenge(
                        self._oauth,
                        error="insufficient_scope",
                        description=f"the call needs the scope {admitted.missing_scope}",
                        scopes=[admitted.missing_scope],
                    )
                    event = {
                        **event,
                        "status": 403,
                        "headers": [
                            *event.get("headers", ()),
                            (b"www-authenticate", challenge.encode()),
                        ],
                    }
            elif event["type"] == "http.response.body" and len(answer.body) < _KEPT_ERROR_BYTES:
                answer.body += event.get("body", b"")[:_KEPT_ERROR_BYTES]
            await send(event)

        # W3C trace context from the HTTP headers; the SDK prefers one carried in `_meta`.
        trace = otel_context.attach(propagate.extract(Headers(scope=scope)))
        handed_over = _admitted.set(admitted)
        try:
            await self.manager.handle_request(scope, receive, watched)
        finally:
            _admitted.reset(handed_over)
            otel_context.detach(trace)
        if not admitted.routed and (answer.refused() or message.is_tool_call):
            # The SDK answered without the router: with an error (parameters that do not fit
            # the method, an unknown method, headers that disagree with the body), or a call
            # it could not answer at all (a tools/call notification), which is still a call.
            tool_name = message.tool_name if message.is_tool_call else None
            await self._refuse(
                admitted.principal,
                message.method or f"{scope['method']} {scope['path']}",
                "protocol error",
                tool_name=tool_name,
            )

    async def _refuse(
        self,
        principal: Principal | Unidentified,
        method: str,
        problem: str,
        *,
        tool_name: object = None,
        code: ErrorCode = ErrorCode.VALIDATION_ERROR,
    ) -> None:
        await self._router.refuse(principal, Refusal(method, problem, "mcp", tool_name, code=code))

    async def _refuse_batch(self, principal: Principal, batch: JsonRpcMessage) -> None:
        """One row per message of a refused batch, up to :data:`MAX_BATCH_ROWS`."""
        elements = batch.elements()
        for n, element in enumerate(elements[:MAX_BATCH_ROWS], start=1):
            problem = "batch"
            if n == MAX_BATCH_ROWS and len(elements) > MAX_BATCH_ROWS:
                problem = f"batch ({len(elements) - n} more messages)"
            # Each row is one refused message, with its own call id.
            await self._refuse(
                replace(principal, call_id=new_call_id()),
                element.method or "(batch element)",
                problem,
                tool_name=element.tool_name if element.is_tool_call else None,
            )

    def _refusal_response(self, refusal: AuthRefusal, source: str) -> Response:
        """401 with a challenge, 403 for an unregistered client, 503 when the credential cannot
        be checked now, 429 when the address has failed too often."""
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
            "mcp request refused: %s",
            refusal.kind.value,
            extra={"source": source, "problem": refusal.message},
        )
        envelope = ToolError(refusal.kind.code, refusal.message).envelope()
        if refusal.kind is RefusalKind.UNKNOWN_CLIENT:
            return _jsonrpc_error(403, types.INVALID_REQUEST, refusal.message, data=envelope)
        if refusal.kind is RefusalKind.UNAVAILABLE:
            return _jsonrpc_error(
                503, types.INTERNAL_ERROR, refusal.message, data=envelope, **{"Retry-After": "5"}
            )
        challenge = (
            bearer_challenge(self._oauth, error="invalid_token", description=refusal.message)
            if refusal.token_sent
            else bearer_challenge(self._oauth)
        )
        # The same envelope as every tool-level failure, so an agent branches on one code.
        return _jsonrpc_error(
            401,
            types.INVALID_REQUEST,
            "Authentication required",
            data=envelope,
            **{"WWW-Authenticate": challenge},
        )


def _session_header(headers: Headers) -> str | None:
    return headers.get("x-nemo12-session-id") or headers.get("mcp-session-id")


def _sender(headers: Headers) -> Unidentified:
    """Who sent a request before an agent is known: the ids it sent that are usable."""
    return Unidentified(
        request_id=usable_id(headers.get("x-request-id")) or new_request_id(),
        session_id=usable_id(_session_header(headers)) or new_session_id(),
    )


@dataclass(frozen=True)
class _Ids:
    """The ids a request sent in its headers."""

    session_id: str | None
    user_id: str | None
    request_id: str | None

    @classmethod
    def of(cls, headers: Headers) -> _Ids:
        return cls(
            _session_header(headers), headers.get("x-nemo12-user-id"), headers.get("x-request-id")
        )

    def principal(self, identity: AgentIdentity) -> Principal:
        """The principal they make; :class:`InvalidIdentifier` when one is unusable."""
        return build_principal(
            identity, session_id=self.session_id, user_id=self.user_id, request_id=self.request_id
        )

    def usable(self, identity: AgentIdentity) -> Principal:
        """The principal of a refusal: the usable ids, generated ones for the others."""
        return refusal_principal(
            identity, session_id=self.session_id, user_id=self.user_id, request_id=self.request_id
        )
