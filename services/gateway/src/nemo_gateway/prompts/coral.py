"""Content-only prompts: generating and reviewing practice items.

These prompts may see no learner data. Their variables name curriculum content only (topic,
subject, grade, item text) and refuse anything else; they have no purpose, so the gateway never
builds a learner context for them and refuses a request that names a learner.

A generated item's answer key and rubric are kept in the typed result on the server, where the
guardrail checks them (a multiple-choice key must be one of the choices), and stored with the
item in the knowledge item bank (through the context service) so answers to it can be graded;
what a client receives has neither, only the item ids.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import Field

from nemo_gateway.prompts.common import ANSWER_LANGUAGE, JSON_ONLY
from nemo_gateway.prompts.spec import Lang, PromptInput, Strict
from nemo_gateway.providers.base import Message
from nemo_protos.context.v1 import item_bank_pb2
from nemo_protos.gateway.v1 import outputs_pb2

ItemKind = Literal["multiple_choice", "short_answer"]
MULTIPLE_CHOICE_OPTIONS = 4

# --- coral.generate_items -----------------------------------------------------------------


class GenerateItemsVariables(Strict):
    """What to generate items about: curriculum content, never a learner."""

    topic: str = Field(min_length=1, max_length=200, description="Knowledge node title.")
    subject: str = Field(min_length=1, max_length=50, description='For example "math".')
    grade: int = Field(ge=1, le=12)
    node_id: str = Field(
        min_length=1,
        max_length=100,
        description="Knowledge node the items practise; they are stored in its item bank.",
    )
    kind: ItemKind = "multiple_choice"
    count: int = Field(3, ge=1, le=10)


class DraftItem(Strict):
    """One item as the model writes it; ids and positions are the server's."""

    kind: ItemKind
    stem: str = Field(min_length=1, max_length=1000)
    choices: tuple[str, ...] = ()
    answer: str = Field(min_length=1, max_length=500)
    rubric: str = Field(min_length=1, max_length=1000)


class DraftItems(Strict):
    """The model's answer for coral.generate_items."""

    items: tuple[DraftItem, ...]


class ServerItem(Strict):
    """A generated item as the server keeps it."""

    item_id: str
    position: int
    kind: ItemKind
    stem: str
    choices: tuple[str, ...]
    answer_key: str | None
    """None for open items that have no single right answer (the baseline's)."""
    rubric: str


class GeneratedItemsResult(Strict):
    """The typed result of coral.generate_items."""

    node_id: str
    items: tuple[ServerItem, ...]


def _item_id(
    node_id: str, kind: str, stem: str, choices: tuple[str, ...], key: str | None, rubric: str
) -> str:
    """A server-assigned id derived from everything the item bank stores for the item: the same
    item generated again gets the same id, and an id never stands for two answer keys."""
    content = [node_id, kind, stem, list(choices), key, rubric]
    digest = hashlib.sha256(json.dumps(content, ensure_ascii=False).encode()).hexdigest()
    return f"gi_{digest[:24]}"


_GENERATE_SYSTEM: dict[Lang, str] = {
    Lang.VI: (
        "Bạn soạn câu hỏi luyện tập cho học sinh phổ thông Việt Nam theo chương trình hiện hành. "
        "Mỗi câu hỏi có một đáp án đúng duy nhất và một hướng dẫn chấm ngắn. Câu trắc nghiệm có "
        f"đúng {MULTIPLE_CHOICE_OPTIONS} lựa chọn khác nhau và đáp án là một trong các lựa chọn; "
        "câu tự luận ngắn không có lựa chọn. Viết công thức LaTeX với dấu gạch chéo ngược nhân "
        "đôi trong JSON (\\\\frac)."
    ),
    Lang.EN: (
        "You write practice questions for Vietnamese school students following the national "
        "curriculum. Each question has exactly one right answer and a short marking rubric. "
        f"Multiple-choice questions have exactly {MULTIPLE_CHOICE_OPTIONS} distinct choices and "
        "the answer is one of them; short-answer questions have no choices. Write LaTeX with "
        "doubled backslashes inside JSON (\\\\frac)."
    ),
}


def render_generate(prompt: PromptInput[GenerateItemsVariables]) -> tuple[Message, ...]:
    v, lang = prompt.variables, prompt.lang
    request = {
        Lang.VI: (
            f"Soạn {v.count} câu hỏi loại {v.kind} về chủ đề «{v.topic}», môn {v.subject}, "
            f"lớp {v.grade}."
        ),
        Lang.EN: (
            f"Write {v.count} {v.kind} questions on «{v.topic}», subject {v.subject}, "
            f"grade {v.grade}."
        ),
    }[lang]
    system = f"{_GENERATE_SYSTEM[lang]} {ANSWER_LANGUAGE[lang]} {JSON_ONLY[lang]}"
    return (Message("system", system), Message("user", request))


def guard_generate(draft: DraftItems, prompt: PromptInput[GenerateItemsVariables]) -> str | None:
    v = prompt.variables
    if len(draft.items) != v.count:
        return f"{len(draft.items)} items instead of {v.count}"
    stems = [item.stem.strip().casefold() for item in draft.items]
    if len(set(stems)) != len(stems):
        return "two items have the same stem"
    for number, item in enumerate(draft.items, start=1):
        if item.kind != v.kind:
            return f"item {number} is {item.kind}, not {v.kind}"
        if item.kind == "multiple_choice":
            choices = [choice.strip() for choice in item.choices]
            if len(choices) != MULTIPLE_CHOICE_OPTIONS or len(set(choices)) != len(choices):
                return f"item {number} needs {MULTIPLE_CHOICE_OPTIONS} distinct choices"
            if item.answer.strip() not in choices:
                return f"item {number}'s answer is not one of its choices"
        elif item.choices:
            return f"item {number} is short-answer but has choices"
    return None


def finish_generate(
    draft: DraftItems, prompt: PromptInput[GenerateItemsVariables]
) -> GeneratedItemsResult:
    node_id = prompt.variables.node_id
    return GeneratedItemsResult(
        node_id=node_id,
        items=tuple(
            ServerItem(
                item_id=_item_id(
                    node_id, item.kind, item.stem, item.choices, item.answer, item.rubric
                ),
                position=position,
                kind=item.kind,
                stem=item.stem,
                choices=item.choices,
                answer_key=item.answer,
                rubric=item.rubric,
            )
            for position, item in enumerate(draft.items, start=1)
        ),
    )


# Open reflection questions are right for any topic, so the baseline needs no model and
# no answer key: they are marked by the rubric.
_BASELINE_ITEMS: dict[Lang, tuple[tuple[str, str], ...]] = {
    Lang.VI: (
        (
            "Em hãy trình bày bằng lời của mình: «{topic}» là gì?",
            "Đạt khi nêu đúng ý chính của «{topic}» bằng lời của học sinh.",
        ),
        (
            "Em hãy nêu một ví dụ về «{topic}» và giải thích vì sao đó là ví dụ đúng.",
            "Đạt khi ví dụ thuộc «{topic}» và lời giải thích chỉ ra được lí do.",
        ),
        (
            "Em hãy nêu một lỗi thường gặp khi làm bài về «{topic}» và cách tránh lỗi đó.",
            "Đạt khi nêu được một lỗi có thật và cách tránh phù hợp.",
        ),
    ),
    Lang.EN: (
        (
            "In your own words, what is «{topic}»?",
            "Met when the main idea of «{topic}» is stated correctly in the student's words.",
        ),
        (
            "Give one example of «{topic}» and explain why it is an example.",
            "Met when the example belongs to «{topic}» and the explanation gives the reason.",
        ),
        (
            "Name one common mistake in exercises on «{topic}» and how to avoid it.",
            "Met when a real mistake and a fitting way to avoid it are named.",
        ),
    ),
}


def baseline_generate(prompt: PromptInput[GenerateItemsVariables]) -> GeneratedItemsResult:
    v = prompt.variables
    templates = _BASELINE_ITEMS[prompt.lang]
    count = min(v.count, len(templates))
    items = []
    for position, (stem_template, rubric_template) in enumerate(templates[:count], start=1):
        stem = stem_template.format(topic=v.topic)
        rubric = rubric_template.format(topic=v.topic)
        items.append(
            ServerItem(
                item_id=_item_id(v.node_id, "short_answer", stem, (), None, rubric),
                position=position,
                kind="short_answer",
                stem=stem,
                choices=(),
                answer_key=None,
                rubric=rubric,
            )
        )
    return GeneratedItemsResult(node_id=v.node_id, items=tuple(items))


def bank_items(result: GeneratedItemsResult) -> tuple[item_bank_pb2.GeneratedItem, ...]:
    """The items as the item bank keeps them: with answer key and rubric."""
    return tuple(
        item_bank_pb2.GeneratedItem(
            item_id=item.item_id,
            node_id=result.node_id,
            kind=item.kind,
            stem=item.stem,
            choices=item.choices,
            answer_key=item.answer_key,
            rubric=item.rubric,
        )
        for item in result.items
    )


def generated_items_proto(result: GeneratedItemsResult) -> outputs_pb2.PromptOutput:
    """The client's view: no answer key, no rubric."""
    return outputs_pb2.PromptOutput(
        generated_items=outputs_pb2.GeneratedItems(
            items=[
                outputs_pb2.GeneratedItem(
                    item_id=item.item_id,
                    position=item.position,
                    kind=item.kind,
                    stem=item.stem,
                    choices=item.choices,
                )
                for item in result.items
            ]
        )
    )


# --- coral.evaluate_item ------------------------------------------------------------------

Verdict = Literal["accept", "revise", "reject"]


class EvaluateItemVariables(Strict):
    """The item to review: its content only."""

    stem: str = Field(min_length=1, max_length=1000)
    kind: ItemKind
    choices: tuple[str, ...] = ()
    answer_key: str = Field("", max_length=500)
    subject: str = Field(min_length=1, max_length=50)
    grade: int = Field(ge=1, le=12)


class ItemReview(Strict):
    """The model's answer for coral.evaluate_item, and the typed result."""

    verdict: Verdict
    issues: tuple[str, ...] = ()
    summary: str = Field(min_length=1, max_length=600)


_EVALUATE_SYSTEM: dict[Lang, str] = {
    Lang.VI: (
        "Bạn thẩm định chất lượng một câu hỏi luyện tập: đúng kiến thức, rõ ràng, hợp lứa tuổi, "
        "đáp án đúng và duy nhất. verdict là accept (dùng được), revise (cần sửa) hoặc reject "
        "(bỏ). Với revise và reject, liệt kê từng vấn đề trong issues; với accept, issues rỗng."
    ),
    Lang.EN: (
        "You review the quality of one practice question: correct content, clear wording, right "
        "for the age, one right answer. verdict is accept (usable), revise (needs changes) or "
        "reject (drop it). For revise and reject, list each problem in issues; for accept, "
        "issues is empty."
    ),
}


def render_evaluate(prompt: PromptInput[EvaluateItemVariables]) -> tuple[Message, ...]:
    v, lang = prompt.variables, prompt.lang
    item = {
        "kind": v.kind,
        "stem": v.stem,
        "choices": list(v.choices),
        "answer_key": v.answer_key,
        "subject": v.subject,
        "grade": v.grade,
    }
    system = f"{_EVALUATE_SYSTEM[lang]} {ANSWER_LANGUAGE[lang]} {JSON_ONLY[lang]}"
    return (
        Message("system", system),
        Message("user", json.dumps(item, ensure_ascii=False)),
    )


def guard_evaluate(review: ItemReview, prompt: PromptInput[EvaluateItemVariables]) -> str | None:
    if review.verdict == "accept" and review.issues:
        return "an accepted item lists issues"
    if review.verdict != "accept" and not review.issues:
        return f"a {review.verdict} verdict lists no issue"
    return None


def finish_evaluate(review: ItemReview, prompt: PromptInput[EvaluateItemVariables]) -> ItemReview:
    return review


_STRUCTURE_ISSUES: dict[Lang, dict[str, str]] = {
    Lang.VI: {
        "choices": f"Câu trắc nghiệm cần đúng {MULTIPLE_CHOICE_OPTIONS} lựa chọn khác nhau.",
        "key_missing": "Chưa có đáp án.",
        "key_not_choice": "Đáp án không nằm trong các lựa chọn.",
        "short_choices": "Câu tự luận ngắn không nên có lựa chọn.",
        "accept": (
            "Kiểm tra tự động về cấu trúc: không phát hiện lỗi; nội dung chưa được thẩm định."
        ),
        "problems": "Kiểm tra tự động về cấu trúc phát hiện {n} vấn đề.",
    },
    Lang.EN: {
        "choices": f"A multiple-choice item needs {MULTIPLE_CHOICE_OPTIONS} distinct choices.",
        "key_missing": "The answer key is missing.",
        "key_not_choice": "The answer key is not one of the choices.",
        "short_choices": "A short-answer item should have no choices.",
        "accept": "Automatic structure check: no problem found; the content was not reviewed.",
        "problems": "Automatic structure check found {n} problem(s).",
    },
}


def baseline_evaluate(prompt: PromptInput[EvaluateItemVariables]) -> ItemReview:
    """A structure check any item can get without a model."""
    v, words = prompt.variables, _STRUCTURE_ISSUES[prompt.lang]
    issues: list[str] = []
    choices = [choice.strip() for choice in v.choices]
    if v.kind == "multiple_choice":
        if len(choices) != MULTIPLE_CHOICE_OPTIONS or len(set(choices)) != len(choices):
            issues.append(words["choices"])
        if not v.answer_key.strip():
            issues.append(words["key_missing"])
        elif v.answer_key.strip() not in choices:
            issues.append(words["key_not_choice"])
    elif choices:
        issues.append(words["short_choices"])
    if not issues:
        return ItemReview(verdict="accept", issues=(), summary=words["accept"])
    verdict: Verdict = "reject" if words["key_not_choice"] in issues else "revise"
    return ItemReview(
        verdict=verdict, issues=tuple(issues), summary=words["problems"].format(n=len(issues))
    )


def item_review_proto(review: ItemReview) -> outputs_pb2.PromptOutput:
    return outputs_pb2.PromptOutput(
        item_evaluation=outputs_pb2.ItemEvaluation(
            verdict=review.verdict, issues=review.issues, summary=review.summary
        )
    )
