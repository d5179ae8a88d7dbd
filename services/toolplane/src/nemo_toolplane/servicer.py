"""The agents' gRPC service of the tool plane; each handler stays thin and delegates to the router.

``ToolPlaneService`` serves internal agents through the same router, policy and audit as the MCP
edge: the caller token says which service calls, the agent token in the ``authorization``
metadata says which agent. gRPC status codes are used only for authentication and malformed
requests; every tool-level outcome is a ``CallToolResponse`` carrying the envelope. The operators'
service is :mod:`.admin_servicer`.
"""

from __future__ import annotations

import json
from typing import Any

import grpc

from nemo_core.callers import current_caller
from nemo_core.proto_enums import to_proto
from nemo_core.structs import ValueNotSet, python_to_struct, struct_to_python
from nemo_protos.toolplane.v1 import tool_pb2
from nemo_protos.toolplane.v1 import toolplane_service_pb2 as pb
from nemo_protos.toolplane.v1 import toolplane_service_pb2_grpc as pb_grpc
from nemo_protos.toolplane.v1.error_reason_pb2 import ErrorReason
from nemo_toolplane.acl import USER_VOUCHING_CALLERS
from nemo_toolplane.agent_auth import AgentAuthenticator, AuthRefusal
from nemo_toolplane.errors import invalid_argument, service_error
from nemo_toolplane.principal import InvalidIdentifier, Principal, build_principal
from nemo_toolplane.registry import AnyTool
from nemo_toolplane.router import ToolRouter
from nemo_toolplane.rules.store import AgentRules
from nemo_toolplane.wire import Context, bearer, decision_message


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
        self, context: Context, *, session_id: str = "", user_id: str = "", request_id: str = ""
    ) -> tuple[Principal, AgentRules]:
        agent = await self._authenticator.authenticate(bearer(context), peer_host(context.peer()))
        if isinstance(agent, AuthRefusal):
            if agent.retry_after_seconds is not None:
                raise service_error(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    ErrorReason.AUTHENTICATION_RATE_LIMITED,
                    "too many failed authentications from this address",
                )
            raise service_error(
                grpc.StatusCode.UNAUTHENTICATED,
                ErrorReason.AGENT_UNAUTHENTICATED,
                'an agent token is required in the "authorization" metadata ("Bearer <token>")',
            )
        try:
            principal = build_principal(
                agent.identity,
                session_id=session_id,
                user_id=user_id,
                request_id=request_id,
                vouched=current_caller() in USER_VOUCHING_CALLERS,
            )
        except InvalidIdentifier as invalid:
            raise invalid_argument(ErrorReason.INVALID_IDENTIFIER, str(invalid)) from None
        return principal, agent.rules

    async def ListTools(
        self, request: pb.ListToolsRequest, context: Context
    ) -> pb.ListToolsResponse:
        tools = self._router.list_tools(*await self._caller(context))
        return pb.ListToolsResponse(tools=[tool_message(listed.tool) for listed in tools])

    async def CallTool(self, request: pb.CallToolRequest, context: Context) -> pb.CallToolResponse:
        principal, rules = await self._caller(
            context,
            session_id=request.session_id,
            user_id=request.user_id,
            request_id=request.request_id,
        )
        if not request.tool:
            self._router.refuse(principal, "", transport="grpc", problem="no tool name")
            raise invalid_argument(ErrorReason.TOOL_REQUIRED, "name the tool to call")
        try:
            arguments = struct_to_python(request.arguments)
        except ValueNotSet:
            self._router.refuse(
                principal, request.tool, transport="grpc", problem="an argument holds no value"
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
