"""The operators' gRPC service: agent tokens, approvals and the audit log.

Only the ``operator`` caller reaches it (:mod:`.acl`); deciding an approval also takes the
operator's own credential (:mod:`.operators`). Each handler stays thin: it checks the request,
calls one module and maps that module's errors to statuses with their ``ErrorInfo`` reasons.
"""

from __future__ import annotations

from datetime import UTC, timedelta

import grpc
from google.protobuf import duration_pb2

from nemo_core.db import Pool
from nemo_core.page_tokens import InvalidPageToken
from nemo_core.proto_enums import from_proto, to_proto
from nemo_core.structs import python_to_struct
from nemo_protos.toolplane.v1 import approval_pb2, audit_pb2
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2_grpc as admin_pb_grpc
from nemo_protos.toolplane.v1.error_reason_pb2 import ErrorReason
from nemo_protos.type.v1 import user_source_pb2
from nemo_toolplane import operators, tokens
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
from nemo_toolplane.principal import CredentialKind, UserSource
from nemo_toolplane.rules.cache import RulesCache
from nemo_toolplane.wire import Context, bearer, decision_message, timestamp


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
        return admin_pb.RevokeAgentTokenResponse(revoke_time=timestamp(revoked_at))

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
        operator = await operators.authenticate(self._pool, bearer(context))
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
        create_time=timestamp(approval.created_at),
        expire_time=timestamp(approval.expires_at),
        decided_by=approval.decided_by or "",
        decision_note=approval.decision_note or "",
        arguments_json=approval.arguments_json or "",
        resource=approval.resource or "",
        token_id=approval.token_id or "",
        user_source=_user_source(approval.user_source),
    )
    if approval.decided_at is not None:
        message.decide_time.CopyFrom(timestamp(approval.decided_at))
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


def _duration(milliseconds: float) -> duration_pb2.Duration:
    duration = duration_pb2.Duration()
    duration.FromTimedelta(timedelta(milliseconds=milliseconds))
    return duration


def _audit_message(entry: StoredAuditEntry) -> audit_pb2.AuditEntry:
    return audit_pb2.AuditEntry(
        audit_id=entry.audit_id,
        request_id=entry.request_id,
        create_time=timestamp(entry.timestamp),
        agent_id=entry.agent_id or "",
        session_id=entry.session_id or "",
        user_id=entry.user_id or "",
        tool_id=entry.tool_id or "",
        resource=entry.resource or "",
        decision=decision_message(Decision(entry.decision)),
        status=to_proto(audit_pb2.CallStatus, "CALL_STATUS_", CallStatus(entry.status)),
        error_code=entry.error_code or "",
        duration=_duration(entry.duration_ms or 0),
        environment=entry.environment,
        metadata=python_to_struct(dict(entry.metadata)),
        call_id=entry.call_id or "",
        token_id=entry.token_id or "",
        user_source=_user_source(entry.user_source),
        input_ref=entry.input_ref or "",
        method=entry.method or "",
        credential_kind=_credential_kind(entry.credential_kind),
        client_id=entry.client_id or "",
        subject=entry.subject or "",
        scopes=entry.scopes or [],
    )


def _credential_kind(kind: str | None) -> audit_pb2.CredentialKind.ValueType:
    if kind is None:
        return audit_pb2.CREDENTIAL_KIND_UNSPECIFIED
    return to_proto(audit_pb2.CredentialKind, "CREDENTIAL_KIND_", CredentialKind(kind))
