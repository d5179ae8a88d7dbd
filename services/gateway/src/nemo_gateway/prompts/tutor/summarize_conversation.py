"""tutor.summarize_conversation: older chat turns summarised when the conversation bundle says
its summary is stale; stored back through the context service, which never calls a model."""

from __future__ import annotations

from nemo_gateway.grounding.carriers import guarded
from nemo_gateway.grounding.tags import CONVERSATION_TAG, tagged
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.common import ANSWER_LANGUAGE, JSON_ONLY, quoted, text_problems
from nemo_gateway.prompts.spec import PromptInput, PromptSpec, Rpc, Strict
from nemo_gateway.prompts.tutor.shared import DATA_RULE, conversation_bundle
from nemo_gateway.providers.base import ChatMessage
from nemo_protos.context.v1 import conversation_pb2 as conv
from nemo_protos.gateway.v1 import outputs_pb2

MAX_SUMMARY_CHARS = 1500
BASELINE_SUMMARY_MESSAGES = 3
BASELINE_QUOTE_CHARS = 160


class SummaryVariables(Strict):
    """The summary takes no variables: it reads the conversation bundle."""


class SummaryDraft(Strict):
    """The model's answer for tutor.summarize_conversation."""

    summary: str


class ConversationSummaryResult(Strict):
    """The typed result: the summary and the last turn it covers."""

    summary: str
    covers_through_turn_id: str


def covered_turn(bundle: conv.ConversationBundle) -> str:
    """The last earlier turn in the bundle, which a new summary covers; empty when none."""
    return bundle.recent_messages[-1].turn_id if bundle.recent_messages else ""


_SUMMARY_ROLE: dict[Lang, str] = {
    Lang.VI: (
        "Tóm tắt cuộc trò chuyện gia sư để lượt sau tiếp nối được: chủ đề, điều học sinh đã "
        "hiểu, chỗ còn vướng, bài đang làm dở. Không ghi tên hay thông tin cá nhân; tối đa 120 "
        "từ. Gộp cả bản tóm tắt cũ."
    ),
    Lang.EN: (
        "Summarise the tutoring conversation so the next turn can continue it: topic, what the "
        "student understood, where they are stuck, the exercise in progress. No names or "
        "personal details; at most 120 words. Fold in the previous summary."
    ),
}


_SPEAKERS = {
    conv.MESSAGE_ROLE_USER: "student",
    conv.MESSAGE_ROLE_ASSISTANT: "tutor",
    conv.MESSAGE_ROLE_TOOL: "tool",
}


def render(prompt: PromptInput[SummaryVariables]) -> tuple[ChatMessage, ...]:
    lang, bundle = prompt.lang, conversation_bundle(prompt)
    transcript = "\n".join(
        f"{_SPEAKERS[m.role]}: {guarded(m.content, lang)}"
        for m in bundle.recent_messages
        if m.role in _SPEAKERS
    )
    system = " ".join((_SUMMARY_ROLE[lang], DATA_RULE[lang], ANSWER_LANGUAGE[lang]))
    system += " " + JSON_ONLY[lang]
    body = f"{guarded(bundle.conversation_summary, lang)}\n\n{transcript}".strip()
    return (
        ChatMessage("system", system),
        ChatMessage("user", tagged(CONVERSATION_TAG[lang], body)),
    )


def guardrail(draft: SummaryDraft, prompt: PromptInput[SummaryVariables]) -> str | None:
    return text_problems(
        "summary",
        draft.summary,
        max_chars=MAX_SUMMARY_CHARS,
        forbidden=(conversation_bundle(prompt).learner_ref,),
    )


def finish(draft: SummaryDraft, prompt: PromptInput[SummaryVariables]) -> ConversationSummaryResult:
    return ConversationSummaryResult(
        summary=draft.summary.strip(),
        covers_through_turn_id=covered_turn(conversation_bundle(prompt)),
    )


_SUMMARY_WORDS: dict[Lang, str] = {
    Lang.VI: "Câu hỏi gần đây của học sinh: {quotes}.",
    Lang.EN: "The student's recent questions: {quotes}.",
}


def baseline(prompt: PromptInput[SummaryVariables]) -> ConversationSummaryResult:
    """The stored summary plus the student's latest questions, shortened and quoted as the
    carrier guard lets them (a question it flags is left out)."""
    lang, bundle = prompt.lang, conversation_bundle(prompt)
    asked = [m.content for m in bundle.recent_messages if m.role == conv.MESSAGE_ROLE_USER]
    shown = (
        quoted(text[:BASELINE_QUOTE_CHARS], lang) for text in asked[-BASELINE_SUMMARY_MESSAGES:]
    )
    quotes = "; ".join(f"«{text}»" for text in shown if text)
    parts = [bundle.conversation_summary.strip()]
    if quotes:
        parts.append(_SUMMARY_WORDS[lang].format(quotes=quotes))
    return ConversationSummaryResult(
        summary=" ".join(part for part in parts if part),
        covers_through_turn_id=covered_turn(bundle),
    )


def client_view(result: ConversationSummaryResult) -> outputs_pb2.ConversationSummary:
    """The summary without the turn it covers, which is the server's bookkeeping."""
    return outputs_pb2.ConversationSummary(summary=result.summary)


SPEC = PromptSpec(
    prompt_id="tutor.summarize_conversation",
    version="3",
    description="Summarises older chat turns when the conversation bundle says its summary "
    "is stale; stored through the context service.",
    purpose="tutor_chat",
    rpc=Rpc.INTERNAL,
    tier="fast",
    max_input_tokens=6000,
    max_output_tokens=600,
    variables=SummaryVariables,
    model_output=SummaryDraft,
    output=ConversationSummaryResult,
    render=render,
    guardrail=guardrail,
    finish=finish,
    baseline=baseline,
    output_field="conversation_summary",
    client_view=client_view,
)
