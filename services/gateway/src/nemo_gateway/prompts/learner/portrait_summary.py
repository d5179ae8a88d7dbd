"""learner.portrait_summary: the learner's long-term strengths and areas to grow."""

from __future__ import annotations

from nemo_gateway.lang import Lang
from nemo_gateway.prompts.common import DISCLAIMER, list_problems, quoted, text_problems
from nemo_gateway.prompts.learner.shared import (
    MAX_POINT_CHARS,
    MAX_POINTS,
    MAX_TEXT_CHARS,
    WEAK_STATES,
    NoVariables,
    context_bundle,
    forbidden_strings,
    messages,
)
from nemo_gateway.prompts.spec import PromptInput, PromptSpec, Rpc, Strict
from nemo_gateway.providers.base import ChatMessage
from nemo_protos.context.v1 import learner_context_pb2 as ctx


class PortraitDraft(Strict):
    """The model's answer for learner.portrait_summary."""

    summary: str
    strengths: tuple[str, ...]
    growth_areas: tuple[str, ...]


class PortraitSummaryResult(Strict):
    """The typed result of learner.portrait_summary."""

    summary: str
    strengths: tuple[str, ...]
    growth_areas: tuple[str, ...]
    disclaimer: str


_PORTRAIT_ROLE: dict[Lang, str] = {
    Lang.VI: (
        "Bạn viết bức chân dung học tập ngắn gọn, khích lệ về xu hướng lâu dài của học sinh: "
        f"điểm mạnh và điều cần củng cố (mỗi danh sách 0 đến {MAX_POINTS} ý). Chỉ dựa vào dữ "
        "liệu đã cho; không nêu điểm số hay phần trăm."
    ),
    Lang.EN: (
        "You write a short, encouraging learning portrait of the student's long-term tendencies: "
        f"strengths and areas to grow (0 to {MAX_POINTS} entries each). Use only the data given; "
        "state no score or percentage."
    ),
}


def render(prompt: PromptInput[NoVariables]) -> tuple[ChatMessage, ...]:
    task = {
        Lang.VI: "Viết chân dung học tập của học sinh.",
        Lang.EN: "Write the student's learning portrait.",
    }[prompt.lang]
    return messages(prompt, _PORTRAIT_ROLE, task)


def guardrail(draft: PortraitDraft, prompt: PromptInput[NoVariables]) -> str | None:
    forbidden = forbidden_strings(prompt)
    return (
        text_problems("summary", draft.summary, max_chars=MAX_TEXT_CHARS, forbidden=forbidden)
        or list_problems(
            "strengths", draft.strengths, min_items=0, max_items=MAX_POINTS,
            max_chars=MAX_POINT_CHARS, forbidden=forbidden,
        )
        or list_problems(
            "growth_areas", draft.growth_areas, min_items=0, max_items=MAX_POINTS,
            max_chars=MAX_POINT_CHARS, forbidden=forbidden,
        )
    )  # fmt: skip


def finish(draft: PortraitDraft, prompt: PromptInput[NoVariables]) -> PortraitSummaryResult:
    return PortraitSummaryResult(
        summary=draft.summary.strip(),
        strengths=tuple(s.strip() for s in draft.strengths),
        growth_areas=tuple(g.strip() for g in draft.growth_areas),
        disclaimer=DISCLAIMER[prompt.lang],
    )


_PORTRAIT_WORDS: dict[Lang, dict[str, str]] = {
    Lang.VI: {
        "summary": "Em đã vững {solid} chủ đề và cần củng cố {weak} chủ đề.",
        "unknown": " Còn {unknown} chủ đề chưa đủ dữ liệu để nhận xét.",
        "empty": "Chưa đủ dữ liệu học tập để mô tả xu hướng của em.",
    },
    Lang.EN: {
        "summary": "You are solid on {solid} topic(s) and have {weak} topic(s) to strengthen.",
        "unknown": " {unknown} topic(s) have too little evidence to say.",
        "empty": "There is not enough learning data yet to describe your tendencies.",
    },
}


def baseline(prompt: PromptInput[NoVariables]) -> PortraitSummaryResult:
    mastery, lang = context_bundle(prompt).mastery, prompt.lang
    words = _PORTRAIT_WORDS[lang]
    # Node titles are outside text: counted, and listed as the carrier guard lets them.
    solid = [quoted(e.node_title, lang) for e in mastery if e.state == ctx.KNOWLEDGE_STATE_SOLID]
    weak = [quoted(e.node_title, lang) for e in mastery if e.state in WEAK_STATES]
    unknown = sum(1 for e in mastery if e.state == ctx.KNOWLEDGE_STATE_UNKNOWN)
    if not mastery:
        summary = words["empty"]
    else:
        summary = words["summary"].format(solid=len(solid), weak=len(weak))
        if unknown:
            summary += words["unknown"].format(unknown=unknown)
    return PortraitSummaryResult(
        summary=summary,
        # The bundle lists mastery weakest first: the strongest strengths come last.
        strengths=tuple(title for title in reversed(solid) if title)[:MAX_POINTS],
        growth_areas=tuple(title for title in weak if title)[:MAX_POINTS],
        disclaimer=DISCLAIMER[prompt.lang],
    )


SPEC = PromptSpec(
    prompt_id="learner.portrait_summary",
    version="3",
    description="Summarises the learner's long-term strengths and areas to grow.",
    purpose="portrait_summary",
    rpc=Rpc.RUN_PROMPT,
    tier="strong",
    max_input_tokens=4000,
    max_output_tokens=800,
    variables=NoVariables,
    model_output=PortraitDraft,
    output=PortraitSummaryResult,
    render=render,
    guardrail=guardrail,
    finish=finish,
    baseline=baseline,
    output_field="portrait_summary",
)
