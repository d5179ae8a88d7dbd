"""The agents' gRPC service of the tool plane; each handler stays thin and delegates to the router.

``ToolPlaneService`` serves internal agents through the same router, policy and audit as the MCP
edge: the caller token says which service calls, the credential in the ``authorization``
metadata says which agent. It accepts what the MCP edge accepts: an agent token, or an OAuth
access token for the edge's resource (the same tool plane serves both), whose subject is the user
and whose scopes narrow the grants. gRPC status codes are used only for authentication and
malformed requests, and each such refusal is audited like the MCP edge's; every tool-level
outcome is a ``CallToolResponse`` carrying the envelope. The operators' service is
:mod:`.admin_servicer`.
"""

from __future__ import annotations

import json
from typing import Any

import grpc

from nemo_core.callers import current_caller
from nemo_core.errors import ServiceError
from nemo_core.proto_enums import to_proto
from nemo_core.structs import ValueNotSet, python_to_struct, struct_to_python
from nemo_protos.toolplane.v1 import tool_pb2
from nemo_protos.toolplane.v1 import toolplane_service_pb2 as pb
from nemo_protos.toolplane.v1 import toolplane_service_pb2_grpc as pb_grpc
from nemo_protos.toolplane.v1.error_reason_pb2 import ErrorReason
from nemo_toolplane.acl import USER_VOUCHING_CALLERS
from nemo_toolplane.agent_auth import AgentAuthenticator, AuthRefusal, RefusalKind, bearer_token
from nemo_toolplane.errors import invalid_argument, service_error
from nemo_toolplane.principal import (
    InvalidIdentifier,
    Principal,
    build_principal,
    new_request_id,
    new_session_id,
    refusal_principal,
    usable_id,
)
from nemo_toolplane.registry import AnyTool
from nemo_toolplane.router import Refusal, ToolRouter, Unidentified
from nemo_toolplane.rules.store import AgentRules
from nemo_toolplane.wire import Context, authorizations, decision_message, duplicate_authorization


def tool_message(tool: AnyTool) -> tool_pb2.Tool:
    hints = tool.hints
    return tool_pb2.Tool(
        tool_id=tool.tool_id,
        name=tool.name,
        version=tool.version,
        description=tool.description,
        category=tool.category,
        risk=to_proto(tool_pb2.Risk, "RISK_", tool.risk),
        mode=to_proto(tool_pb2.ToolMode, "TOOL_MODE_", tool.mode),
        input_schema_json=_json(tool.input_schema),
        output_schema_json=_json(tool.output_schema),
        annotations=tool_pb2.ToolAnnotations(
            read_only=hints.read_only,
            destructive=hints.destructive,
            idempotent=hints.idempotent,
            open_world=hints.open_world,
        ),
    )


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def peer_host(peer: str) -> str:
    """The client address of a gRPC peer ("ipv4:127.0.0.1:5555" -> "127.0.0.1"), so failed
    authentications count per address across both edges."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        host = rest.rsplit(":", 1)[0]
        return host.removeprefix("[").removesuffix("]")
    return peer


class ToolPlaneServicer(pb_grpc.ToolPlaneServiceServicer):
    """ListTools and CallTool for internal agents."""

    def __init__(self, router: ToolRouter, authenticator: AgentAuthenticator) -> None:
        self._router = router
        self._authenticator = authenticator

    async def _caller(
        self,
        context: Context,
        method: str,
        *,
        tool: str = "",
        session_id: str = "",
        user_id: str = "",
        request_id: str = "",
    ) -> tuple[Principal, AgentRules]:
        """The principal and rules of the call; every refusal is audited, then raised."""
        sent = {"session_id": session_id, "user_id": user_id, "request_id": request_id}
        sender = Unidentified(
            request_id=usable_id(request_id) or new_request_id(),
            session_id=usable_id(session_id) or new_session_id(),
        )
        values = authorizations(context)
        if len(values) > 1:
            await self._refuse(
                Unidentified(sender.request_id, sender.session_id, credential=None),
                Refusal(method, "duplicate authorization metadata", "grpc", tool or None),
            )
            raise duplicate_authorization()
        token = bearer_token(values[0]) if values else None
        agent = await self._authenticator.authenticate(token, peer_host(context.peer()))
        if isinstance(agent, AuthRefusal):
            if agent.retry_after_seconds is None:
                refused = Unidentified(sender.request_id, sender.session_id, agent.credential)
                await self._refuse(
                    refused,
                    Refusal(method, agent.kind.value, "grpc", tool or None, code=agent.kind.code),
                )
            raise _refusal_error(agent)
        try:
            principal = build_principal(
                agent.identity, **sent, vouched=current_caller() in USER_VOUCHING_CALLERS
            )
        except InvalidIdentifier as invalid:
            await self._refuse(
                refusal_principal(agent.identity, **sent),
                Refusal(method, "identifier", "grpc", tool or None),
            )
            raise invalid_argument(ErrorReason.INVALID_IDENTIFIER, str(invalid)) from None
        return principal, agent.rules

    async def _refuse(self, sender: Principal | Unidentified, refusal: Refusal) -> None:
        await self._router.refuse(sender, refusal)

    async def ListTools(
        self, request: pb.ListToolsRequest, context: Context
    ) -> pb.ListToolsResponse:
        tools = self._router.list_tools(*await self._caller(context, "ListTools"))
        return pb.ListToolsResponse(tools=[tool_message(listed.tool) for listed in tools])

    async def CallTool(self, request: pb.CallToolRequest, context: Context) -> pb.CallToolResponse:
        principal, rules = await self._caller(
            context,
            "CallTool",
            tool=request.tool,
            session_id=request.session_id,
            user_id=request.user_id,
            request_id=request.request_id,
        )
        if not request.tool:
            await self._refuse(principal, Refusal("CallTool", "no tool name", "grpc"))
            raise invalid_argument(ErrorReason.TOOL_REQUIRED, "name the tool to call")
        try:
            arguments = struct_to_python(request.arguments)
        except ValueNotSet:
            await self._refuse(
                principal,
                Refusal("CallTool", "an argument holds no value", "grpc", request.tool),
            )
            raise invalid_argument(
                ErrorReason.MALFORMED_REQUEST, "arguments must be JSON: a value has no kind set"
            ) from None
        outcome = await self._router.call(
            principal, rules, request.tool, arguments, transport="grpc"
        )
        response = pb.CallToolResponse(
            success=outcome.error is None,
            request_id=principal.request_id,
            tool_id=outcome.tool.tool_id if outcome.tool is not None else "",
            decision=decision_message(outcome.decision),
            call_id=principal.call_id,
        )
        if outcome.output is not None:
            response.result.CopyFrom(python_to_struct(outcome.output))
        if outcome.error is not None:
            error = outcome.error
            response.error.CopyFrom(
                tool_pb2.ToolError(
                    code=tool_pb2.ErrorCode.Value(f"ERROR_CODE_{error.code.value}"),
                    message=error.message,
                    retryable=error.retryable,
                    details=python_to_struct(dict(error.details)),
                )
            )
        return response


def _refusal_error(refusal: AuthRefusal) -> ServiceError:
    """The gRPC error of a credential refused (or not checkable now)."""
    if refusal.retry_after_seconds is not None:
        return service_error(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            ErrorReason.AUTHENTICATION_RATE_LIMITED,
            "too many failed authentications from this address",
        )
    if refusal.kind is RefusalKind.UNKNOWN_CLIENT:
        client = refusal.credential.client_id or ""
        return service_error(
            grpc.StatusCode.PERMISSION_DENIED,
            ErrorReason.OAUTH_CLIENT_NOT_REGISTERED,
            refusal.message,
            {"client_id": client},
        )
    if refusal.kind is RefusalKind.UNAVAILABLE:
        return service_error(
            grpc.StatusCode.UNAVAILABLE, ErrorReason.DEPENDENCY_UNAVAILABLE, refusal.message
        )
    return service_error(
        grpc.StatusCode.UNAUTHENTICATED,
        ErrorReason.AGENT_UNAUTHENTICATED,
        'a credential is required in the "authorization" metadata ("Bearer <token>"): '
        + refusal.message,
    )
