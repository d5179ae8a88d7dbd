"""learner.plan_explanation: the learner's current plan and next step, in plain words."""

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


def render(prompt: PromptInput[NoVariables]) -> tuple[ChatMessage, ...]:
    task = {
        Lang.VI: "Giải thích kế hoạch học tập hiện tại.",
        Lang.EN: "Explain the current learning plan.",
    }[prompt.lang]
    return messages(prompt, _PLAN_ROLE, task)


def guardrail(draft: PlanDraft, prompt: PromptInput[NoVariables]) -> str | None:
    forbidden = forbidden_strings(prompt)
    return text_problems(
        "explanation", draft.explanation, max_chars=MAX_TEXT_CHARS, forbidden=forbidden
    ) or list_problems(
        "key_points", draft.key_points, min_items=1, max_items=MAX_POINTS,
        max_chars=MAX_POINT_CHARS, forbidden=forbidden,
    )  # fmt: skip


def finish(draft: PlanDraft, prompt: PromptInput[NoVariables]) -> PlanExplanationResult:
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


def baseline(prompt: PromptInput[NoVariables]) -> PlanExplanationResult:
    """The goal and the weakest topics (mastery comes weakest first), which is what the plan
    works on: the plan_explanation purpose carries the goal and mastery, not the plan's steps."""
    bundle, lang = context_bundle(prompt), prompt.lang
    words = _PLAN_WORDS[lang]
    parts: list[str] = []
    # Titles and the goal are outside text: quoted only as the carrier guard lets them.
    weak = [
        title
        for entry in bundle.mastery
        if entry.state in WEAK_STATES and (title := quoted(entry.node_title, lang))
    ]
    goal, target = quoted(bundle.goal.title, lang), quoted(bundle.goal.target, lang)
    if goal:
        parts.append(words["goal"].format(title=goal, target=target or ""))
        if weak:
            parts.append(words["focus"])
    points = [words["weak"].format(node=title) for title in weak]
    explanation = "".join(parts).strip() or words["none"]
    return PlanExplanationResult(
        explanation=explanation,
        key_points=tuple(points[:MAX_POINTS]) or (words["none"],),
        disclaimer=DISCLAIMER[prompt.lang],
    )


SPEC = PromptSpec(
    prompt_id="learner.plan_explanation",
    version="3",
    description="Explains the learner's current plan and next step in plain words.",
    purpose="plan_explanation",
    rpc=Rpc.RUN_PROMPT,
    tier="strong",
    max_input_tokens=4000,
    max_output_tokens=800,
    variables=NoVariables,
    model_output=PlanDraft,
    output=PlanExplanationResult,
    render=render,
    guardrail=guardrail,
    finish=finish,
    baseline=baseline,
    output_field="plan_explanation",
)
