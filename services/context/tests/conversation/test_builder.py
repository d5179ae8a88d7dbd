"""BuildConversationContext: seed 004's six scenarios, and what the builder must never do."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import asyncpg
import grpc
import pytest
from asyncpg.connection import LoggedQuery
from google.protobuf import json_format, struct_pb2

from nemo_context import purposes
from nemo_context.conversation import store
from nemo_context.conversation.budget import bundle_tokens
from nemo_context.conversation.builder import (
    BUILD_VERSION,
    ConversationBuilder,
    ConversationSettings,
    build_conversation_context,
)
from nemo_context.conversation.record import record_turn
from nemo_context.gate.masking import ENCODED_MASK, FIELD_MASK, ID_MASK, VALUE_MASK
from nemo_context.pseudonym import Pseudonymizer
from nemo_context.purposes import Purpose, Slice
from nemo_context.settings import DEVELOPMENT_IDENTIFIER_KEY
from nemo_context.snapshots.objects import LocalDirectoryObjects
from nemo_context.snapshots.reads import read_snapshot
from nemo_context.snapshots.store import DigestedSnapshotStore
from nemo_core.db import LEARNER_IDS_SETTING, Pool, connect, init_connection, learner_transaction
from nemo_core.errors import ServiceError
from nemo_protos.context.v1 import context_service_pb2 as service_pb
from nemo_protos.context.v1 import conversation_pb2 as pb
from nemo_protos.context.v1 import learner_context_pb2
from services.context.tests.conftest import keys_for

MakeSession = Callable[..., Awaitable[str]]
CounterTotal = Callable[[str, Mapping[str, str]], int]
PSEUDONYMS = Pseudonymizer(b"conversation-tests-key-0123456789abcdef")
COMPLETED, PARTIAL, FAILED = (
    pb.MESSAGE_STATUS_COMPLETED,
    pb.MESSAGE_STATUS_PARTIAL,
    pb.MESSAGE_STATUS_FAILED,
)

TEST_IDENTIFIER_KEY = DEVELOPMENT_IDENTIFIER_KEY.encode()


def builder(pool: Pool, *, recent_turns: int = 8, knowledge_limit: int = 3) -> ConversationBuilder:
    return ConversationBuilder(
        pool,
        PSEUDONYMS,
        ConversationSettings(
            recent_turns=recent_turns,
            default_token_budget=4000,
            knowledge_limit=knowledge_limit,
            identifier_key=DEVELOPMENT_IDENTIFIER_KEY.encode(),
        ),
    )


def said(
    role: pb.MessageRole.ValueType, text: str, status: pb.MessageStatus.ValueType = COMPLETED
) -> pb.TurnMessage:
    return pb.TurnMessage(role=role, type=pb.MESSAGE_TYPE_TEXT, status=status, content=text)


def exchange(
    question: str, answer: str, answer_status: pb.MessageStatus.ValueType = COMPLETED
) -> list[pb.TurnMessage]:
    return [
        said(pb.MESSAGE_ROLE_USER, question),
        said(pb.MESSAGE_ROLE_ASSISTANT, answer, answer_status),
    ]


async def record(
    pool: Pool,
    session_id: str,
    turn_id: str,
    messages: Sequence[pb.TurnMessage],
    *,
    state: pb.ConversationState | None = None,
    summary: pb.SummaryUpdate | None = None,
) -> service_pb.RecordTurnResponse:
    request = service_pb.RecordTurnRequest(
        session_id=session_id, turn_id=turn_id, messages=messages, state=state, summary=summary
    )
    return await record_turn(pool, request, TEST_IDENTIFIER_KEY)


async def build(
    pool: Pool,
    session_id: str,
    turn_id: str,
    message: str = "Cô giải thích tiếp giúp em với ạ.",
    *,
    token_budget: int = 0,
    recent_turns: int = 8,
) -> pb.ConversationBundle:
    request = service_pb.BuildConversationContextRequest(
        session_id=session_id,
        turn_id=turn_id,
        current_user_message=message,
        token_budget=token_budget,
    )
    return (await builder(pool, recent_turns=recent_turns).build(request)).message


def contents(bundle: pb.ConversationBundle) -> list[str]:
    return [message.content for message in bundle.recent_messages]


# Seed 004, scenario 1: the second turn sees the first.
async def test_second_turn_includes_the_first(
    context_pool: Pool, make_session: MakeSession
) -> None:
    session = await make_session("L-2041-1")
    await record(context_pool, session, "T1", exchange("(a + b)² là gì ạ?", "a² + 2ab + b²."))
    bundle = await build(context_pool, session, "T2", "Vậy (a - b)² thì sao ạ?")
    assert contents(bundle) == ["(a + b)² là gì ạ?", "a² + 2ab + b²."]
    assert [m.turn_id for m in bundle.recent_messages] == ["T1", "T1"]
    assert [m.role for m in bundle.recent_messages] == [
        pb.MESSAGE_ROLE_USER,
        pb.MESSAGE_ROLE_ASSISTANT,
    ]
    assert bundle.current_user_message == "Vậy (a - b)² thì sao ạ?"
    assert (bundle.session_id, bundle.turn_id) == (session, "T2")
    assert bundle.meta.included_message_count == 2
    assert bundle.meta.dropped_message_count == 0
    assert bundle.meta.build_version == BUILD_VERSION


# Seed 004, scenario 2: a reply cut mid-stream (and failed or cancelled ones) is not context.
async def test_cut_stream_and_failed_replies_are_not_context(context_pool: Pool) -> None:
    bundle = await build(
        context_pool,
        "CS-L1-TUTOR",
        "T5",
        "Em quên mất hạng tử ở giữa, cô giải thích lại giúp em với.",
    )
    # The demo session: M-6 failed, M-9 partial, M-11 cancelled, M-2 and M-12 UI events,
    # M-12 and M-13 belong to the current turn T5, M-5 is a tool result.
    assert [m.message_id for m in bundle.recent_messages] == [
        "M-1",
        "M-3",
        "M-4",
        "M-5",
        "M-7",
        "M-8",
        "M-10",
    ]
    text = "\n".join(contents(bundle))
    assert "Ở đây a = 2x nên" not in text  # the partial reply
    assert "Chưa đúng rồi. Em" not in text  # the cancelled one
    assert "phase_changed" not in text
    assert "typing" not in text
    tool = bundle.recent_messages[3]
    assert tool.type == pb.MESSAGE_TYPE_TOOL_RESULT
    assert tool.content == "Tìm thấy nút Hằng đẳng thức (lớp 8) và hai bài luyện tập liên quan."


async def test_a_partial_reply_recorded_by_the_gateway_is_never_reused(
    context_pool: Pool, make_session: MakeSession
) -> None:
    session = await make_session("L-2041-1")
    await record(context_pool, session, "T1", exchange("Câu một?", "Trả lời một."))
    await record(context_pool, session, "T2", exchange("Câu hai?", "Trả lời bị cắt giữa", PARTIAL))
    bundle = await build(context_pool, session, "T3")
    assert contents(bundle) == ["Câu một?", "Trả lời một.", "Câu hai?"]


# Seed 004, scenario 3: the current turn's stored messages are not repeated as history.
async def test_current_turn_is_excluded(context_pool: Pool, make_session: MakeSession) -> None:
    session = await make_session("L-2041-1")
    await record(context_pool, session, "T1", exchange("Câu một?", "Trả lời một."))
    # The gateway stored the current question already (as the demo's pending T5 message is).
    await record(context_pool, session, "T2", [said(pb.MESSAGE_ROLE_USER, "Câu hai?")])
    bundle = await build(context_pool, session, "T2", "Câu hai?")
    assert contents(bundle) == ["Câu một?", "Trả lời một."]
    assert bundle.current_user_message == "Câu hai?"
    assert "T2" not in {m.turn_id for m in bundle.recent_messages}


# Seed 004, scenario 4: a long conversation keeps the last N turns plus the summary.
async def test_long_conversation_keeps_the_window_and_the_summary(
    context_pool: Pool, make_session: MakeSession
) -> None:
    session = await make_session("L-2041-1")
    for turn in range(1, 13):
        summary = pb.SummaryUpdate(summary="Tóm tắt lượt 1 đến 3.") if turn == 3 else None
        await record(
            context_pool,
            session,
            f"T{turn}",
            exchange(f"Hỏi {turn}", f"Đáp {turn}"),
            summary=summary,
        )
    bundle = await build(context_pool, session, "T13")
    assert [m.turn_id for m in bundle.recent_messages][::2] == [f"T{t}" for t in range(5, 13)]
    assert bundle.conversation_summary == "Tóm tắt lượt 1 đến 3."
    assert bundle.meta.summary_version == 1
    assert bundle.meta.included_message_count == 16
    assert bundle.meta.dropped_message_count == 8
    # T4 is outside the window and not covered by the summary.
    assert bundle.meta.summary_stale

    response = await record(
        context_pool,
        session,
        "T12",
        exchange("Hỏi 12", "Đáp 12"),
        summary=pb.SummaryUpdate(summary="Tóm tắt lượt 1 đến 4.", covers_through_turn_id="T4"),
    )
    assert response.summary_version == 2
    bundle = await build(context_pool, session, "T13")
    assert bundle.conversation_summary == "Tóm tắt lượt 1 đến 4."
    assert bundle.meta.summary_version == 2
    assert not bundle.meta.summary_stale

    # A smaller window leaves turns the summary does not cover.
    narrow = await build(context_pool, session, "T13", recent_turns=4)
    assert [m.turn_id for m in narrow.recent_messages][::2] == ["T9", "T10", "T11", "T12"]
    assert narrow.meta.summary_stale


async def test_without_a_summary_dropped_turns_are_stale(
    context_pool: Pool, make_session: MakeSession
) -> None:
    session = await make_session("L-2041-1")
    for turn in range(1, 4):
        await record(context_pool, session, f"T{turn}", exchange(f"Hỏi {turn}", f"Đáp {turn}"))
    bundle = await build(context_pool, session, "T4", recent_turns=2)
    assert bundle.meta.summary_version == 0
    assert bundle.conversation_summary == ""
    assert bundle.meta.summary_stale
    assert not (await build(context_pool, session, "T4", recent_turns=3)).meta.summary_stale


# Seed 004, scenario 5: an empty session builds without error.
async def test_empty_session(context_pool: Pool, make_session: MakeSession) -> None:
    session = await make_session("L-2041-3")
    bundle = await build(context_pool, session, "T1", "Phân số là gì ạ?")
    assert list(bundle.recent_messages) == []
    assert bundle.conversation_summary == ""
    assert bundle.meta.included_message_count == 0
    assert bundle.meta.dropped_message_count == 0
    assert bundle.meta.summary_version == 0
    assert not bundle.meta.summary_stale
    assert not bundle.state.extracted_info.fields
    assert not bundle.state.agent_state.fields
    assert bundle.profile.grade == 5
    assert bundle.learner_ref == PSEUDONYMS.learner_ref("L-2041-3")
    assert [hit.node.node_id for hit in bundle.retrieved_knowledge] == ["math-05-fractions"]


# Seed 004, scenario 6: over budget, the oldest history goes first; message and state stay.
async def test_over_budget_trims_oldest_first_and_keeps_message_and_state(
    context_pool: Pool, make_session: MakeSession
) -> None:
    session = await make_session("L-2041-1")
    padding = " — một lời giải thích dài về khai triển bình phương của một tổng" * 4
    for turn in range(1, 7):
        await record(
            context_pool, session, f"T{turn}", exchange(f"Hỏi {turn}", f"Đáp {turn}{padding}")
        )
    state = pb.ConversationState()
    state.agent_state.update({"phase": "practice", "hint_level": 2})
    await record(context_pool, session, "T6", exchange("Hỏi 6", f"Đáp 6{padding}"), state=state)

    full = await build(context_pool, session, "T7")
    assert full.meta.estimated_tokens == bundle_tokens(full)
    assert full.meta.included_message_count == 12
    budget = full.meta.estimated_tokens * 2 // 3
    trimmed = await build(context_pool, session, "T7", token_budget=budget)
    assert trimmed.meta.token_budget == budget
    assert trimmed.meta.estimated_tokens <= budget
    assert trimmed.meta.estimated_tokens == bundle_tokens(trimmed)
    kept = [m.turn_id for m in trimmed.recent_messages][::2]
    assert kept
    assert kept == [f"T{t}" for t in range(7 - len(kept), 7)]
    assert trimmed.meta.dropped_message_count == 12 - len(trimmed.recent_messages)
    assert trimmed.current_user_message == full.current_user_message
    assert trimmed.state == full.state
    assert json_format.MessageToDict(trimmed.state.agent_state) == {
        "phase": "practice",
        "hint_level": 2.0,
    }
    assert trimmed.meta.summary_stale  # dropped turns, no summary

    starved = await build(context_pool, session, "T7", token_budget=10)
    assert list(starved.recent_messages) == []
    assert starved.current_user_message == full.current_user_message
    assert starved.state == full.state
    assert starved.meta.estimated_tokens > 10  # over budget, and it says so


async def test_state_profile_and_knowledge_of_the_demo_session(context_pool: Pool) -> None:
    bundle = await build(context_pool, "CS-L1-TUTOR", "T5", "Em quên mất hạng tử ở giữa ạ.")
    info = json_format.MessageToDict(bundle.state.extracted_info)
    assert info["topic_node_id"] == "math-08-algebraic-identities"
    assert json_format.MessageToDict(bundle.state.agent_state)["pending_exercise"] == "(x + 5)²"
    assert bundle.profile.grade == 8
    assert not bundle.profile.HasField("age_years")  # minimal profile: the grade only
    assert bundle.learner_ref == PSEUDONYMS.learner_ref("L-2041-1")
    assert bundle.conversation_summary.startswith("Học sinh hỏi về hằng đẳng thức")
    assert bundle.meta.summary_version == 1
    assert not bundle.meta.summary_stale
    # The session's topic comes first; nothing else in the message names a node.
    assert [hit.node.node_id for hit in bundle.retrieved_knowledge] == [
        "math-08-algebraic-identities"
    ]


async def test_knowledge_named_in_the_message_is_retrieved(
    context_pool: Pool, make_session: MakeSession
) -> None:
    session = await make_session("L-2041-1")
    bundle = await build(context_pool, session, "T1", "Em chưa hiểu hệ số góc của đường thẳng ạ.")
    assert [hit.node.title for hit in bundle.retrieved_knowledge] == ["Hệ số góc"]


async def test_sessions_of_other_learners_stay_apart(context_pool: Pool) -> None:
    bundle = await build(context_pool, "CS-L2-TUTOR", "T2")
    assert bundle.learner_ref == PSEUDONYMS.learner_ref("L-2041-2")
    assert bundle.profile.grade == 6
    assert contents(bundle) == [
        "Vì sao âm nhân âm lại ra dương ạ?",
        "Nhân với một số âm là đổi hướng trên trục số; đổi hướng hai lần thì quay về hướng cũ.",
    ]


async def test_every_statement_is_bound_to_the_sessions_learner(context_dsn: str) -> None:
    statements: list[LoggedQuery] = []

    async def init(conn: asyncpg.Connection[asyncpg.Record]) -> None:
        await init_connection(conn)
        conn.add_query_logger(statements.append)

    pool = await asyncpg.create_pool(context_dsn, min_size=1, max_size=1, init=init)
    try:
        await build(pool, "CS-L2-TUTOR", "T2", "Âm nhân âm ạ?")
    finally:
        await pool.close()
    queries = [statement.query for statement in statements]
    # The session's learner is looked up by key, then everything runs bound to exactly it.
    [lookup] = [s for s in statements if "chat_session_learner" in s.query]
    assert lookup.args == ("CS-L2-TUTOR",)
    [bind] = [s for s in statements if LEARNER_IDS_SETTING in s.args]
    assert bind.args == (LEARNER_IDS_SETTING, "L-2041-2")
    reads = [s for s in statements if "learning." in s.query and s is not lookup]
    assert len(reads) >= 5
    for statement in reads:
        assert "L-2041-2" in statement.args, statement.query
        assert queries.index(bind.query) < queries.index(statement.query)


async def test_keys_typed_into_chat_are_masked(
    context_pool: Pool, make_session: MakeSession
) -> None:
    session = await make_session("L-2041-1")
    await record(
        context_pool,
        session,
        "T1",
        exchange("Mã học sinh của em là L-2041-1, tài khoản mẹ em là u-2041-p1.", "Cô nhớ rồi."),
    )
    bundle = await build(
        context_pool, session, "T2", "Em là L-2041-1 đây ạ, bạn L-2041-10 ngồi cạnh em."
    )
    assert contents(bundle)[0] == f"Mã học sinh của em là {ID_MASK}, tài khoản mẹ em là {ID_MASK}."
    assert bundle.current_user_message == f"Em là {ID_MASK} đây ạ, bạn L-2041-10 ngồi cạnh em."


async def test_chat_text_naming_forbidden_fields_is_redacted_not_refused(
    context_pool: Pool, make_session: MakeSession
) -> None:
    session = await make_session("L-2041-1")
    reply = 'Các từ mới: "name": tên, "address": địa chỉ, "Email" : thư điện tử.'
    await record(context_pool, session, "T1", exchange("Dạy em vài từ tiếng Anh ạ.", reply))
    await record(
        context_pool, session, "T2", exchange('Còn {"phone": "0912"} là gì ạ?', "Là số điện thoại.")
    )
    for turn in ("T3", "T4", "T5"):  # every later turn still builds
        bundle = await build(context_pool, session, turn, 'Em viết {"dob": 1} đúng không?')
    # Keys and the values written after them; the rest of each message stays as written.
    assert contents(bundle)[1] == (
        f"Các từ mới: {FIELD_MASK}: {VALUE_MASK}, {FIELD_MASK}: {VALUE_MASK}, "
        f"{FIELD_MASK} : {VALUE_MASK}"
    )
    assert contents(bundle)[2] == f"Còn {{{FIELD_MASK}: {VALUE_MASK}}} là gì ạ?"
    assert bundle.current_user_message == f"Em viết {{{FIELD_MASK}: {VALUE_MASK}}} đúng không?"


async def test_encoded_keys_are_masked_and_the_rest_of_the_message_kept(
    context_pool: Pool, make_session: MakeSession
) -> None:
    session = await make_session("L-2041-1")
    hidden_id = 'xem {"ref": "L\\u002d2041\\u002d1"} nhé'
    await record(context_pool, session, "T1", exchange(hidden_id, "Cô xem rồi."))
    deep = "[" * 300 + '"x"'
    bundle = await build(context_pool, session, "T2", f"Mã em là TC0yMDQxLTE= ạ {deep}")
    assert contents(bundle) == [f'xem {{"ref": "{ENCODED_MASK}"}} nhé', "Cô xem rồi."]
    assert bundle.current_user_message == f"Mã em là {ENCODED_MASK} ạ {deep}"


async def test_completed_system_messages_of_earlier_turns_are_not_history(
    context_pool: Pool, make_session: MakeSession
) -> None:
    session = await make_session("L-2041-1")
    turn = [
        said(pb.MESSAGE_ROLE_SYSTEM, "Chỉ gợi ý từng bước, không đưa đáp án."),
        *exchange("Câu một?", "Trả lời một."),
    ]
    await record(context_pool, session, "T1", turn)
    bundle = await build(context_pool, session, "T2")
    assert contents(bundle) == ["Câu một?", "Trả lời một."]
    assert pb.MESSAGE_ROLE_SYSTEM not in {m.role for m in bundle.recent_messages}
    assert bundle.meta.included_message_count == 2


async def test_a_forbidden_name_in_the_structured_state_is_dropped_and_counted(
    context_pool: Pool, make_session: MakeSession
) -> None:
    session = await make_session("L-2041-1")
    await record(context_pool, session, "T1", exchange("Hỏi", "Đáp"))
    # RecordTurn refuses such a state; one stored by any other path (or a key that became an
    # identifier later) neither reaches the model nor ends the session.
    async with learner_transaction(context_pool, ["L-2041-1"]) as conn:
        await store.write_state(
            conn, session, "L-2041-1", {"guardianPhone": "0912", "topic": "phân số"}, {}
        )
    bundle = await build(context_pool, session, "T2")
    assert dict(bundle.state.extracted_info.fields) == {
        "topic": struct_pb2.Value(string_value="phân số")
    }
    assert [(r.kind, r.count) for r in bundle.meta.redactions] == [
        (learner_context_pb2.IDENTIFIER_KIND_FIELD, 1)
    ]


async def test_a_state_that_names_a_key_linked_later_is_masked_not_fatal(
    context_pool: Pool, make_session: MakeSession
) -> None:
    session = await make_session("L-2041-1")
    await record(context_pool, session, "T1", exchange("Hỏi", "Đáp"))
    # Stored when U-2041-P1 was no relative yet (any other path); now the key is linked.
    async with learner_transaction(context_pool, ["L-2041-1"]) as conn:
        await store.write_state(
            conn, session, "L-2041-1", {"notes": ["cô U-2041-P1 nhắc ôn bài"]}, {"phase": "x"}
        )
    for turn in ("T2", "T3"):  # every later turn still builds
        bundle = await build(context_pool, session, turn)
    assert json_format.MessageToDict(bundle.state.extracted_info) == {
        "notes": [f"cô {ID_MASK} nhắc ôn bài"]
    }


async def test_a_turn_id_linked_to_the_learner_later_never_ends_the_session(
    context_pool: Pool, make_session: MakeSession, owner_dsn: str
) -> None:
    session = await make_session("L-2041-1")
    # U-2041-Z9 is nobody's yet: the turn id is stored as it is.
    await record(context_pool, session, "T-U-2041-Z9", exchange("Câu một?", "Trả lời một."))
    conn = await connect(owner_dsn)
    try:
        await conn.execute(
            "INSERT INTO learning.users (id, role, display_name) VALUES"
            " ('U-2041-Z9', 'parent', 'Phan Thị Gấm')"
        )
        await conn.execute(
            "INSERT INTO learning.guardians (learner_id, user_id) VALUES ('L-2041-1', 'U-2041-Z9')"
        )
        await record(context_pool, session, "T2", exchange("Cô Gấm nhờ em hỏi?", "Được."))
        for turn in ("T3", "T4"):  # every later turn builds, the new guardian's key masked
            bundle = await build(context_pool, session, turn)
        masked = f"T-{ID_MASK}"
        assert [m.turn_id for m in bundle.recent_messages] == [masked, masked, "T2", "T2"]
        # Her given name after "cô" is hers now too.
        assert contents(bundle) == ["Câu một?", "Trả lời một.", "Cô [name] nhờ em hỏi?", "Được."]
        assert [(r.kind, r.count) for r in bundle.meta.redactions] == [
            (learner_context_pb2.IDENTIFIER_KIND_KEY, 2),
            (learner_context_pb2.IDENTIFIER_KIND_NAME, 1),
        ]
        # The guardian's name is known now: a new turn naming her is masked, not refused.
        await record(context_pool, session, "T4", exchange("Bạn Phan Thị Gấm là ai?", "Dì em."))
        bundle = await build(context_pool, session, "T5")
        assert contents(bundle)[-2] == "Bạn [name] là ai?"
    finally:
        await conn.execute("DELETE FROM learning.guardians WHERE user_id = 'U-2041-Z9'")
        await conn.execute("DELETE FROM learning.users WHERE id = 'U-2041-Z9'")
        await conn.close()


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"session_id": "", "turn_id": "T1"}, "INVALID_SESSION_ID"),
        ({"session_id": "x" * 129, "turn_id": "T1"}, "INVALID_SESSION_ID"),
        ({"session_id": "CS-L1-TUTOR", "turn_id": ""}, "INVALID_TURN_ID"),
        ({"session_id": "CS-L1-TUTOR", "turn_id": "T\n1"}, "INVALID_TURN_ID"),
        (
            {"session_id": "CS-L1-TUTOR", "turn_id": "T6", "current_user_message": " "},
            "INVALID_MESSAGE",
        ),
        (
            {"session_id": "CS-L1-TUTOR", "turn_id": "T6", "token_budget": -5},
            "INVALID_TOKEN_BUDGET",
        ),
    ],
)
async def test_invalid_requests(context_pool: Pool, fields: dict[str, object], reason: str) -> None:
    request = service_pb.BuildConversationContextRequest(
        **({"current_user_message": "Câu hỏi"} | fields)  # type: ignore[arg-type]
    )
    with pytest.raises(ServiceError) as caught:
        await builder(context_pool).build(request)
    assert (caught.value.code, caught.value.reason) == (grpc.StatusCode.INVALID_ARGUMENT, reason)


async def test_unknown_session_is_not_found(context_pool: Pool) -> None:
    with pytest.raises(ServiceError) as caught:
        await build(context_pool, "CS-NOBODY", "T1")
    assert (caught.value.code, caught.value.reason) == (
        grpc.StatusCode.NOT_FOUND,
        "SESSION_NOT_FOUND",
    )


# The tutor_chat row of the purpose table decides what a conversation bundle holds.


def _edited_table(**changes: object) -> Mapping[str, Purpose]:
    edited = dataclasses.replace(purposes.PURPOSES[purposes.TUTOR_CHAT], **changes)  # type: ignore[arg-type]
    return MappingProxyType({**purposes.PURPOSES, purposes.TUTOR_CHAT: edited})


async def test_editing_the_tutor_chat_row_changes_what_is_built_and_listed(
    context_pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = "Em chưa hiểu hằng đẳng thức ạ."
    before = await build(context_pool, "CS-L1-TUTOR", "T5", message)
    assert before.recent_messages
    assert before.retrieved_knowledge
    assert before.conversation_summary
    assert not before.profile.HasField("age_years")

    slices = (Slice.PROFILE, Slice.AGE, Slice.CONVERSATION_STATE)
    monkeypatch.setattr(purposes, "PURPOSES", _edited_table(slices=slices))
    after = await build(context_pool, "CS-L1-TUTOR", "T5", message)
    listed = {row.name: row for row in purposes.purpose_table().purposes}
    assert (
        list(listed[purposes.TUTOR_CHAT].slices) == list(after.slices) == [str(s) for s in slices]
    )
    assert after.purpose == purposes.TUTOR_CHAT
    assert list(after.recent_messages) == []
    assert list(after.retrieved_knowledge) == []
    assert after.conversation_summary == ""
    assert after.meta.included_message_count == 0
    assert after.profile.grade == 8
    assert after.profile.age_years > 0  # declared now, in whole years
    assert after.state == before.state

    monkeypatch.setattr(purposes, "PURPOSES", _edited_table(slices=(Slice.KNOWLEDGE,)))
    knowledge_only = await build(context_pool, "CS-L1-TUTOR", "T5", message)
    assert not knowledge_only.HasField("profile")
    assert not knowledge_only.HasField("state")
    # Knowledge for the message alone: without the state, the session's topic is unknown.
    assert [hit.node.node_id for hit in knowledge_only.retrieved_knowledge] == [
        "math-08-algebraic-identities"
    ]


def test_a_conversation_row_cannot_declare_what_a_conversation_bundle_cannot_hold() -> None:
    row = purposes.PURPOSES[purposes.TUTOR_CHAT]
    with pytest.raises(ValueError, match="cannot hold"):
        dataclasses.replace(row, slices=(*row.slices, Slice.RECENT_EVIDENCE), evidence_limit=5)
    with pytest.raises(ValueError, match="conversation slice"):
        dataclasses.replace(
            purposes.PURPOSES["item_generation"],
            slices=(Slice.PROFILE, Slice.MASTERY, Slice.CONVERSATION_HISTORY),
        )


# Knowledge passages are curriculum: one the gate would refuse is withheld, not fatal.


async def test_a_knowledge_passage_the_gate_would_refuse_is_withheld_and_counted(
    context_pool: Pool, owner_dsn: str, make_session: MakeSession, counter_total: CounterTotal
) -> None:
    node = "it-10-json-basics"
    conn = await connect(owner_dsn)
    try:
        await conn.execute(
            "INSERT INTO knowledge.nodes (id, title, subject, grade, strand, description)"
            " VALUES ($1, 'Định dạng JSON', 'it', 8, 'data', $2)",
            node,
            'Ví dụ một bản ghi: {"name": "An", "email": "an@example.com"}',
        )
        session = await make_session("L-2041-1")
        before = counter_total("nemo.context.knowledge.withheld", {"rule": "key_in_text"})
        for turn in ("T1", "T2"):  # every turn that retrieves it still builds
            bundle = await build(context_pool, session, turn, "Định dạng JSON là gì ạ?")
            assert node not in {hit.node.node_id for hit in bundle.retrieved_knowledge}
            assert bundle.meta.withheld_knowledge_count == 1
        after = counter_total("nemo.context.knowledge.withheld", {"rule": "key_in_text"})
        assert after == before + 2
    finally:
        await conn.execute("DELETE FROM knowledge.nodes WHERE id = $1", node)
        await conn.close()


# Conversations on record: the bundle a turn saw is stored and named by input_ref.


async def test_a_persisted_conversation_bundle_is_a_snapshot_read_back_as_one(
    context_pool: Pool, tmp_path: Path
) -> None:
    snapshots = DigestedSnapshotStore(
        LocalDirectoryObjects(tmp_path / "snapshots"),
        context_pool,
        keys=keys_for(context_pool),
        write_timeout_seconds=5,
    )
    request = service_pb.BuildConversationContextRequest(
        session_id="CS-L1-TUTOR",
        turn_id="T5",
        current_user_message="Em quên mất hạng tử ở giữa ạ.",
        persist=True,
    )
    try:
        returned = (
            await build_conversation_context(builder(context_pool), snapshots, request, "L-2041-1")
        ).message
        assert returned.input_ref.startswith("ai-context/")
        assert f"/{returned.learner_ref}/" in returned.input_ref
        read = (await read_snapshot(snapshots, returned.input_ref)).message
        not_persisted = await build_conversation_context(
            builder(context_pool),
            snapshots,
            service_pb.BuildConversationContextRequest(
                session_id=request.session_id,
                turn_id=request.turn_id,
                current_user_message=request.current_user_message,
            ),
            "L-2041-1",
        )
    finally:
        await snapshots.aclose()
    assert read.sha256 == returned.snapshot_sha256
    assert not read.HasField("bundle")
    stored = pb.ConversationBundle()
    stored.CopyFrom(returned)
    stored.ClearField("input_ref")
    stored.ClearField("snapshot_sha256")
    assert read.conversation_bundle == stored
    assert not_persisted.message.input_ref == ""
