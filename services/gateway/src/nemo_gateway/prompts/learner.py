"""Learner prompts: a hint, a plan explanation and a portrait summary.

Each runs on the bundle the context service builds for its purpose: the bundle's rendered text
(pseudonymous, gated) goes into the prompt, and the baselines read the bundle's typed fields.
Mastery, confidence, states and the plan's order are the server's: the model only writes words
around them, and a text that states a score is rejected.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from nemo_gateway.prompts.common import (
    ANSWER_LANGUAGE,
    CONTEXT_IS_DATA,
    DISCLAIMER,
    JSON_ONLY,
    list_problems,
    text_problems,
)
from nemo_gateway.prompts.spec import Lang, PromptInput, Strict
from nemo_gateway.prompts.tags import CONTEXT_TAG, neutralise_tags, tagged
from nemo_gateway.providers.base import Message
from nemo_protos.context.v1 import learner_context_pb2 as ctx
from nemo_protos.gateway.v1 import outputs_pb2

MAX_TEXT_CHARS = 800
MAX_POINT_CHARS = 200
MAX_POINTS = 5


def _bundle(prompt: PromptInput[Any]) -> ctx.ContextBundle:
    if prompt.context is None:
        raise ValueError("a learner prompt runs on a context bundle")
    return prompt.context


def _messages(prompt: PromptInput[Any], role: dict[Lang, str], task: str) -> tuple[Message, ...]:
    lang = prompt.lang
    system = " ".join((role[lang], CONTEXT_IS_DATA[lang], ANSWER_LANGUAGE[lang], JSON_ONLY[lang]))
    # The task holds the caller's question and topic titles: kept from posing as a data tag.
    user = f"{tagged(CONTEXT_TAG[lang], _bundle(prompt).rendered_text)}\n\n{neutralise_tags(task)}"
    return (Message("system", system), Message("user", user))


def _forbidden(prompt: PromptInput[Any]) -> tuple[str, ...]:
    return (_bundle(prompt).learner_ref,)


# --- learner.tutor_hint -------------------------------------------------------------------


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
    mastery = _bundle(prompt).mastery
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


def render_hint(prompt: PromptInput[TutorHintVariables]) -> tuple[Message, ...]:
    v, entry = prompt.variables, _focus(prompt)
    title = entry.node_title if entry else v.node_id
    task = {
        Lang.VI: f"Chủ đề cần gợi ý: «{title}».",
        Lang.EN: f"Topic of the hint: «{title}».",
    }[prompt.lang]
    if v.question:
        task += {Lang.VI: " Câu hỏi: ", Lang.EN: " Question: "}[prompt.lang] + v.question
    return _messages(prompt, _HINT_ROLE, task)


def guard_hint(draft: HintDraft, prompt: PromptInput[TutorHintVariables]) -> str | None:
    return text_problems("hint", draft.hint, max_chars=MAX_TEXT_CHARS, forbidden=_forbidden(prompt))


def finish_hint(draft: HintDraft, prompt: PromptInput[TutorHintVariables]) -> TutorHintResult:
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


def baseline_hint(prompt: PromptInput[TutorHintVariables]) -> TutorHintResult:
    entry, lang = _focus(prompt), prompt.lang
    title = entry.node_title if entry and entry.node_title else prompt.variables.node_id
    if not title:
        hint = _HINT_NO_TOPIC[lang]
    else:
        state = entry.state if entry else ctx.KNOWLEDGE_STATE_UNSPECIFIED
        hint = _HINT_BY_STATE[lang].get(state, _HINT_UNKNOWN[lang]).format(title=title)
    return TutorHintResult(
        hint=hint, focus_node_id=_focus_node_id(prompt), disclaimer=DISCLAIMER[lang]
    )


def tutor_hint_proto(result: TutorHintResult) -> outputs_pb2.PromptOutput:
    return outputs_pb2.PromptOutput(
        tutor_hint=outputs_pb2.TutorHint(
            hint=result.hint, focus_node_id=result.focus_node_id, disclaimer=result.disclaimer
        )
    )


# --- learner.plan_explanation -------------------------------------------------------------


class NoVariables(Strict):
    """The prompt takes no variables: everything comes from the learner's bundle."""


class PlanDraft(Strict):
    """The model's answer for learner.plan_explanation."""

    explanation: str
    key_points: tuple[str, ...]


class PlanExplanationResult(Strict):
    """The typed result of learner.plan_explanation."""

    explanation: str
    key_points: tuple[str, ...]
    disclaimer: str


_PLAN_ROLE: dict[Lang, str] = {
    Lang.VI: (
        "Bạn giải thích kế hoạch học tập hiện tại cho học sinh và phụ huynh: vì sao các bước có "
        "thứ tự này và bước tiếp theo là gì. Giữ nguyên thứ tự các bước của kế hoạch; không nêu "
        f"điểm số hay phần trăm. key_points có 1 đến {MAX_POINTS} ý ngắn."
    ),
    Lang.EN: (
        "You explain the current learning plan to the student and parents: why the steps come "
        "in this order and what comes next. Keep the plan's order of steps; state no score or "
        f"percentage. key_points has 1 to {MAX_POINTS} short points."
    ),
}


def render_plan(prompt: PromptInput[NoVariables]) -> tuple[Message, ...]:
    task = {
        Lang.VI: "Giải thích kế hoạch học tập hiện tại.",
        Lang.EN: "Explain the current learning plan.",
    }[prompt.lang]
    return _messages(prompt, _PLAN_ROLE, task)


def guard_plan(draft: PlanDraft, prompt: PromptInput[NoVariables]) -> str | None:
    forbidden = _forbidden(prompt)
    return text_problems(
        "explanation", draft.explanation, max_chars=MAX_TEXT_CHARS, forbidden=forbidden
    ) or list_problems(
        "key_points", draft.key_points, min_items=1, max_items=MAX_POINTS,
        max_chars=MAX_POINT_CHARS, forbidden=forbidden,
    )  # fmt: skip


def finish_plan(draft: PlanDraft, prompt: PromptInput[NoVariables]) -> PlanExplanationResult:
    return PlanExplanationResult(
        explanation=draft.explanation.strip(),
        key_points=tuple(point.strip() for point in draft.key_points),
        disclaimer=DISCLAIMER[prompt.lang],
    )


_PLAN_WORDS: dict[Lang, dict[str, str]] = {
    Lang.VI: {
        "goal": "Mục tiêu hiện tại: «{title}» ({target}).",
        "focus": " Để tiến tới mục tiêu, kế hoạch ưu tiên củng cố các chủ đề còn yếu trước.",
        "none": "Hiện chưa có kế hoạch học tập.",
        "weak": "Củng cố «{node}»",
    },
    Lang.EN: {
        "goal": "Current goal: «{title}» ({target}).",
        "focus": " To reach it, the plan strengthens the weakest topics first.",
        "none": "There is no learning plan yet.",
        "weak": "Strengthen «{node}»",
    },
}
_WEAK_STATES = (ctx.KNOWLEDGE_STATE_GAP, ctx.KNOWLEDGE_STATE_SHAKY)


def baseline_plan(prompt: PromptInput[NoVariables]) -> PlanExplanationResult:
    """The goal and the weakest topics (mastery comes weakest first), which is what the plan
    works on: the plan_explanation purpose carries the goal and mastery, not the plan's steps."""
    bundle, words = _bundle(prompt), _PLAN_WORDS[prompt.lang]
    parts: list[str] = []
    weak = [entry.node_title for entry in bundle.mastery if entry.state in _WEAK_STATES]
    if bundle.goal.title:
        parts.append(words["goal"].format(title=bundle.goal.title, target=bundle.goal.target))
        if weak:
            parts.append(words["focus"])
    points = [words["weak"].format(node=title) for title in weak]
    explanation = "".join(parts).strip() or words["none"]
    return PlanExplanationResult(
        explanation=explanation,
        key_points=tuple(points[:MAX_POINTS]) or (words["none"],),
        disclaimer=DISCLAIMER[prompt.lang],
    )


def plan_explanation_proto(result: PlanExplanationResult) -> outputs_pb2.PromptOutput:
    return outputs_pb2.PromptOutput(
        plan_explanation=outputs_pb2.PlanExplanation(
            explanation=result.explanation,
            key_points=result.key_points,
            disclaimer=result.disclaimer,
        )
    )


# --- learner.portrait_summary -------------------------------------------------------------


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


def render_portrait(prompt: PromptInput[NoVariables]) -> tuple[Message, ...]:
    task = {
        Lang.VI: "Viết chân dung học tập của học sinh.",
        Lang.EN: "Write the student's learning portrait.",
    }[prompt.lang]
    return _messages(prompt, _PORTRAIT_ROLE, task)


def guard_portrait(draft: PortraitDraft, prompt: PromptInput[NoVariables]) -> str | None:
    forbidden = _forbidden(prompt)
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


def finish_portrait(
    draft: PortraitDraft, prompt: PromptInput[NoVariables]
) -> PortraitSummaryResult:
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


def baseline_portrait(prompt: PromptInput[NoVariables]) -> PortraitSummaryResult:
    mastery, words = _bundle(prompt).mastery, _PORTRAIT_WORDS[prompt.lang]
    solid = [e.node_title for e in mastery if e.state == ctx.KNOWLEDGE_STATE_SOLID]
    weak = [
        e.node_title
        for e in mastery
        if e.state in (ctx.KNOWLEDGE_STATE_GAP, ctx.KNOWLEDGE_STATE_SHAKY)
    ]
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
        strengths=tuple(reversed(solid))[:MAX_POINTS],
        growth_areas=tuple(weak[:MAX_POINTS]),
        disclaimer=DISCLAIMER[prompt.lang],
    )


def portrait_summary_proto(result: PortraitSummaryResult) -> outputs_pb2.PromptOutput:
    return outputs_pb2.PromptOutput(
        portrait_summary=outputs_pb2.PortraitSummary(
            summary=result.summary,
            strengths=result.strengths,
            growth_areas=result.growth_areas,
            disclaimer=result.disclaimer,
        )
    )
