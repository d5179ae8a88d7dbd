"""Tutoring chat sessions with every message status, tool results, UI events and a summary.

Session CS-L1-TUTOR (L-2041-1) runs five turns:

- T1, T2: completed exchanges (T2 has a tool result, a failed assistant attempt and a retry);
  the stored summary (version 1) covers them.
- T3: the assistant reply was cut mid-stream and stored as partial.
- T4: the learner stopped the reply: cancelled.
- T5: the current turn, a pending user message, preceded by a UI event.
"""

from __future__ import annotations

import json

from nemo_ops.seed_data.base import TableData, at

SESSIONS = TableData(
    "learning.chat_sessions",
    ("id",),
    (
        {
            "id": "CS-L1-TUTOR",
            "learner_id": "L-2041-1",
            "user_id": "U-2041-L1",
            "status": "active",
            "created_at": at(minutes=-40),
            "updated_at": at(minutes=-1),
        },
        {
            "id": "CS-L1-EARLIER",
            "learner_id": "L-2041-1",
            "user_id": "U-2041-L1",
            "status": "closed",
            "created_at": at(days=-6),
            "updated_at": at(days=-6, minutes=12),
        },
        {
            "id": "CS-L2-TUTOR",
            "learner_id": "L-2041-2",
            "user_id": "U-2041-P2",
            "status": "active",
            "created_at": at(days=-1),
            "updated_at": at(days=-1, minutes=5),
        },
    ),
)

_SEARCH_RESULT = json.dumps(
    {
        "nodes": [
            {
                "id": "math-08-algebraic-identities",
                "title": "Hằng đẳng thức",
                "grade": 8,
                "items": ["I-ID-01", "I-ID-02"],
            }
        ]
    },
    ensure_ascii=False,
)

# The table below is laid out as a table; the formatter would put every field on its own line.
# fmt: off

# (id, session, learner, turn, seq, role, type, status, content, tool_summary, minutes ago)
_MESSAGES: tuple[tuple[str, str, str, str, int, str, str, str, str, str | None, float], ...] = (
    ("M-1", "CS-L1-TUTOR", "L-2041-1", "T1", 1, "user", "text", "completed",
     "Em chưa hiểu hằng đẳng thức (a + b)² ạ.", None, 40),
    ("M-2", "CS-L1-TUTOR", "L-2041-1", "T1", 2, "system", "ui_event", "completed",
     '{"event": "phase_changed", "phase": "explaining"}', None, 40),
    ("M-3", "CS-L1-TUTOR", "L-2041-1", "T1", 3, "assistant", "text", "completed",
     "(a + b)² = a² + 2ab + b². Hãy nghĩ đến diện tích hình vuông cạnh a + b: nó gồm hình vuông "
     "a², hình vuông b² và hai hình chữ nhật ab.", None, 39),
    ("M-4", "CS-L1-TUTOR", "L-2041-1", "T2", 4, "user", "text", "completed",
     "Vậy (x + 3)² bằng bao nhiêu ạ?", None, 35),
    ("M-5", "CS-L1-TUTOR", "L-2041-1", "T2", 5, "tool", "tool_result", "completed",
     _SEARCH_RESULT, "Tìm thấy nút Hằng đẳng thức (lớp 8) và hai bài luyện tập liên quan.", 35),
    ("M-6", "CS-L1-TUTOR", "L-2041-1", "T2", 6, "assistant", "text", "failed",
     "", None, 35),
    ("M-7", "CS-L1-TUTOR", "L-2041-1", "T2", 7, "assistant", "text", "completed",
     "Áp dụng với a = x và b = 3: (x + 3)² = x² + 6x + 9. Em thử tự khai triển (x + 5)² nhé.",
     None, 34),
    ("M-8", "CS-L1-TUTOR", "L-2041-1", "T3", 8, "user", "text", "completed",
     "Còn (2x - 1)² thì sao ạ?", None, 20),
    ("M-9", "CS-L1-TUTOR", "L-2041-1", "T3", 9, "assistant", "text", "partial",
     "Với bình phương của một hiệu, ta có (a - b)² = a² - 2ab + b². Ở đây a = 2x nên", None, 20),
    ("M-10", "CS-L1-TUTOR", "L-2041-1", "T4", 10, "user", "text", "completed",
     "Em làm ra 4x² - 1 có đúng không ạ?", None, 10),
    ("M-11", "CS-L1-TUTOR", "L-2041-1", "T4", 11, "assistant", "text", "cancelled",
     "Chưa đúng rồi. Em", None, 10),
    ("M-12", "CS-L1-TUTOR", "L-2041-1", "T5", 12, "system", "ui_event", "completed",
     '{"event": "typing", "actor": "user"}', None, 1),
    ("M-13", "CS-L1-TUTOR", "L-2041-1", "T5", 13, "user", "text", "pending",
     "Em quên mất hạng tử ở giữa, cô giải thích lại giúp em với.", None, 1),
    ("M-20", "CS-L1-EARLIER", "L-2041-1", "T1", 1, "user", "text", "completed",
     "Hệ số góc của y = -2x + 5 là 5 phải không ạ?", None, 6 * 24 * 60),
    ("M-21", "CS-L1-EARLIER", "L-2041-1", "T1", 2, "assistant", "text", "completed",
     "Chưa đúng: hệ số góc là số nhân với x, tức là -2; còn 5 là tung độ gốc.", None,
     6 * 24 * 60 - 1),
    ("M-30", "CS-L2-TUTOR", "L-2041-2", "T1", 1, "user", "text", "completed",
     "Vì sao âm nhân âm lại ra dương ạ?", None, 24 * 60),
    ("M-31", "CS-L2-TUTOR", "L-2041-2", "T1", 2, "assistant", "text", "completed",
     "Nhân với một số âm là đổi hướng trên trục số; đổi hướng hai lần thì quay về hướng cũ.",
     None, 24 * 60 - 1),
)

# fmt: on

MESSAGES = TableData(
    "learning.chat_messages",
    ("id",),
    tuple(
        {
            "id": message_id,
            "session_id": session_id,
            "learner_id": learner_id,
            "turn_id": turn_id,
            "seq": seq,
            "role": role,
            "type": message_type,
            "status": status,
            "content": content,
            "tool_summary": tool_summary,
            "created_at": at(minutes=-minutes_ago),
        }
        for (
            message_id,
            session_id,
            learner_id,
            turn_id,
            seq,
            role,
            message_type,
            status,
            content,
            tool_summary,
            minutes_ago,
        ) in _MESSAGES
    ),
)

STATES = TableData(
    "learning.conversation_state",
    ("session_id",),
    (
        {
            "session_id": "CS-L1-TUTOR",
            "learner_id": "L-2041-1",
            "extracted_info": {
                "topic_node_id": "math-08-algebraic-identities",
                "difficulty": "khai triển bình phương của một hiệu",
                "misconceptions": ["bỏ sót hạng tử 2ab"],
            },
            "agent_state": {"phase": "practice", "hint_level": 2, "pending_exercise": "(x + 5)²"},
            "updated_at": at(minutes=-10),
        },
        {
            "session_id": "CS-L2-TUTOR",
            "learner_id": "L-2041-2",
            "extracted_info": {"topic_node_id": "math-06-integers"},
            "agent_state": {"phase": "explaining", "hint_level": 1},
            "updated_at": at(days=-1, minutes=5),
        },
    ),
)

SUMMARIES = TableData(
    "learning.conversation_summaries",
    ("session_id", "version"),
    (
        {
            "session_id": "CS-L1-TUTOR",
            "learner_id": "L-2041-1",
            "version": 1,
            "summary": (
                "Học sinh hỏi về hằng đẳng thức bình phương của một tổng; đã được giải thích "
                "bằng hình vuông cạnh a + b và làm đúng ví dụ (x + 3)². Bài tiếp theo: (x + 5)²."
            ),
            "covers_through_seq": 7,
            "covered_turns": 2,
            "created_at": at(minutes=-33),
        },
        {
            "session_id": "CS-L2-TUTOR",
            "learner_id": "L-2041-2",
            "version": 1,
            "summary": "Học sinh hỏi vì sao tích hai số âm là số dương; đã giải thích qua trục số.",
            "covers_through_seq": 2,
            "covered_turns": 1,
            "created_at": at(days=-1, minutes=4),
        },
    ),
)

TABLES = (SESSIONS, MESSAGES, STATES, SUMMARIES)
