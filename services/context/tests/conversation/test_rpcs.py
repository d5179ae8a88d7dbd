"""BuildConversationContext and RecordTurn through a real server, as the gateway calls them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc
import grpc.aio
import pytest

from nemo_core.errors import error_details
from nemo_protos.context.v1 import context_service_pb2 as pb
from nemo_protos.context.v1 import conversation_pb2
from services.context.tests.conftest import RunningContextServer

TIMEOUT = 10.0
MakeSession = Callable[..., Awaitable[str]]


def turn_messages(question: str, answer: str) -> list[conversation_pb2.TurnMessage]:
    return [
        conversation_pb2.TurnMessage(
            role=role,
            type=conversation_pb2.MESSAGE_TYPE_TEXT,
            status=conversation_pb2.MESSAGE_STATUS_COMPLETED,
            content=content,
        )
        for role, content in (
            (conversation_pb2.MESSAGE_ROLE_USER, question),
            (conversation_pb2.MESSAGE_ROLE_ASSISTANT, answer),
        )
    ]


async def test_a_chat_turn_round_trip(
    context_server: RunningContextServer, make_session: MakeSession
) -> None:
    stub = context_server.stub("gateway")
    session = await make_session("L-2041-1")
    first = await stub.BuildConversationContext(
        pb.BuildConversationContextRequest(
            session_id=session, turn_id="T1", current_user_message="Hệ số góc là gì ạ?"
        ),
        timeout=TIMEOUT,
    )
    assert list(first.bundle.recent_messages) == []
    assert first.bundle.learner_ref.startswith("nemo_")
    assert [hit.node.node_id for hit in first.bundle.retrieved_knowledge] == ["math-08-slope"]
    recorded = await stub.RecordTurn(
        pb.RecordTurnRequest(
            session_id=session,
            turn_id="T1",
            messages=turn_messages("Hệ số góc là gì ạ?", "Là số a trong y = ax + b."),
            summary=conversation_pb2.SummaryUpdate(summary="Hỏi về hệ số góc."),
        ),
        timeout=TIMEOUT,
    )
    assert (recorded.stored_message_count, recorded.summary_version) == (2, 1)
    second = await stub.BuildConversationContext(
        pb.BuildConversationContextRequest(
            session_id=session, turn_id="T2", current_user_message="Còn tung độ gốc?"
        ),
        timeout=TIMEOUT,
    )
    assert [m.content for m in second.bundle.recent_messages] == [
        "Hệ số góc là gì ạ?",
        "Là số a trong y = ax + b.",
    ]
    assert second.bundle.conversation_summary == "Hỏi về hệ số góc."
    assert second.bundle.meta.summary_version == 1
    assert second.bundle.meta.token_budget == context_server.settings.conversation_token_budget


async def test_only_the_gateway_builds_and_records_conversations(
    context_server: RunningContextServer,
) -> None:
    build = pb.BuildConversationContextRequest(
        session_id="CS-L1-TUTOR", turn_id="T5", current_user_message="Câu hỏi"
    )
    record = pb.RecordTurnRequest(
        session_id="CS-L1-TUTOR", turn_id="T5", messages=turn_messages("a", "b")
    )
    for caller in ("toolplane", "audit"):
        stub = context_server.stub(caller)
        with pytest.raises(grpc.aio.AioRpcError) as built:
            await stub.BuildConversationContext(build, timeout=TIMEOUT)
        with pytest.raises(grpc.aio.AioRpcError) as recorded:
            await stub.RecordTurn(record, timeout=TIMEOUT)
        assert error_details(built.value).reason == "CALLER_NOT_ALLOWED"
        assert error_details(recorded.value).reason == "CALLER_NOT_ALLOWED"


async def test_conversation_errors_on_the_wire(context_server: RunningContextServer) -> None:
    stub = context_server.stub("gateway")
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await stub.BuildConversationContext(
            pb.BuildConversationContextRequest(
                session_id="CS-NOBODY", turn_id="T1", current_user_message="x"
            ),
            timeout=TIMEOUT,
        )
    details = error_details(unknown.value)
    assert (details.code, details.reason, details.domain) == (
        grpc.StatusCode.NOT_FOUND,
        "SESSION_NOT_FOUND",
        "context",
    )
    with pytest.raises(grpc.aio.AioRpcError) as bad_role:
        await stub.RecordTurn(
            pb.RecordTurnRequest(
                session_id="CS-L1-TUTOR",
                turn_id="T5",
                messages=[conversation_pb2.TurnMessage(content="x")],
            ),
            timeout=TIMEOUT,
        )
    details = error_details(bad_role.value)
    assert (details.code, details.reason, dict(details.metadata)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_MESSAGE_ROLE",
        {"index": "0"},
    )
