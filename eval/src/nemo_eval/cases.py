"""The fixed input set: what every prompt is run on, the same on every evaluation.

Learner prompts run for the demo learners of the seed; ``knowledge.answer`` runs over questions
labelled covered (the seed's knowledge answers them) or not covered; the tutoring chat runs
turns on the seed's chat sessions (its conversation summary runs alongside when the stored one
is stale). Nothing here is derived from the prompts or their baselines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: A fixed evaluation time, so two evaluations render the same prompts.
EVALUATED_AT_SECONDS = 1_768_464_000  # 2026-01-15T08:00:00Z


@dataclass(frozen=True)
class Case:
    """One run: a prompt and its input."""

    prompt_id: str
    label: str
    """Names the input in the report."""
    learner_id: str = ""
    variables: dict[str, Any] = field(default_factory=dict)
    covered: bool | None = None
    """For knowledge.answer: whether the seeded knowledge answers the question."""
    session_id: str = ""
    message: str = ""
    """For tutor.chat_reply: the learner's message on ``session_id``."""


CONTENT = (
    Case(
        "coral.generate_items",
        "identities g8",
        variables={
            "topic": "Hằng đẳng thức",
            "subject": "math",
            "grade": 8,
            "node_id": "math-08-algebraic-identities",
            "count": 2,
        },
    ),
    Case(
        "coral.generate_items",
        "fractions g5",
        variables={
            "topic": "Phân số",
            "subject": "math",
            "grade": 5,
            "node_id": "math-05-fractions",
            "count": 2,
        },
    ),
    Case(
        "coral.evaluate_item",
        "square of a sum",
        variables={"stem": "Tính (x + 1)².", "kind": "short_answer", "subject": "math", "grade": 8},
    ),
    Case(
        "coral.evaluate_item",
        "gcd",
        variables={
            "stem": "Tìm ƯCLN(12, 18).",
            "kind": "short_answer",
            "subject": "math",
            "grade": 6,
        },
    ),
)

#: Demo learners and a node each one is working on.
LEARNERS = (
    ("L-2041-1", "math-08-algebraic-identities"),
    ("L-2041-2", "math-06-integers"),
    ("L-2041-3", "math-05-fractions"),
)

LEARNER = tuple(
    Case("learner.tutor_hint", learner, learner_id=learner, variables={"node_id": node})
    for learner, node in LEARNERS
) + tuple(
    Case(prompt_id, learner, learner_id=learner)
    for prompt_id in ("learner.plan_explanation", "learner.portrait_summary")
    for learner, _ in LEARNERS
)

QUESTIONS = (
    ("Hằng đẳng thức (a + b)² bằng gì?", True),
    ("Phân số là gì?", True),
    ("Định lí Pythagore nói gì về tam giác vuông?", True),
    ("Thủ đô của nước Pháp là gì?", False),
    ("Cách nấu phở bò như thế nào?", False),
    ("Luật việt vị trong bóng đá là gì?", False),
)

ANSWERS = tuple(
    Case("knowledge.answer", question, variables={"question": question}, covered=covered)
    for question, covered in QUESTIONS
)

CHAT = (
    Case(
        "tutor.chat_reply",
        "CS-L1-TUTOR",
        session_id="CS-L1-TUTOR",
        message="Em vẫn chưa hiểu (a - b)² ạ, thầy giải thích lại được không?",
    ),
    Case(
        "tutor.chat_reply",
        "CS-L2-TUTOR",
        session_id="CS-L2-TUTOR",
        message="Số nguyên âm cộng số nguyên âm thì ra gì ạ?",
    ),
)

CASES: tuple[Case, ...] = CONTENT + LEARNER + ANSWERS + CHAT
