"""Bad input over gRPC, one row per case, against the three services as separate processes.

Every row names the exact status and ErrorInfo reason it must get. Transport-level refusals
(a message beyond the receive limit) come from gRPC itself and carry no ErrorInfo. Tool-level
failures of ``CallTool`` are answers carrying the envelope, and each writes one audit row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
import pytest
from google.protobuf import struct_pb2, timestamp_pb2

from nemo_core.errors import error_details
from nemo_protos.context.v1 import context_service_pb2 as context_pb
from nemo_protos.context.v1 import conversation_pb2
from nemo_protos.context.v1 import rights_service_pb2 as rights_pb
from nemo_protos.gateway.v1 import gateway_service_pb2 as gateway_pb
from nemo_protos.toolplane.v1 import tool_pb2
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb
from nemo_protos.toolplane.v1 import toolplane_service_pb2 as toolplane_pb
from tests.stack import Stack

from .ledger import Ledger
from .wire import INVALID_UTF8, length_delimited, nested_struct

INT32_MAX = 2**31 - 1
OVERSIZED = "x" * (5 * 1024 * 1024)  # past the servers' 4 MiB receive limit
SQL_LIKE = ("' OR 1=1 --", "L-2041-1'; DROP TABLE learning.learners; --")
CONFUSABLES = {
    "cyrillic-a": "le\u0430rner.get_profile",
    "fullwidth-dot": "learner\uff0eget_profile",
    "zero-width-joiner": "learner.get\u200d_profile",
}

CONTEXT = "/nemo.context.v1.ContextService/"
RIGHTS = "/nemo.context.v1.RightsService/"
GATEWAY = "/nemo.gateway.v1.GatewayService/"
TOOLPLANE = "/nemo.toolplane.v1.ToolPlaneService/"
ADMIN = "/nemo.toolplane.v1.ToolPlaneAdminService/"


@dataclass(frozen=True)
class GrpcCase:
    id: str
    service: str
    method: str
    request: bytes
    caller: str
    code: grpc.StatusCode
    reason: str | None = None
    streaming: bool = False
    agent: str | None = None
    #: The people's API: the call carries the stack's operator credential.
    person: bool = False
    tool_error: str | None = None
    audit_rows: int = 0
    check: Callable[[bytes], None] | None = None


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(value)
    return struct


def _no_hits(response: bytes) -> None:
    # A query that reached SQL as code would match every node.
    assert list(context_pb.SearchKnowledgeResponse.FromString(response).hits) == []


def _tool_call(case_id: str, tool: str, arguments: dict[str, object], error: str) -> GrpcCase:
    request = toolplane_pb.CallToolRequest(tool=tool, arguments=_struct(arguments))
    return GrpcCase(
        case_id,
        "toolplane",
        TOOLPLANE + "CallTool",
        request.SerializeToString(),
        "internal",
        grpc.StatusCode.OK,
        agent="engineering-agent",
        tool_error=error,
        audit_rows=1,
    )


INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND

CASES: list[GrpcCase] = [
    # Oversized messages: refused by gRPC before any handler runs.
    GrpcCase(
        "oversized-search-query",
        "context",
        CONTEXT + "SearchKnowledge",
        context_pb.SearchKnowledgeRequest(query=OVERSIZED).SerializeToString(),
        "gateway",
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    ),
    GrpcCase(
        "oversized-prompt-variables",
        "gateway",
        GATEWAY + "RunPrompt",
        gateway_pb.RunPromptRequest(
            prompt_id="coral.generate_items", variables=_struct({"topic": OVERSIZED})
        ).SerializeToString(),
        "internal",
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    ),
    GrpcCase(
        "oversized-tool-arguments",
        "toolplane",
        TOOLPLANE + "CallTool",
        toolplane_pb.CallToolRequest(
            tool="application.list", arguments=_struct({"domain": OVERSIZED})
        ).SerializeToString(),
        "internal",
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        agent="engineering-agent",
    ),
    # Invalid UTF-8 in string fields: only raw bytes on a generic channel can send it.
    GrpcCase(
        "invalid-utf8-learner-id",
        "context",
        CONTEXT + "BuildContext",
        length_delimited(1, INVALID_UTF8) + length_delimited(2, b"tutor_hint"),
        "gateway",
        INVALID,
        "MALFORMED_REQUEST",
    ),
    GrpcCase(
        "invalid-utf8-prompt-id",
        "gateway",
        GATEWAY + "RunPrompt",
        length_delimited(1, INVALID_UTF8),
        "internal",
        INVALID,
        "MALFORMED_REQUEST",
    ),
    GrpcCase(
        "invalid-utf8-stream-message",
        "gateway",
        GATEWAY + "StreamPrompt",
        length_delimited(1, b"tutor.chat_reply") + length_delimited(4, INVALID_UTF8),
        "internal",
        INVALID,
        "MALFORMED_REQUEST",
        streaming=True,
    ),
    GrpcCase(
        "invalid-utf8-tool-name",
        "toolplane",
        TOOLPLANE + "CallTool",
        length_delimited(1, INVALID_UTF8),
        "internal",
        INVALID,
        "MALFORMED_REQUEST",
        agent="engineering-agent",
    ),
    GrpcCase(
        "not-protobuf-at-all",
        "context",
        CONTEXT + "SearchKnowledge",
        b"\xff\xff\xff\xff\xff",
        "gateway",
        INVALID,
        "MALFORMED_REQUEST",
    ),
    # Struct fields nested thousands deep.
    GrpcCase(
        "nested-prompt-variables",
        "gateway",
        GATEWAY + "RunPrompt",
        length_delimited(1, b"coral.generate_items") + length_delimited(3, nested_struct(3000)),
        "internal",
        INVALID,
        "MALFORMED_REQUEST",
    ),
    GrpcCase(
        "nested-tool-arguments",
        "toolplane",
        TOOLPLANE + "CallTool",
        length_delimited(1, b"application.list") + length_delimited(2, nested_struct(3000)),
        "internal",
        INVALID,
        "MALFORMED_REQUEST",
        agent="engineering-agent",
    ),
    # Unknown fields: prompt variables and tool arguments are closed models.
    GrpcCase(
        "unknown-prompt-variable",
        "gateway",
        GATEWAY + "RunPrompt",
        gateway_pb.RunPromptRequest(
            prompt_id="coral.generate_items",
            variables=_struct(
                {"topic": "Phân số", "subject": "math", "grade": 5, "learner_name": "x"}
            ),
        ).SerializeToString(),
        "internal",
        INVALID,
        "INVALID_VARIABLES",
    ),
    _tool_call(
        "unknown-tool-argument",
        "application.get",
        {"application_id": "nemo12-web", "include_secrets": True},
        "ERROR_CODE_VALIDATION_ERROR",
    ),
    # Enormous limits.
    GrpcCase(
        "search-limit-int32-max",
        "context",
        CONTEXT + "SearchKnowledge",
        context_pb.SearchKnowledgeRequest(query="phân số", limit=INT32_MAX).SerializeToString(),
        "gateway",
        INVALID,
        "INVALID_LIMIT",
    ),
    GrpcCase(
        "search-grade-int32-max",
        "context",
        CONTEXT + "SearchKnowledge",
        context_pb.SearchKnowledgeRequest(query="phân số", grade=INT32_MAX).SerializeToString(),
        "gateway",
        INVALID,
        "INVALID_GRADE",
    ),
    GrpcCase(
        "conversation-token-budget-int32-max",
        "context",
        CONTEXT + "BuildConversationContext",
        context_pb.BuildConversationContextRequest(
            session_id="S-1", turn_id="T-bad", current_user_message="hi", token_budget=INT32_MAX
        ).SerializeToString(),
        "gateway",
        INVALID,
        "INVALID_TOKEN_BUDGET",
    ),
    *(
        GrpcCase(
            f"record-turn-status-reason-{case}",
            "context",
            CONTEXT + "RecordTurn",
            context_pb.RecordTurnRequest(
                session_id="S-1",
                turn_id="T-bad",
                messages=[
                    conversation_pb2.TurnMessage(
                        role=conversation_pb2.MESSAGE_ROLE_ASSISTANT,
                        type=conversation_pb2.MESSAGE_TYPE_TEXT,
                        status=status,
                        content="x",
                        status_reason=reason,
                    )
                ],
            ).SerializeToString(),
            "gateway",
            INVALID,
            "INVALID_MESSAGE_STATUS",
        )
        for case, status, reason in (
            ("on-a-completed-message", conversation_pb2.MESSAGE_STATUS_COMPLETED, "STOPPED"),
            ("lower-case", conversation_pb2.MESSAGE_STATUS_PARTIAL, "guardrail_rejected"),
            ("too-long", conversation_pb2.MESSAGE_STATUS_PARTIAL, "X" * 65),
            ("sql", conversation_pb2.MESSAGE_STATUS_FAILED, SQL_LIKE[1]),
        )
    ),
    GrpcCase(
        "stream-token-budget-int32-max",
        "gateway",
        GATEWAY + "StreamPrompt",
        gateway_pb.StreamPromptRequest(
            prompt_id="tutor.chat_reply",
            session_id="S-1",
            turn_id="T-bad",
            user_message="hi",
            token_budget=INT32_MAX,
        ).SerializeToString(),
        "internal",
        INVALID,
        # Bounded by the gateway itself: no chat prompt can take that many tokens.
        "INVALID_VARIABLES",
        streaming=True,
    ),
    GrpcCase(
        "prompt-item-count-int32-max",
        "gateway",
        GATEWAY + "RunPrompt",
        gateway_pb.RunPromptRequest(
            prompt_id="coral.generate_items",
            variables=_struct(
                {"topic": "Phân số", "subject": "math", "grade": 5, "count": INT32_MAX}
            ),
        ).SerializeToString(),
        "internal",
        INVALID,
        "INVALID_VARIABLES",
    ),
    GrpcCase(
        "approvals-page-size-int32-max",
        "toolplane",
        ADMIN + "ListApprovals",
        admin_pb.ListApprovalsRequest(page_size=INT32_MAX).SerializeToString(),
        "operator",
        INVALID,
        "INVALID_PAGE_SIZE",
        person=True,
    ),
    GrpcCase(
        "audit-page-size-int32-max",
        "toolplane",
        ADMIN + "ListAuditEntries",
        admin_pb.ListAuditEntriesRequest(page_size=INT32_MAX).SerializeToString(),
        "operator",
        INVALID,
        "INVALID_PAGE_SIZE",
        person=True,
    ),
    # The people's API: an operator's search and grant that can never be right.
    GrpcCase(
        "audit-range-ending-before-it-starts",
        "toolplane",
        ADMIN + "ListAuditEntries",
        admin_pb.ListAuditEntriesRequest(
            start_time=timestamp_pb2.Timestamp(seconds=1_800_000_000),
            end_time=timestamp_pb2.Timestamp(seconds=1_700_000_000),
        ).SerializeToString(),
        "operator",
        INVALID,
        "INVALID_TIME_RANGE",
        person=True,
    ),
    GrpcCase(
        "audit-learner-key-instead-of-pseudonym",
        "toolplane",
        ADMIN + "ListAuditEntries",
        admin_pb.ListAuditEntriesRequest(learner_ref="L-2041-1").SerializeToString(),
        "operator",
        INVALID,
        "INVALID_LEARNER_REF",
        person=True,
    ),
    GrpcCase(
        "grant-with-a-permission-that-does-not-exist",
        "toolplane",
        ADMIN + "CreateGrant",
        admin_pb.CreateGrantRequest(
            agent_id="research-agent", tool_pattern="docs.*", permission="admin"
        ).SerializeToString(),
        "operator",
        INVALID,
        "INVALID_GRANT",
        person=True,
    ),
    GrpcCase(
        "people-api-without-a-person",
        "toolplane",
        ADMIN + "IssueAgentToken",
        admin_pb.IssueAgentTokenRequest(agent_id="research-agent").SerializeToString(),
        "operator",
        grpc.StatusCode.UNAUTHENTICATED,
        "OPERATOR_UNAUTHENTICATED",
    ),
    # A family's rights requests, as the platform records them.
    GrpcCase(
        "rights-request-without-kind",
        "context",
        RIGHTS + "SubmitRightsRequest",
        rights_pb.SubmitRightsRequestRequest(
            request_id="TICKET-1", learner_id="L-2041-1", requested_by="U-2041-P1"
        ).SerializeToString(),
        "platform",
        INVALID,
        "INVALID_RIGHTS_KIND",
    ),
    GrpcCase(
        "rights-request-unknown-id",
        "context",
        RIGHTS + "GetRightsRequest",
        rights_pb.GetRightsRequestRequest(
            request_id="TICKET-0", requested_by="U-2041-P1"
        ).SerializeToString(),
        "platform",
        NOT_FOUND,
        "RIGHTS_REQUEST_NOT_FOUND",
    ),
]

for n, sql in enumerate(SQL_LIKE, start=1):
    CASES += [
        GrpcCase(
            f"sql-{n}-rights-request-id",
            "context",
            RIGHTS + "SubmitRightsRequest",
            rights_pb.SubmitRightsRequestRequest(
                request_id=sql,
                kind=rights_pb.RIGHTS_KIND_EXPORT,
                learner_id="L-2041-1",
                requested_by="U-2041-P1",
            ).SerializeToString(),
            "platform",
            INVALID,
            "INVALID_REQUEST_ID",
        ),
        GrpcCase(
            f"sql-{n}-build-context-learner",
            "context",
            CONTEXT + "BuildContext",
            context_pb.BuildContextRequest(
                learner_id=sql, purpose="tutor_hint", persist=True
            ).SerializeToString(),
            "gateway",
            INVALID,
            "INVALID_LEARNER_ID",
        ),
        GrpcCase(
            f"sql-{n}-check-access-learner",
            "context",
            CONTEXT + "CheckLearnerAccess",
            context_pb.CheckLearnerAccessRequest(
                user_id="U-2041-P1", learner_id=sql, resource_scope="*"
            ).SerializeToString(),
            "toolplane",
            INVALID,
            "INVALID_LEARNER_ID",
        ),
        GrpcCase(
            f"sql-{n}-search-query",
            "context",
            CONTEXT + "SearchKnowledge",
            context_pb.SearchKnowledgeRequest(query=sql).SerializeToString(),
            "gateway",
            grpc.StatusCode.OK,
            check=_no_hits,
        ),
        GrpcCase(
            f"sql-{n}-knowledge-node",
            "context",
            CONTEXT + "GetKnowledgeNode",
            context_pb.GetKnowledgeNodeRequest(node_id=sql).SerializeToString(),
            "gateway",
            NOT_FOUND,
            "KNOWLEDGE_NODE_NOT_FOUND",
        ),
        GrpcCase(
            f"sql-{n}-conversation-session",
            "context",
            CONTEXT + "BuildConversationContext",
            context_pb.BuildConversationContextRequest(
                session_id=sql, turn_id=sql, current_user_message="hi"
            ).SerializeToString(),
            "gateway",
            NOT_FOUND,
            "SESSION_NOT_FOUND",
        ),
        GrpcCase(
            f"sql-{n}-snapshot-ref",
            "context",
            CONTEXT + "GetSnapshot",
            context_pb.GetSnapshotRequest(input_ref=sql).SerializeToString(),
            "audit",
            INVALID,
            "INVALID_INPUT_REF",
        ),
        GrpcCase(
            f"sql-{n}-prompt-learner",
            "gateway",
            GATEWAY + "RunPrompt",
            gateway_pb.RunPromptRequest(
                prompt_id="learner.tutor_hint", learner_id=sql
            ).SerializeToString(),
            "internal",
            INVALID,
            "CONTEXT_REJECTED",
        ),
        GrpcCase(
            f"sql-{n}-prompt-id",
            "gateway",
            GATEWAY + "RunPrompt",
            gateway_pb.RunPromptRequest(prompt_id=sql).SerializeToString(),
            "internal",
            NOT_FOUND,
            "UNKNOWN_PROMPT",
        ),
        GrpcCase(
            f"sql-{n}-tool-user",
            "toolplane",
            TOOLPLANE + "CallTool",
            toolplane_pb.CallToolRequest(tool="application.list", user_id=sql).SerializeToString(),
            "internal",
            INVALID,
            "INVALID_IDENTIFIER",
            agent="engineering-agent",
            audit_rows=1,  # a refused call leaves its row, whatever it was refused for
        ),
        _tool_call(
            f"sql-{n}-tool-application-id",
            "application.get",
            {"application_id": sql},
            "ERROR_CODE_VALIDATION_ERROR",
        ),
    ]

CASES += [
    _tool_call(
        f"confusable-{name}", tool, {"learner_id": "L-2041-1"}, "ERROR_CODE_RESOURCE_NOT_FOUND"
    )
    for name, tool in CONFUSABLES.items()
]


async def _send(stack: Stack, case: GrpcCase) -> bytes:
    metadata = stack.metadata(case.caller)
    if case.agent is not None:
        metadata += (("authorization", f"Bearer {stack.agent_tokens[case.agent]}"),)
    if case.person:
        metadata += (("authorization", f"Bearer {stack.operator_token}"),)
    async with grpc.aio.insecure_channel(stack.services[case.service].address) as channel:
        if case.streaming:
            # No serializers: the raw bytes go out as they are and come back as bytes.
            streaming: grpc.aio.UnaryStreamMultiCallable[bytes, bytes] = channel.unary_stream(
                case.method
            )
            stream = streaming(case.request, metadata=metadata, timeout=20)
            return b"".join([message async for message in stream])
        unary: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(case.method)
        return await unary(case.request, metadata=metadata, timeout=20)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
async def test_grpc_bad_input_gets_a_precise_error(
    case: GrpcCase, bad_input_stack: Stack, ledger: Ledger
) -> None:
    ledger.cases_run.append(case.id)
    ledger.expected_audit_rows += case.audit_rows
    if case.code is not grpc.StatusCode.OK:
        with pytest.raises(grpc.aio.AioRpcError) as failure:
            await _send(bad_input_stack, case)
        details = error_details(failure.value)
        assert (details.code, details.reason) == (case.code, case.reason), details
        if case.reason is not None:
            assert details.domain == case.service
        assert "Traceback" not in details.message
        assert "<class" not in details.message
        return
    response = await _send(bad_input_stack, case)
    if case.tool_error is not None:
        answer = toolplane_pb.CallToolResponse.FromString(response)
        assert not answer.success
        assert tool_pb2.ErrorCode.Name(answer.error.code) == case.tool_error
    if case.check is not None:
        case.check(response)
