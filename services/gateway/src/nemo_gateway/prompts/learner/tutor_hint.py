"""learner.tutor_hint: a short hint for the node the learner is stuck on, from their context."""

from __future__ import annotations

from pydantic import Field

from nemo_gateway.grounding.carriers import guarded
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.common import DISCLAIMER, quoted, text_problems
from nemo_gateway.prompts.learner.shared import (
    MAX_TEXT_CHARS,
    context_bundle,
    forbidden_strings,
    messages,
)
from nemo_gateway.prompts.spec import PromptInput, PromptSpec, Rpc, Strict
from nemo_gateway.providers.base import ChatMessage
from nemo_protos.context.v1 import learner_context_pb2 as ctx


class TutorHintVariables(Strict):
    """What the learner is stuck on: item content, never who the learner is."""

    node_id: str = Field(
        "", max_length=100, description="Knowledge node; empty: the weakest node of the bundle."
    )
    question: str = Field("", max_length=1000, description="The practice question, if any.")


class HintDraft(Strict):
    """The model's answer for learner.tutor_hint."""

    hint: str


class TutorHintResult(Strict):
    """The typed result of learner.tutor_hint."""

    hint: str
    focus_node_id: str
    disclaimer: str


def _focus(prompt: PromptInput[TutorHintVariables]) -> ctx.MasteryEntry | None:
    """The bundle's mastery entry of the requested node, or the weakest one."""
    mastery = context_bundle(prompt).mastery
    wanted = prompt.variables.node_id
    if wanted:
        return next((entry for entry in mastery if entry.node_id == wanted), None)
    return mastery[0] if mastery else None


def _focus_node_id(prompt: PromptInput[TutorHintVariables]) -> str:
    entry = _focus(prompt)
    return prompt.variables.node_id or (entry.node_id if entry else "")


_HINT_ROLE: dict[Lang, str] = {
    Lang.VI: (
        "Bạn là gia sư kiên nhẫn. Viết một gợi ý ngắn (tối đa ba câu) giúp học sinh tự tìm ra "
        "bước tiếp theo; không giải hộ, không nêu đáp án, không nêu điểm số hay phần trăm."
    ),
    Lang.EN: (
        "You are a patient tutor. Write one short hint (at most three sentences) that helps the "
        "student find the next step; do not solve it, do not give the answer, state no score "
        "or percentage."
    ),
}


def render(prompt: PromptInput[TutorHintVariables]) -> tuple[ChatMessage, ...]:
    v, entry, lang = prompt.variables, _focus(prompt), prompt.lang
    # The title and the caller's question are outside text: through the carrier guard.
    title = guarded(entry.node_title if entry else v.node_id, lang)
    task = {
        Lang.VI: f"Chủ đề cần gợi ý: «{title}».",
        Lang.EN: f"Topic of the hint: «{title}».",
    }[lang]
    if v.question:
        task += {Lang.VI: " Câu hỏi: ", Lang.EN: " Question: "}[lang] + guarded(v.question, lang)
    return messages(prompt, _HINT_ROLE, task)


def guardrail(draft: HintDraft, prompt: PromptInput[TutorHintVariables]) -> str | None:
    return text_problems(
        "hint", draft.hint, max_chars=MAX_TEXT_CHARS, forbidden=forbidden_strings(prompt)
    )


def finish(draft: HintDraft, prompt: PromptInput[TutorHintVariables]) -> TutorHintResult:
    return TutorHintResult(
        hint=draft.hint.strip(),
        focus_node_id=_focus_node_id(prompt),
        disclaimer=DISCLAIMER[prompt.lang],
    )


_HINT_BY_STATE: dict[Lang, dict[int, str]] = {
    Lang.VI: {
        ctx.KNOWLEDGE_STATE_GAP: (
            "Hãy bắt đầu lại với «{title}» từ một ví dụ thật đơn giản, rồi làm từng bước nhỏ và "
            "kiểm tra lại sau mỗi bước."
        ),
        ctx.KNOWLEDGE_STATE_SHAKY: (
            "Em đã nắm được một phần «{title}». Hãy đọc lại từng bước lời giải và tìm bước em "
            "hay nhầm nhất."
        ),
        ctx.KNOWLEDGE_STATE_SOLID: (
            "Em làm tốt «{title}» rồi. Hãy thử giải thích lại cách làm bằng lời của mình, rồi "
            "thử một bài khó hơn."
        ),
    },
    Lang.EN: {
        ctx.KNOWLEDGE_STATE_GAP: (
            "Start «{title}» again from a very simple example, then work in small steps and "
            "check each one."
        ),
        ctx.KNOWLEDGE_STATE_SHAKY: (
            "You already know part of «{title}». Reread the solution step by step and find the "
            "step you most often get wrong."
        ),
        ctx.KNOWLEDGE_STATE_SOLID: (
            "You are doing well on «{title}». Explain the method in your own words, then try a "
            "harder exercise."
        ),
    },
}
_HINT_UNKNOWN: dict[Lang, str] = {
    Lang.VI: (
        "Hãy thử một bài ngắn về «{title}» để biết em đang vướng ở đâu, rồi đọc lại phần lí "
        "thuyết liên quan."
    ),
    Lang.EN: (
        "Try a short exercise on «{title}» to see where you get stuck, then reread the related "
        "theory."
    ),
}
_HINT_NO_TOPIC: dict[Lang, str] = {
    Lang.VI: "Hãy đọc kĩ đề bài, gạch chân dữ kiện đã cho và điều cần tìm, rồi làm từng bước nhỏ.",
    Lang.EN: (
        "Read the question carefully, underline what is given and what is asked, then work in "
        "small steps."
    ),
}


def baseline(prompt: PromptInput[TutorHintVariables]) -> TutorHintResult:
    entry, lang = _focus(prompt), prompt.lang
    topic = entry.node_title if entry and entry.node_title else prompt.variables.node_id
    title = quoted(topic, lang) if topic else None
    if not title:
        hint = _HINT_NO_TOPIC[lang]
    else:
        state = entry.state if entry else ctx.KNOWLEDGE_STATE_UNSPECIFIED
        hint = _HINT_BY_STATE[lang].get(state, _HINT_UNKNOWN[lang]).format(title=title)
    return TutorHintResult(
        hint=hint, focus_node_id=_focus_node_id(prompt), disclaimer=DISCLAIMER[lang]
    )


SPEC = PromptSpec(
    prompt_id="learner.tutor_hint",
    version="3",
    description="A short hint for the node the learner is stuck on, from their context.",
    purpose="tutor_hint",
    rpc=Rpc.RUN_PROMPT,
    tier="fast",
    max_input_tokens=3000,
    max_output_tokens=400,
    variables=TutorHintVariables,
    model_output=HintDraft,
    output=TutorHintResult,
    render=render,
    guardrail=guardrail,
    finish=finish,
    baseline=baseline,
    output_field="tutor_hint",
)
