"""A tutoring chat across the gateway and the context service: a failed assistant message stays out
of the bundle; a streamed reply that finishes is recorded and is history for the next turn; a
reply whose stream is cut is recorded partial and is not."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import grpc
import pytest

from nemo_core.db import connect
from nemo_core.errors import error_details
from nemo_protos.gateway.v1 import gateway_service_pb2 as gateway_pb
from nemo_testing.otlp import OtlpReceiver
from nemo_testing.providers import ScriptedProvider, Stream
from tests.stack import Stack

from .support import Clients, clients, journey_span, services_in_trace, snapshot

EARLIER_QUESTION = "What is (a + b) squared?"
EARLIER_ANSWER = "It is a squared plus two a b plus b squared."
FAILED_ANSWER = "FAILED-DRAFT: this reply broke before it was finished"
FINISHED = ("For a difference, ", "the middle term is negative. ", "Try it with a = 2x.")
CUT = ("Partial reply. ", "It never finishes ", "properly.")
# What the learner receives: whole sentences, each checked by the chat guardrail first.
FINISHED_SENTENCES = ["".join(FINISHED[:2]), FINISHED[2]]
CUT_SHOWN = CUT[0]


@pytest.fixture
async def chat_session(stack: Stack) -> AsyncIterator[str]:
    """A new session of L-2041-1: one finished turn T1, then T2 whose assistant message failed."""
    session_id = f"CS-JOURNEY-{secrets.token_hex(6)}"
    messages = (
        ("T1", "user", "completed", EARLIER_QUESTION),
        ("T1", "assistant", "completed", EARLIER_ANSWER),
        ("T2", "user", "completed", "And (a - b) squared?"),
        ("T2", "assistant", "failed", FAILED_ANSWER),
    )
    conn = await connect(stack.owner_dsn)
    try:
        await conn.execute(
            "INSERT INTO learning.chat_sessions (id, learner_id) VALUES ($1, 'L-2041-1')",
            session_id,
        )
        for seq, (turn_id, role, status, content) in enumerate(messages, start=1):
            await conn.execute(
                "INSERT INTO learning.chat_messages (id, session_id, learner_id, turn_id, seq,"
                " role, type, status, content)"
                " VALUES ($1, $2, 'L-2041-1', $3, $4, $5, 'text', $6, $7)",
                f"{session_id}-M{seq}",
                session_id,
                turn_id,
                seq,
                role,
                status,
                content,
            )
        yield session_id
    finally:
        await conn.execute("DELETE FROM learning.chat_sessions WHERE id = $1", session_id)
        await conn.close()


async def _turn(
    grpc_clients: Clients, session_id: str, turn_id: str, message: str
) -> tuple[list[gateway_pb.StreamPromptResponse], grpc.aio.AioRpcError | None]:
    events: list[gateway_pb.StreamPromptResponse] = []
    request = gateway_pb.StreamPromptRequest(
        prompt_id="tutor.chat_reply", session_id=session_id, turn_id=turn_id, user_message=message
    )
    try:
        async for event in grpc_clients.gateway.StreamPrompt(request, timeout=20):
            events.append(event)
    except grpc.aio.AioRpcError as error:
        return events, error
    return events, None


async def _stored(owner_dsn: str, session_id: str) -> list[tuple[str, str, str, str]]:
    conn = await connect(owner_dsn)
    try:
        rows = await conn.fetch(
            "SELECT turn_id, role, status, content FROM learning.chat_messages"
            " WHERE session_id = $1 ORDER BY seq",
            session_id,
        )
    finally:
        await conn.close()
    return [(r["turn_id"], r["role"], r["status"], r["content"]) for r in rows]


def _history(request_body: dict[str, object]) -> list[str]:
    messages = request_body["messages"]
    assert isinstance(messages, list)
    return [str(m["content"]) for m in messages if m["role"] != "system"]


async def test_chat_turns_record_finished_replies_and_keep_failed_and_cut_ones_out(
    stack: Stack,
    scripted_provider: ScriptedProvider,
    otlp_receiver: OtlpReceiver,
    chat_session: str,
) -> None:
    scripted_provider.reset()
    scripted_provider.script_stream(Stream(FINISHED), Stream(CUT, cut_after=2), Stream(FINISHED))
    with journey_span("tutoring chat") as trace_id:
        async with clients(stack) as grpc_clients:
            finished, finished_error = await _turn(grpc_clients, chat_session, "T3", "Q3")
            cut, cut_error = await _turn(grpc_clients, chat_session, "T4", "Q4")
            after_cut, after_cut_error = await _turn(grpc_clients, chat_session, "T5", "Q5")
            # The run record names the snapshot of exactly the bundle the model was given.
            seen = await snapshot(grpc_clients, finished[-1].completed.run.input_ref)

    # T3: the failed T2 draft is not in the bundle; the reply streams sentence by sentence.
    t3_history = _history(scripted_provider.requests[0].json())
    assert EARLIER_ANSWER in t3_history
    assert not any(FAILED_ANSWER in text for text in t3_history)
    assert finished_error is None
    assert [e.text_delta for e in finished if e.HasField("text_delta")] == FINISHED_SENTENCES
    assert finished[-1].completed.output.chat_reply.text == "".join(FINISHED)
    assert seen.conversation_bundle.turn_id == "T3"
    assert seen.conversation_bundle.current_user_message == "Q3"
    assert [m.content for m in seen.conversation_bundle.recent_messages] == [
        EARLIER_QUESTION,
        EARLIER_ANSWER,
        "And (a - b) squared?",
    ]

    # T4: the finished T3 reply is history now; its stream is cut after two deltas, when the
    # learner has seen its first sentence.
    assert "".join(FINISHED) in _history(scripted_provider.requests[1].json())
    assert cut_error is not None
    assert cut_error.code() is grpc.StatusCode.UNAVAILABLE
    assert error_details(cut_error).reason == "PROVIDER_STREAM_BROKEN"
    assert [e.text_delta for e in cut if e.HasField("text_delta")] == [CUT_SHOWN]

    # T5: the partial T4 reply is not in the bundle.
    assert after_cut_error is None, after_cut_error
    assert after_cut[-1].completed.output.chat_reply.text == "".join(FINISHED)
    t5_history = _history(scripted_provider.requests[2].json())
    assert not any(CUT_SHOWN in text for text in t5_history)
    assert "".join(FINISHED) in t5_history

    stored = await _stored(stack.owner_dsn, chat_session)
    assert stored[4:] == [
        ("T3", "user", "completed", "Q3"),
        ("T3", "assistant", "completed", "".join(FINISHED)),
        ("T4", "user", "completed", "Q4"),
        ("T4", "assistant", "partial", CUT_SHOWN),
        ("T5", "user", "completed", "Q5"),
        ("T5", "assistant", "completed", "".join(FINISHED)),
    ]
    spans = await services_in_trace(otlp_receiver, trace_id, {"gateway", "context"})
    assert {span.trace_id for span in spans} == {trace_id}
