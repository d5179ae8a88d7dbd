"""RecordTurn: final statuses, replacing a turn atomically, state, summaries, and bad input."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf import json_format

from nemo_context.conversation.record import record_turn
from nemo_context.settings import DEVELOPMENT_IDENTIFIER_KEY
from nemo_core.db import Pool, connect
from nemo_core.errors import ServiceError
from nemo_protos.context.v1 import context_service_pb2 as service_pb
from nemo_protos.context.v1 import conversation_pb2 as pb

MakeSession = Callable[..., Awaitable[str]]

TEST_IDENTIFIER_KEY = DEVELOPMENT_IDENTIFIER_KEY.encode()


def text(
    role: pb.MessageRole.ValueType,
    content: str,
    status: pb.MessageStatus.ValueType = pb.MESSAGE_STATUS_COMPLETED,
) -> pb.TurnMessage:
    return pb.TurnMessage(role=role, type=pb.MESSAGE_TYPE_TEXT, status=status, content=content)


def raw(role: int, type_: int, status: int = 0, tool_summary: str = "") -> pb.TurnMessage:
    """A message with enum numbers as sent on the wire, known to the schema or not."""
    return pb.TurnMessage(
        role=pb.MessageRole.ValueType(role),
        type=pb.MessageType.ValueType(type_),
        status=pb.MessageStatus.ValueType(status),
        content="x",
        tool_summary=tool_summary,
    )


QUESTION = text(pb.MESSAGE_ROLE_USER, "(x + 5)² bằng bao nhiêu ạ?")
ANSWER = text(pb.MESSAGE_ROLE_ASSISTANT, "x² + 10x + 25.")


async def stored(owner_dsn: str, session_id: str) -> list[tuple[Any, ...]]:
    conn = await connect(owner_dsn)
    try:
        rows = await conn.fetch(
            "SELECT turn_id, seq, role, type, status, content FROM learning.chat_messages"
            " WHERE session_id = $1 ORDER BY seq",
            session_id,
        )
    finally:
        await conn.close()
    return [tuple(row.values()) for row in rows]


async def call(
    pool: Pool,
    session_id: str,
    turn_id: str,
    messages: list[pb.TurnMessage],
    *,
    state: pb.ConversationState | None = None,
    summary: pb.SummaryUpdate | None = None,
) -> service_pb.RecordTurnResponse:
    request = service_pb.RecordTurnRequest(
        session_id=session_id, turn_id=turn_id, messages=messages, state=state, summary=summary
    )
    return await record_turn(pool, request, TEST_IDENTIFIER_KEY)


async def test_messages_are_stored_in_order_with_their_final_status(
    context_pool: Pool, make_session: MakeSession, owner_dsn: str
) -> None:
    session = await make_session("L-2041-1")
    tool = pb.TurnMessage(
        role=pb.MESSAGE_ROLE_TOOL,
        type=pb.MESSAGE_TYPE_TOOL_RESULT,
        status=pb.MESSAGE_STATUS_COMPLETED,
        content='{"items": ["I-ID-01"]}',
        tool_summary="Một bài luyện tập.",
    )
    cut = text(pb.MESSAGE_ROLE_ASSISTANT, "x² + 10x", pb.MESSAGE_STATUS_PARTIAL)
    response = await call(context_pool, session, "T1", [QUESTION, tool, cut])
    assert response.stored_message_count == 3
    assert response.summary_version == 0
    assert await stored(owner_dsn, session) == [
        ("T1", 1, "user", "text", "completed", "(x + 5)² bằng bao nhiêu ạ?"),
        ("T1", 2, "tool", "tool_result", "completed", '{"items": ["I-ID-01"]}'),
        ("T1", 3, "assistant", "text", "partial", "x² + 10x"),
    ]


async def test_recording_the_latest_turn_again_replaces_its_messages(
    context_pool: Pool, make_session: MakeSession, owner_dsn: str
) -> None:
    session = await make_session("L-2041-1")
    await call(context_pool, session, "T1", [QUESTION, ANSWER])
    pending = text(pb.MESSAGE_ROLE_USER, "Còn (x - 5)²?", pb.MESSAGE_STATUS_PENDING)
    await call(context_pool, session, "T2", [pending])
    finished = [
        text(pb.MESSAGE_ROLE_USER, "Còn (x - 5)²?"),
        text(pb.MESSAGE_ROLE_ASSISTANT, "x² - 10x + 25."),
    ]
    response = await call(context_pool, session, "T2", finished)
    assert response.stored_message_count == 2
    rows = await stored(owner_dsn, session)
    assert [(turn, seq, status) for turn, seq, _, _, status, _ in rows] == [
        ("T1", 1, "completed"),
        ("T1", 2, "completed"),
        ("T2", 3, "completed"),
        ("T2", 4, "completed"),
    ]


async def test_an_earlier_turn_cannot_be_rewritten(
    context_pool: Pool, make_session: MakeSession, owner_dsn: str
) -> None:
    session = await make_session("L-2041-1")
    await call(context_pool, session, "T1", [QUESTION, ANSWER])
    await call(context_pool, session, "T2", [QUESTION])
    before = await stored(owner_dsn, session)
    with pytest.raises(ServiceError) as caught:
        await call(context_pool, session, "T1", [QUESTION])
    assert (caught.value.code, caught.value.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "TURN_NOT_LATEST",
    )
    assert await stored(owner_dsn, session) == before


async def test_state_is_replaced_only_when_given(
    context_pool: Pool, make_session: MakeSession, owner_dsn: str
) -> None:
    session = await make_session("L-2041-1")
    state = pb.ConversationState()
    state.extracted_info.update({"topic_node_id": "math-08-algebraic-identities"})
    state.agent_state.update({"phase": "practice", "hint_level": 1})
    await call(context_pool, session, "T1", [QUESTION, ANSWER], state=state)
    await call(context_pool, session, "T2", [QUESTION])  # no state: unchanged
    conn = await connect(owner_dsn)
    try:
        row = await conn.fetchrow(
            "SELECT extracted_info, agent_state FROM learning.conversation_state"
            " WHERE session_id = $1",
            session,
        )
    finally:
        await conn.close()
    assert row is not None
    assert row["extracted_info"] == {"topic_node_id": "math-08-algebraic-identities"}
    assert row["agent_state"] == {"phase": "practice", "hint_level": 1}
    assert json_format.MessageToDict(state.agent_state) == row["agent_state"]


async def test_summaries_are_versioned_and_cover_through_their_turn(
    context_pool: Pool, make_session: MakeSession, owner_dsn: str
) -> None:
    session = await make_session("L-2041-1")
    await call(context_pool, session, "T1", [QUESTION, ANSWER])
    first = await call(
        context_pool, session, "T2", [QUESTION, ANSWER], summary=pb.SummaryUpdate(summary="Một.")
    )
    second = await call(
        context_pool,
        session,
        "T3",
        [QUESTION],
        summary=pb.SummaryUpdate(summary="Hai.", covers_through_turn_id="T1"),
    )
    third = await call(context_pool, session, "T3", [QUESTION, ANSWER])
    assert (first.summary_version, second.summary_version, third.summary_version) == (1, 2, 2)
    conn = await connect(owner_dsn)
    try:
        rows = await conn.fetch(
            "SELECT version, summary, covers_through_seq, covered_turns"
            " FROM learning.conversation_summaries WHERE session_id = $1 ORDER BY version",
            session,
        )
    finally:
        await conn.close()
    assert [tuple(row) for row in rows] == [(1, "Một.", 4, 2), (2, "Hai.", 2, 1)]


async def test_a_summary_of_an_unknown_turn_writes_nothing(
    context_pool: Pool, make_session: MakeSession, owner_dsn: str
) -> None:
    session = await make_session("L-2041-1")
    await call(context_pool, session, "T1", [QUESTION, ANSWER])
    before = await stored(owner_dsn, session)
    with pytest.raises(ServiceError) as caught:
        await call(
            context_pool,
            session,
            "T2",
            [QUESTION],
            summary=pb.SummaryUpdate(summary="X", covers_through_turn_id="T9"),
        )
    assert (caught.value.code, caught.value.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "UNKNOWN_SUMMARY_TURN",
    )
    # The messages of T2 were inserted before the summary failed: rolled back with it.
    assert await stored(owner_dsn, session) == before


@pytest.mark.parametrize(
    ("turn_id", "messages", "summary", "reason"),
    [
        ("", [QUESTION], None, "INVALID_TURN_ID"),
        ("   ", [QUESTION], None, "INVALID_TURN_ID"),
        ("T1", [], None, "NO_MESSAGES"),
        ("T1", [QUESTION] * 65, None, "TOO_MANY_MESSAGES"),
        ("T1", [raw(0, 1, 2)], None, "INVALID_MESSAGE_ROLE"),
        ("T1", [raw(9, 1, 2)], None, "INVALID_MESSAGE_ROLE"),
        ("T1", [raw(1, 7, 2)], None, "INVALID_MESSAGE_TYPE"),
        ("T1", [raw(1, 1)], None, "INVALID_MESSAGE_STATUS"),
        ("T1", [raw(1, 1, 42)], None, "INVALID_MESSAGE_STATUS"),
        ("T1", [raw(1, 2, 2)], None, "INVALID_TOOL_RESULT"),
        ("T1", [raw(3, 1, 2)], None, "INVALID_TOOL_RESULT"),
        ("T1", [raw(1, 1, 2, tool_summary="s")], None, "INVALID_TOOL_RESULT"),
        ("T1", [text(pb.MESSAGE_ROLE_USER, "a\x00b")], None, "INVALID_TEXT"),
        ("T1", [QUESTION], pb.SummaryUpdate(summary=" "), "INVALID_SUMMARY"),
        ("T1", [raw(3, 2, 2, tool_summary="s" * 2_001)], None, "TOOL_SUMMARY_TOO_LONG"),
        # Stored, these would be carried into every later bundle of the session.
        ("T-L-2041-1", [QUESTION], None, "IDENTIFIER_IN_TURN_ID"),
        ("turn of u\u20102041\u2010p1", [QUESTION], None, "IDENTIFIER_IN_TURN_ID"),
        ("lan-nguyenthi-demo-T2", [QUESTION], None, "IDENTIFIER_IN_TURN_ID"),
        ("0912345678", [QUESTION], None, "IDENTIFIER_IN_TURN_ID"),
    ],
)
async def test_bad_input_is_refused_and_writes_nothing(
    context_pool: Pool,
    make_session: MakeSession,
    owner_dsn: str,
    turn_id: str,
    messages: list[pb.TurnMessage],
    summary: pb.SummaryUpdate | None,
    reason: str,
) -> None:
    session = await make_session("L-2041-1")
    await call(context_pool, session, "T0", [QUESTION, ANSWER])
    before = await stored(owner_dsn, session)
    with pytest.raises(ServiceError) as caught:
        await call(context_pool, session, turn_id, messages, summary=summary)
    assert (caught.value.code, caught.value.reason) == (grpc.StatusCode.INVALID_ARGUMENT, reason)
    assert await stored(owner_dsn, session) == before


async def test_unknown_session_is_not_found_and_nothing_is_written(
    context_pool: Pool, owner_dsn: str
) -> None:
    with pytest.raises(ServiceError) as caught:
        await call(context_pool, "CS-NOBODY", "T1", [QUESTION])
    assert (caught.value.code, caught.value.reason) == (
        grpc.StatusCode.NOT_FOUND,
        "SESSION_NOT_FOUND",
    )
    assert await stored(owner_dsn, "CS-NOBODY") == []


async def test_concurrent_recordings_of_one_session_are_serialised(
    context_pool: Pool, make_session: MakeSession, owner_dsn: str
) -> None:
    session = await make_session("L-2041-1")
    responses = await asyncio.gather(
        *(call(context_pool, session, f"T{turn}", [QUESTION, ANSWER]) for turn in range(1, 6))
    )
    assert [response.stored_message_count for response in responses] == [2] * 5
    rows = await stored(owner_dsn, session)
    assert [seq for _, seq, *_ in rows] == list(range(1, 11))
    # Each turn's two messages are adjacent: no recording interleaved with another.
    turns = [turn for turn, *_ in rows]
    assert all(turns[i] == turns[i + 1] for i in range(0, 10, 2))


async def test_clearing_a_turn_reaches_only_the_bound_learner(context_dsn: str) -> None:
    conn = await connect(context_dsn)
    try:
        transaction = conn.transaction()
        await transaction.start()
        try:
            await conn.execute("SELECT set_config('nemo.learner_ids', 'L-2041-2', true)")
            cleared = await conn.fetchval("SELECT learning.clear_chat_turn('CS-L1-TUTOR', 'T1')")
            assert cleared == 0  # L-2041-1's session, while L-2041-2 is bound
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute("DELETE FROM learning.chat_messages WHERE session_id = 'x'")
        finally:
            await transaction.rollback()
    finally:
        await conn.close()


def _state(
    extracted_info: dict[str, Any] | None = None, **agent_state: Any
) -> pb.ConversationState:
    state = pb.ConversationState()
    state.extracted_info.update(extracted_info or {})
    state.agent_state.update(agent_state)
    return state


def _non_finite_state() -> pb.ConversationState:
    state = pb.ConversationState()
    state.agent_state.fields["score"].number_value = float("nan")
    return state


def _kindless_state() -> pb.ConversationState:
    state = pb.ConversationState()
    state.extracted_info.fields["topic"].struct_value.fields["empty"].SetInParent()
    return state


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (_state({"name": "Minh"}), "IDENTIFIER_IN_STATE"),
        (_state(notes=[{"parentName": "Lan"}]), "IDENTIFIER_IN_STATE"),
        (_state(note="hỏi lại học sinh L-2041-1 sau"), "IDENTIFIER_IN_STATE"),
        (_state(note="mẹ là U-2041-P1"), "IDENTIFIER_IN_STATE"),
        (_state(note='{"email": "x@example.com"}'), "IDENTIFIER_IN_STATE"),
        # Identifiers of L-2041-1's circle in state keys (a value is masked when built).
        (_state({"Nguyễn Thị Lan": "mẹ"}), "IDENTIFIER_IN_STATE"),
        (_state(contacts={"0912.345.678": "gọi khi cần"}), "IDENTIFIER_IN_STATE"),
        (_state(note="x" * 32_001), "STATE_TOO_LARGE"),
        (_state(note="a\x00b"), "INVALID_STATE"),
        (_state({"a\x00": 1}), "INVALID_STATE"),
        (_non_finite_state(), "INVALID_STATE"),
        (_kindless_state(), "INVALID_STATE"),
    ],
)
async def test_a_state_later_builds_would_refuse_is_refused_and_writes_nothing(
    context_pool: Pool,
    make_session: MakeSession,
    owner_dsn: str,
    state: pb.ConversationState,
    reason: str,
) -> None:
    session = await make_session("L-2041-1")
    await call(
        context_pool, session, "T0", [QUESTION, ANSWER], state=_state({"topic": "hằng đẳng thức"})
    )
    before = await stored(owner_dsn, session)
    with pytest.raises(ServiceError) as caught:
        await call(context_pool, session, "T1", [QUESTION, ANSWER], state=state)
    assert (caught.value.code, caught.value.reason) == (grpc.StatusCode.INVALID_ARGUMENT, reason)
    assert await stored(owner_dsn, session) == before
    conn = await connect(owner_dsn)
    try:
        kept = await conn.fetchval(
            "SELECT extracted_info FROM learning.conversation_state WHERE session_id = $1", session
        )
    finally:
        await conn.close()
    assert kept == {"topic": "hằng đẳng thức"}


async def test_a_clean_state_with_lookalike_ids_is_stored(
    context_pool: Pool, make_session: MakeSession
) -> None:
    session = await make_session("L-2041-1")
    state = _state({"topic": "phân số"}, note="bạn L-2041-10 cũng hỏi", node_title="Phân số")
    response = await call(context_pool, session, "T1", [QUESTION, ANSWER], state=state)
    assert response.stored_message_count == 2
