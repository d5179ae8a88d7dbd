"""Which stored messages are reusable history, and the recent window of turns."""

from __future__ import annotations

from nemo_context.conversation.filtering import (
    group_turns,
    is_reusable,
    recent_window,
    reusable_history,
)
from nemo_context.conversation.messages import StoredMessage
from nemo_protos.context.v1 import conversation_pb2 as pb


def message(
    seq: int,
    turn: str,
    *,
    role: str = "user",
    type_: str = "text",
    status: str = "completed",
    content: str = "",
    tool_summary: str | None = None,
) -> StoredMessage:
    return StoredMessage(f"M-{seq}", turn, seq, role, type_, status, content, tool_summary)


def test_only_completed_content_of_earlier_turns_is_reusable() -> None:
    assert is_reusable(message(1, "T1"), "T2")
    assert is_reusable(message(2, "T1", role="assistant"), "T2")
    assert not is_reusable(message(3, "T2"), "T2")  # the current turn
    for status in ("pending", "failed", "partial", "cancelled"):
        assert not is_reusable(message(4, "T1", role="assistant", status=status), "T2")
        assert not is_reusable(message(5, "T1", status=status), "T2")
    assert not is_reusable(message(6, "T1", role="system", type_="ui_event"), "T2")


def test_tool_results_are_reused_only_through_their_summary() -> None:
    with_summary = message(
        1, "T1", role="tool", type_="tool_result", content='{"rows": 1}', tool_summary="One row."
    )
    assert is_reusable(with_summary, "T2")
    context = with_summary.as_context()
    assert context.content == "One row."
    assert (context.role, context.type) == (pb.MESSAGE_ROLE_TOOL, pb.MESSAGE_TYPE_TOOL_RESULT)
    without_summary = message(2, "T1", role="tool", type_="tool_result", content='{"rows": 1}')
    assert not is_reusable(without_summary, "T2")
    # Text keeps its content.
    assert message(3, "T1", content="Xin chào").as_context().content == "Xin chào"


def test_history_is_ordered_by_sequence_and_grouped_by_turn() -> None:
    stored = [
        message(5, "T3"),
        message(1, "T1"),
        message(4, "T2", role="assistant", status="partial"),
        message(3, "T2"),
        message(2, "T1", role="assistant"),
    ]
    history = reusable_history(stored, "T4")
    assert [m.seq for m in history] == [1, 2, 3, 5]
    turns = group_turns(history)
    assert [(t.turn_id, [m.seq for m in t.messages]) for t in turns] == [
        ("T1", [1, 2]),
        ("T2", [3]),
        ("T3", [5]),
    ]
    assert turns[0].last_seq == 2


def test_turns_without_reusable_messages_do_not_count_towards_the_window() -> None:
    stored = [
        message(1, "T1"),
        message(2, "T2", status="failed"),
        message(3, "T3"),
        message(4, "T4"),
    ]
    older, recent = recent_window(group_turns(reusable_history(stored, "T5")), 2)
    assert [t.turn_id for t in older] == ["T1"]
    assert [t.turn_id for t in recent] == ["T3", "T4"]
    assert recent_window([], 8) == ([], [])
