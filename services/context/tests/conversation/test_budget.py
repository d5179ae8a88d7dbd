"""The conservative token estimate and trimming that never drops the message or the state."""

from __future__ import annotations

from google.protobuf.struct_pb2 import Struct

from nemo_context.conversation.budget import bundle_tokens, estimate_tokens, trim_to_budget
from nemo_protos.context.v1 import conversation_pb2 as pb
from nemo_protos.context.v1 import knowledge_pb2


def test_estimate_errs_high_for_vietnamese_and_english() -> None:
    # Byte-level BPE vocabularies need roughly 6 to 9 tokens for this title, 2 for "hello world".
    assert estimate_tokens("Hằng đẳng thức") == 12
    assert estimate_tokens("hello world") == 4
    assert estimate_tokens("(x + 3)²") == 6
    assert estimate_tokens("   \n\t") == 0
    assert estimate_tokens("数学😀") == 2 + 2 + 2


def test_estimate_grows_with_text() -> None:
    short = estimate_tokens("Em chưa hiểu")
    assert estimate_tokens("Em chưa hiểu hằng đẳng thức") > short > 0


def bundle(turns: int) -> pb.ConversationBundle:
    state = Struct()
    state.update({"phase": "practice", "misconceptions": ["bỏ sót hạng tử 2ab"]})
    return pb.ConversationBundle(
        session_id="S",
        turn_id=f"T{turns + 1}",
        current_user_message="Cô giải thích lại giúp em hằng đẳng thức với ạ.",
        recent_messages=[
            pb.ConversationMessage(
                message_id=f"M-{turn}-{side}",
                turn_id=f"T{turn}",
                role=pb.MESSAGE_ROLE_USER if side == "q" else pb.MESSAGE_ROLE_ASSISTANT,
                content=f"Lượt {turn}: " + "một câu trả lời khá dài về bình phương " * 3,
            )
            for turn in range(1, turns + 1)
            for side in ("q", "a")
        ],
        conversation_summary="Tóm tắt các lượt trước về hằng đẳng thức.",
        state=pb.ConversationState(agent_state=state),
        retrieved_knowledge=[
            knowledge_pb2.KnowledgeHit(
                node=knowledge_pb2.KnowledgeNode(node_id=f"N-{i}", title="Hằng đẳng thức"),
                score=3.0 - i,
            )
            for i in range(3)
        ],
    )


def test_trimming_drops_whole_turns_oldest_first_until_it_fits() -> None:
    full = bundle(6)
    per_turn = (bundle_tokens(full) - bundle_tokens(bundle(0))) / 6
    budget = bundle_tokens(bundle(0)) + int(per_turn * 2.5)
    trimmed = bundle(6)
    tokens, dropped = trim_to_budget(trimmed, budget)
    assert tokens == bundle_tokens(trimmed) <= budget
    assert dropped == 8  # four turns of two messages
    assert [m.turn_id for m in trimmed.recent_messages] == ["T5", "T5", "T6", "T6"]
    assert len(trimmed.retrieved_knowledge) == 3
    assert trimmed.conversation_summary


def test_under_budget_nothing_is_dropped() -> None:
    trimmed = bundle(3)
    tokens, dropped = trim_to_budget(trimmed, 1_000_000)
    assert (dropped, trimmed) == (0, bundle(3))
    assert tokens == bundle_tokens(bundle(3))


def test_then_knowledge_weakest_first_then_the_summary_never_message_or_state() -> None:
    essentials = bundle(0)
    essentials.ClearField("retrieved_knowledge")
    essentials.conversation_summary = ""
    floor = bundle_tokens(essentials)

    two_hits = bundle(4)
    without_last_hit = bundle(0)
    del without_last_hit.retrieved_knowledge[-1]
    tokens, dropped = trim_to_budget(two_hits, bundle_tokens(without_last_hit))
    assert dropped == 8
    assert [h.node.node_id for h in two_hits.retrieved_knowledge] == ["N-0", "N-1"]
    assert two_hits.conversation_summary

    starved = bundle(4)
    tokens, _ = trim_to_budget(starved, 1)
    assert tokens == floor > 1  # over budget: only the essentials are left
    assert not starved.recent_messages
    assert not starved.retrieved_knowledge
    assert not starved.conversation_summary
    assert starved.current_user_message == bundle(0).current_user_message
    assert starved.state == bundle(0).state


def _short_chat(turns: int, id_length: int = 8) -> pb.ConversationBundle:
    bundle = pb.ConversationBundle(current_user_message="Còn bài này ạ?")
    for turn in range(turns):
        turn_id = f"T{turn}".ljust(id_length, "x")
        for role, content in ((pb.MESSAGE_ROLE_USER, "Vâng ạ."), (pb.MESSAGE_ROLE_ASSISTANT, "Ừ.")):
            bundle.recent_messages.add(
                message_id=f"M{turn}{role}".ljust(id_length, "y"),
                turn_id=turn_id,
                role=role,
                type=pb.MESSAGE_TYPE_TEXT,
                content=content,
            )
    return bundle


def test_what_the_gateway_never_sends_costs_nothing() -> None:
    # Ids, roles and the bundle's bookkeeping are not sent to a model: only the texts.
    short, long = _short_chat(10), _short_chat(10, id_length=120)
    long.learner_ref, long.policy_version = "nemo_" + "f" * 24, "purposes-x" * 10
    assert bundle_tokens(short) == bundle_tokens(long)


def test_a_long_chat_of_short_messages_fits_a_default_budget() -> None:
    # 120 two-word messages are a few hundred tokens as the gateway sends them; counted as JSON
    # records they were over ten thousand, and every message was dropped.
    bundle = _short_chat(60)
    tokens, dropped = trim_to_budget(bundle, 4000)
    assert (dropped, len(bundle.recent_messages)) == (0, 120)
    assert tokens < 1500
