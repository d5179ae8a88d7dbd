"""The prompt registry: every prompt the gateway runs, in one table. Code is the source of truth.

Each row names the prompt's id and version, the context purpose it builds learner context with
(None: content-only, no learner data may reach it), the RPC that serves it, the model tier, token
limits, input and output models, guardrail and deterministic baseline. Temperature is 0 for all.
Bump ``version`` whenever the wording, models or rules of a prompt change: cached results are
keyed by it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nemo_gateway.prompts import coral, knowledge, learner, tutor
from nemo_gateway.prompts.spec import PromptSpec, Rpc

AnySpec = PromptSpec[Any, Any, Any]

PROMPTS: tuple[AnySpec, ...] = (
    PromptSpec(
        prompt_id="coral.generate_items",
        version="2",
        description="Generates practice items for one knowledge node; content only.",
        purpose=None,
        rpc=Rpc.RUN_PROMPT,
        tier="strong",
        max_input_tokens=2000,
        max_output_tokens=2500,
        variables=coral.GenerateItemsVariables,
        model_output=coral.DraftItems,
        output=coral.GeneratedItemsResult,
        render=coral.render_generate,
        guardrail=coral.guard_generate,
        finish=coral.finish_generate,
        baseline=coral.baseline_generate,
        to_proto=coral.generated_items_proto,
        bank_items=coral.bank_items,
    ),
    PromptSpec(
        prompt_id="coral.evaluate_item",
        version="1",
        description="Reviews the quality of one practice item; content only.",
        purpose=None,
        rpc=Rpc.RUN_PROMPT,
        tier="fast",
        max_input_tokens=2000,
        max_output_tokens=800,
        variables=coral.EvaluateItemVariables,
        model_output=coral.ItemReview,
        output=coral.ItemReview,
        render=coral.render_evaluate,
        guardrail=coral.guard_evaluate,
        finish=coral.finish_evaluate,
        baseline=coral.baseline_evaluate,
        to_proto=coral.item_review_proto,
    ),
    PromptSpec(
        prompt_id="learner.tutor_hint",
        version="1",
        description="A short hint for the node the learner is stuck on, from their context.",
        purpose="tutor_hint",
        rpc=Rpc.RUN_PROMPT,
        tier="fast",
        max_input_tokens=3000,
        max_output_tokens=400,
        variables=learner.TutorHintVariables,
        model_output=learner.HintDraft,
        output=learner.TutorHintResult,
        render=learner.render_hint,
        guardrail=learner.guard_hint,
        finish=learner.finish_hint,
        baseline=learner.baseline_hint,
        to_proto=learner.tutor_hint_proto,
    ),
    PromptSpec(
        prompt_id="learner.plan_explanation",
        version="1",
        description="Explains the learner's current plan and next step in plain words.",
        purpose="plan_explanation",
        rpc=Rpc.RUN_PROMPT,
        tier="strong",
        max_input_tokens=4000,
        max_output_tokens=800,
        variables=learner.NoVariables,
        model_output=learner.PlanDraft,
        output=learner.PlanExplanationResult,
        render=learner.render_plan,
        guardrail=learner.guard_plan,
        finish=learner.finish_plan,
        baseline=learner.baseline_plan,
        to_proto=learner.plan_explanation_proto,
    ),
    PromptSpec(
        prompt_id="learner.portrait_summary",
        version="1",
        description="Summarises the learner's long-term strengths and areas to grow.",
        purpose="portrait_summary",
        rpc=Rpc.RUN_PROMPT,
        tier="strong",
        max_input_tokens=4000,
        max_output_tokens=800,
        variables=learner.NoVariables,
        model_output=learner.PortraitDraft,
        output=learner.PortraitSummaryResult,
        render=learner.render_portrait,
        guardrail=learner.guard_portrait,
        finish=learner.finish_portrait,
        baseline=learner.baseline_portrait,
        to_proto=learner.portrait_summary_proto,
    ),
    PromptSpec(
        prompt_id="knowledge.answer",
        version="2",
        description="Answers a question from numbered knowledge passages, with checked "
        "citations, or says the documents do not cover it.",
        purpose=None,
        rpc=Rpc.ANSWER,
        tier="strong",
        max_input_tokens=6000,
        max_output_tokens=1000,
        variables=knowledge.AnswerVariables,
        model_output=knowledge.AnswerDraft,
        output=knowledge.GroundedAnswerResult,
        render=knowledge.render_answer,
        guardrail=knowledge.guard_answer,
        check=knowledge.check_answer,
        finish=knowledge.finish_answer,
        baseline=knowledge.baseline_answer,
        to_proto=knowledge.grounded_answer_proto,
    ),
    PromptSpec(
        prompt_id="tutor.chat_reply",
        version="1",
        description="The tutor's streamed reply to one chat turn, from the conversation bundle.",
        purpose="tutor_chat",
        rpc=Rpc.STREAM_PROMPT,
        tier="fast",
        max_input_tokens=tutor.CHAT_MAX_INPUT_TOKENS,
        max_output_tokens=800,
        variables=tutor.ChatVariables,
        model_output=tutor.ChatReplyDraft,
        output=tutor.ChatReplyResult,
        render=tutor.render_chat,
        guardrail=tutor.guard_chat,
        finish=tutor.finish_chat,
        baseline=tutor.baseline_chat,
        to_proto=tutor.chat_reply_proto,
    ),
    PromptSpec(
        prompt_id="tutor.summarize_conversation",
        version="1",
        description="Summarises older chat turns when the conversation bundle says its summary "
        "is stale; stored through the context service.",
        purpose="tutor_chat",
        rpc=Rpc.INTERNAL,
        tier="fast",
        max_input_tokens=6000,
        max_output_tokens=600,
        variables=tutor.SummaryVariables,
        model_output=tutor.SummaryDraft,
        output=tutor.ConversationSummaryResult,
        render=tutor.render_summary,
        guardrail=tutor.guard_summary,
        finish=tutor.finish_summary,
        baseline=tutor.baseline_summary,
        to_proto=tutor.conversation_summary_proto,
    ),
)


class Registry:
    """Prompts by id."""

    def __init__(self, prompts: tuple[AnySpec, ...]) -> None:
        self._by_id = {spec.prompt_id: spec for spec in prompts}
        if len(self._by_id) != len(prompts):
            raise ValueError("two prompts share an id")

    def get(self, prompt_id: str) -> AnySpec | None:
        return self._by_id.get(prompt_id)

    def __iter__(self) -> Iterator[AnySpec]:
        return iter(sorted(self._by_id.values(), key=lambda spec: spec.prompt_id))


REGISTRY = Registry(PROMPTS)
