"""gRPC handlers of the tool plane; each stays thin and delegates to one module.

``ToolPlaneService`` serves internal agents through the same router, policy and audit as the MCP
edge: the caller token says which service calls, the agent token in the ``authorization``
metadata says which agent. gRPC status codes are used only for authentication and malformed
requests; every tool-level outcome is a ``CallToolResponse`` carrying the envelope.
"""

from __future__ import annotations

import json
from datetime import UTC, timedelta
from typing import Any, TypeAlias

import grpc
import grpc.aio
from google.protobuf import duration_pb2, timestamp_pb2

from nemo_core.callers import current_caller
from nemo_core.db import Pool
from nemo_core.page_tokens import InvalidPageToken
from nemo_core.proto_enums import from_proto, to_proto
from nemo_core.structs import ValueNotSet, python_to_struct, struct_to_python
from nemo_protos.toolplane.v1 import approval_pb2, audit_pb2, tool_pb2
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2_grpc as admin_pb_grpc
from nemo_protos.toolplane.v1 import toolplane_service_pb2 as pb
from nemo_protos.toolplane.v1 import toolplane_service_pb2_grpc as pb_grpc
from nemo_protos.toolplane.v1.error_reason_pb2 import ErrorReason
from nemo_protos.type.v1 import user_source_pb2
from nemo_toolplane import operators, tokens
from nemo_toolplane.acl import USER_VOUCHING_CALLERS
from nemo_toolplane.agent_auth import AgentAuthenticator, AuthRefusal, bearer_token
from nemo_toolplane.approvals import (
    Approval,
    ApprovalError,
    ApprovalNotFound,
    ApprovalNotPending,
    ApprovalStatus,
    ApprovalStore,
    SelfApproval,
)
from nemo_toolplane.audit.log import CallStatus
from nemo_toolplane.audit.query import (
    StoredAuditEntry,
    decode_page_token,
    encode_page_token,
    list_entries,
)
from nemo_toolplane.context_client import user_source
from nemo_toolplane.decisions import Decision
from nemo_toolplane.errors import invalid_argument, service_error
from nemo_toolplane.principal import InvalidIdentifier, Principal, UserSource, build_principal
from nemo_toolplane.registry import AnyTool
from nemo_toolplane.router import ToolRouter
from nemo_toolplane.rules.cache import RulesCache
from nemo_toolplane.rules.store import AgentRules

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


def _decision(decision: Decision) -> audit_pb2.Decision.ValueType:
    return to_proto(audit_pb2.Decision, "DECISION_", decision)


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


def _duration(milliseconds: float) -> duration_pb2.Duration:
    duration = duration_pb2.Duration()
    duration.FromTimedelta(timedelta(milliseconds=milliseconds))
    return duration


def _timestamp(value: Any) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value.astimezone(UTC))
    return stamp


def _bearer(context: Context) -> str | None:
    """The bearer token in the ``authorization`` metadata (an agent's or an operator's)."""
    token = None
    for key, value in context.invocation_metadata() or ():
        if key == "authorization" and isinstance(value, str):
            token = bearer_token(value)
    return token


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
        agent = await self._authenticator.authenticate(_bearer(context), peer_host(context.peer()))
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
            decision=_decision(outcome.decision),
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


def approval_message(approval: Approval) -> approval_pb2.Approval:
    message = approval_pb2.Approval(
        approval_id=approval.approval_id,
        agent_id=approval.agent_id,
        user_id=approval.user_id or "",
        tool_id=approval.tool_id,
        arguments_sha256=approval.arguments_digest,
        policy_version=approval.policy_version,
        status=to_proto(approval_pb2.ApprovalStatus, "APPROVAL_STATUS_", approval.status),
        request_id=approval.request_id,
        create_time=_timestamp(approval.created_at),
        expire_time=_timestamp(approval.expires_at),
        decided_by=approval.decided_by or "",
        decision_note=approval.decision_note or "",
        arguments_json=approval.arguments_json or "",
        resource=approval.resource or "",
        token_id=approval.token_id or "",
        user_source=_user_source(approval.user_source),
    )
    if approval.decided_at is not None:
        message.decide_time.CopyFrom(_timestamp(approval.decided_at))
    return message


def _user_source(value: str | None) -> user_source_pb2.UserSource.ValueType:
    """A stored user source; unspecified on rows written before sources were kept."""
    return user_source(UserSource(value)) if value else user_source_pb2.USER_SOURCE_UNSPECIFIED


def _page_size(value: int, default: int, maximum: int) -> int:
    if value == 0:
        return default
    if not 1 <= value <= maximum:
        raise invalid_argument(
            ErrorReason.INVALID_PAGE_SIZE, f"page_size must be 0 or 1 to {maximum}"
        )
    return value


class ToolPlaneAdminServicer(admin_pb_grpc.ToolPlaneAdminServiceServicer):
    """Operators: agent tokens, approvals and the audit log."""

    def __init__(self, pool: Pool, approvals: ApprovalStore, rules: RulesCache) -> None:
        self._pool = pool
        self._approvals = approvals
        self._rules = rules

    async def IssueAgentToken(
        self, request: admin_pb.IssueAgentTokenRequest, context: Context
    ) -> admin_pb.IssueAgentTokenResponse:
        if not request.agent_id:
            raise invalid_argument(
                ErrorReason.AGENT_REQUIRED, "name the agent to issue a token for"
            )
        try:
            async with self._pool.acquire() as conn:
                issued = await tokens.issue_token(
                    conn,
                    request.agent_id,
                    user_id=request.user_id or None,
                    label=request.label,
                    unbound=request.unbound,
                )
        except tokens.UnknownAgent as missing:
            raise service_error(
                grpc.StatusCode.NOT_FOUND, ErrorReason.AGENT_NOT_FOUND, str(missing)
            ) from None
        except tokens.AgentNotActive as disabled:
            raise service_error(
                grpc.StatusCode.FAILED_PRECONDITION, ErrorReason.AGENT_NOT_ACTIVE, str(disabled)
            ) from None
        except tokens.UserRequired as unbound:
            raise service_error(
                grpc.StatusCode.FAILED_PRECONDITION, ErrorReason.USER_REQUIRED, str(unbound)
            ) from None
        return admin_pb.IssueAgentTokenResponse(
            token_id=issued.token_id, token=issued.token, reach=issued.reach
        )

    async def RevokeAgentToken(
        self, request: admin_pb.RevokeAgentTokenRequest, context: Context
    ) -> admin_pb.RevokeAgentTokenResponse:
        if not request.token_id:
            raise invalid_argument(ErrorReason.TOKEN_REQUIRED, "name the token to revoke")
        try:
            async with self._pool.acquire() as conn:
                revoked_at = await tokens.revoke_token(conn, request.token_id)
        except tokens.UnknownToken as missing:
            raise service_error(
                grpc.StatusCode.NOT_FOUND, ErrorReason.TOKEN_NOT_FOUND, str(missing)
            ) from None
        # Other replicas learn of it from the database notification; this one need not wait.
        self._rules.invalidate()
        return admin_pb.RevokeAgentTokenResponse(revoke_time=_timestamp(revoked_at))

    async def ListApprovals(
        self, request: admin_pb.ListApprovalsRequest, context: Context
    ) -> admin_pb.ListApprovalsResponse:
        limit = _page_size(request.page_size, 50, 200)
        status = from_proto(
            approval_pb2.ApprovalStatus, "APPROVAL_STATUS_", ApprovalStatus, request.status
        )
        try:
            approvals, next_token = await self._approvals.list(
                status=status, limit=limit, after=request.page_token or None
            )
        except ApprovalError as invalid:
            raise invalid_argument(ErrorReason.INVALID_PAGE_TOKEN, str(invalid)) from None
        return admin_pb.ListApprovalsResponse(
            approvals=[approval_message(a) for a in approvals], next_page_token=next_token or ""
        )

    async def DecideApproval(
        self, request: admin_pb.DecideApprovalRequest, context: Context
    ) -> admin_pb.DecideApprovalResponse:
        operator = await operators.authenticate(self._pool, _bearer(context))
        if operator is None:
            raise service_error(
                grpc.StatusCode.UNAUTHENTICATED,
                ErrorReason.OPERATOR_UNAUTHENTICATED,
                'deciding needs the operator\'s own credential in the "authorization" metadata '
                '("Bearer <operator token>")',
            )
        if not request.approval_id:
            raise invalid_argument(ErrorReason.APPROVAL_ID_REQUIRED, "name the approval to decide")
        if request.decision == admin_pb.APPROVAL_DECISION_UNSPECIFIED:
            raise invalid_argument(ErrorReason.DECISION_REQUIRED, "decide APPROVE or REJECT")
        named = request.operator.strip()
        if named and named != operator.operator_id:
            raise invalid_argument(
                ErrorReason.OPERATOR_MISMATCH,
                "the operator named is not the one the credential proves",
            )
        try:
            approval = await self._approvals.decide(
                request.approval_id,
                approve=request.decision == admin_pb.APPROVAL_DECISION_APPROVE,
                operator=operator,
                note=request.note,
            )
        except ApprovalNotFound as missing:
            raise service_error(
                grpc.StatusCode.NOT_FOUND, ErrorReason.APPROVAL_NOT_FOUND, str(missing)
            ) from None
        except SelfApproval as own:
            raise service_error(
                grpc.StatusCode.PERMISSION_DENIED, ErrorReason.SELF_APPROVAL, str(own)
            ) from None
        except ApprovalNotPending as decided:
            raise service_error(
                grpc.StatusCode.FAILED_PRECONDITION, ErrorReason.APPROVAL_NOT_PENDING, str(decided)
            ) from None
        return admin_pb.DecideApprovalResponse(approval=approval_message(approval))

    async def ListAuditEntries(
        self, request: admin_pb.ListAuditEntriesRequest, context: Context
    ) -> admin_pb.ListAuditEntriesResponse:
        limit = _page_size(request.page_size, 100, 500)
        before_id = None
        if request.page_token:
            try:
                before_id = decode_page_token(request.page_token)
            except InvalidPageToken as invalid:
                raise invalid_argument(ErrorReason.INVALID_PAGE_TOKEN, str(invalid)) from None
        entries, next_id = await list_entries(
            self._pool,
            agent_id=request.agent_id or None,
            request_id=request.request_id or None,
            since=request.start_time.ToDatetime(UTC) if request.HasField("start_time") else None,
            before_id=before_id,
            limit=limit,
        )
        return admin_pb.ListAuditEntriesResponse(
            entries=[_audit_message(entry) for entry in entries],
            next_page_token=encode_page_token(next_id) if next_id else "",
        )


def _audit_message(entry: StoredAuditEntry) -> audit_pb2.AuditEntry:
    return audit_pb2.AuditEntry(
        audit_id=entry.audit_id,
        request_id=entry.request_id,
        create_time=_timestamp(entry.timestamp),
        agent_id=entry.agent_id,
        session_id=entry.session_id or "",
        user_id=entry.user_id or "",
        tool_id=entry.tool_id,
        resource=entry.resource or "",
        decision=_decision(Decision(entry.decision)),
        status=to_proto(audit_pb2.CallStatus, "CALL_STATUS_", CallStatus(entry.status)),
        error_code=entry.error_code or "",
        duration=_duration(entry.duration_ms or 0),
        environment=entry.environment,
        metadata=python_to_struct(dict(entry.metadata)),
        call_id=entry.call_id or "",
        token_id=entry.token_id or "",
        user_source=_user_source(entry.user_source),
        input_ref=entry.input_ref or "",
    )
