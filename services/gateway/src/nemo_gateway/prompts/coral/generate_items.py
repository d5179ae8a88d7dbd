"""coral.generate_items: practice items for one knowledge node, kept with their answer key and
rubric on the server and in the item bank; the client sees neither.

Every text of an item (stem, choices, answer, rubric) is plain text, as ``outputs.proto`` says
of what a learner is shown: the guardrail refuses markup, links, identifiers and hidden
characters in any of them, before anything is stored. The caller's topic and subject reach the
prompt through the carrier guard, and the baseline quotes the topic only when the guard lets a
learner be shown it."""

from __future__ import annotations

import hashlib
import json

from pydantic import Field

from nemo_gateway.grounding.carriers import guarded
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.common import ANSWER_LANGUAGE, JSON_ONLY, plain_text_problem, quoted
from nemo_gateway.prompts.coral.items import MULTIPLE_CHOICE_OPTIONS, ItemKind
from nemo_gateway.prompts.spec import PromptInput, PromptSpec, Rpc, Strict
from nemo_gateway.providers.base import ChatMessage
from nemo_protos.context.v1 import item_bank_pb2
from nemo_protos.gateway.v1 import outputs_pb2


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


def render(prompt: PromptInput[GenerateItemsVariables]) -> tuple[ChatMessage, ...]:
    v, lang = prompt.variables, prompt.lang
    topic, subject = guarded(v.topic, lang), guarded(v.subject, lang)
    request = {
        Lang.VI: (
            f"Soạn {v.count} câu hỏi loại {v.kind} về chủ đề «{topic}», môn {subject}, "
            f"lớp {v.grade}."
        ),
        Lang.EN: (
            f"Write {v.count} {v.kind} questions on «{topic}», subject {subject}, grade {v.grade}."
        ),
    }[lang]
    system = f"{_GENERATE_SYSTEM[lang]} {ANSWER_LANGUAGE[lang]} {JSON_ONLY[lang]}"
    return (ChatMessage("system", system), ChatMessage("user", request))


def guardrail(draft: DraftItems, prompt: PromptInput[GenerateItemsVariables]) -> str | None:
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
        if problem := _not_plain(number, item):
            return problem
    return None


def _not_plain(number: int, item: DraftItem) -> str | None:
    """Why a text of the item is not plain text, or None."""
    texts = (("stem", item.stem), *(("choice", choice) for choice in item.choices),
             ("answer", item.answer), ("rubric", item.rubric))  # fmt: skip
    for label, text in texts:
        if problem := plain_text_problem(f"item {number}'s {label}", text, ()):
            return problem
    return None


def finish(draft: DraftItems, prompt: PromptInput[GenerateItemsVariables]) -> GeneratedItemsResult:
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
            "Em hãy trình bày bằng lời của mình: {topic} là gì?",
            "Đạt khi nêu đúng ý chính của {topic} bằng lời của học sinh.",
        ),
        (
            "Em hãy nêu một ví dụ về {topic} và giải thích vì sao đó là ví dụ đúng.",
            "Đạt khi ví dụ thuộc {topic} và lời giải thích chỉ ra được lí do.",
        ),
        (
            "Em hãy nêu một lỗi thường gặp khi làm bài về {topic} và cách tránh lỗi đó.",
            "Đạt khi nêu được một lỗi có thật và cách tránh phù hợp.",
        ),
    ),
    Lang.EN: (
        (
            "In your own words, what is {topic}?",
            "Met when the main idea of {topic} is stated correctly in the student's words.",
        ),
        (
            "Give one example of {topic} and explain why it is an example.",
            "Met when the example belongs to {topic} and the explanation gives the reason.",
        ),
        (
            "Name one common mistake in exercises on {topic} and how to avoid it.",
            "Met when a real mistake and a fitting way to avoid it are named.",
        ),
    ),
}


_UNNAMED_TOPIC: dict[Lang, str] = {Lang.VI: "chủ đề này", Lang.EN: "this topic"}
"""What the baseline says in place of a topic the carrier guard does not let it quote."""


def baseline(prompt: PromptInput[GenerateItemsVariables]) -> GeneratedItemsResult:
    v, lang = prompt.variables, prompt.lang
    templates = _BASELINE_ITEMS[lang]
    title = quoted(v.topic, lang)
    topic = f"«{title}»" if title else _UNNAMED_TOPIC[lang]
    count = min(v.count, len(templates))
    items = []
    for position, (stem_template, rubric_template) in enumerate(templates[:count], start=1):
        stem = stem_template.format(topic=topic)
        rubric = rubric_template.format(topic=topic)
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


def client_view(result: GeneratedItemsResult) -> outputs_pb2.GeneratedItems:
    """The client's view: no answer key, no rubric (and no node id, which the caller named)."""
    return outputs_pb2.GeneratedItems(
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


SPEC = PromptSpec(
    prompt_id="coral.generate_items",
    version="3",
    description="Generates practice items for one knowledge node; content only.",
    purpose=None,
    rpc=Rpc.RUN_PROMPT,
    tier="strong",
    max_input_tokens=2000,
    max_output_tokens=2500,
    variables=GenerateItemsVariables,
    model_output=DraftItems,
    output=GeneratedItemsResult,
    render=render,
    guardrail=guardrail,
    finish=finish,
    baseline=baseline,
    output_field="generated_items",
    client_view=client_view,
    bank_items=bank_items,
    declares_language=False,
)
