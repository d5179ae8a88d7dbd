"""tutor.chat_reply: the tutor's streamed reply to one chat turn, from the conversation bundle."""

from __future__ import annotations

import json
from typing import Annotated, Any

from google.protobuf import json_format
from pydantic import AfterValidator, Field

from nemo_gateway.budget import prompt_tokens
from nemo_gateway.grounding.carriers import guarded
from nemo_gateway.grounding.tags import CONVERSATION_TAG, neutralise_tags, tagged
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.common import ANSWER_LANGUAGE, DISCLAIMER, content_problem, quoted
from nemo_gateway.prompts.plain_text import hidden_characters
from nemo_gateway.prompts.spec import PromptInput, PromptSpec, Rpc, Strict
from nemo_gateway.prompts.tutor.shared import DATA_RULE, conversation_bundle
from nemo_gateway.providers.base import ChatMessage
from nemo_protos.context.v1 import conversation_pb2 as conv

CHAT_MAX_INPUT_TOKENS = 6000
"""The chat prompt's limit; a caller's conversation budget may not ask for more."""


def _guarded_values(value: Any, lang: Lang) -> Any:
    """``value`` (JSON-like) with every string guarded."""
    if isinstance(value, str):
        return guarded(value, lang)
    if isinstance(value, dict):
        return {key: _guarded_values(item, lang) for key, item in value.items()}
    if isinstance(value, list):
        return [_guarded_values(item, lang) for item in value]
    return value


def _conversation_data(bundle: conv.ConversationBundle, lang: Lang) -> str:
    """Summary, state, profile and knowledge of the bundle as one JSON document, each text
    guarded (:mod:`nemo_gateway.grounding.carriers`): a flagged knowledge node or summary is
    withheld, never quoted."""
    data: dict[str, Any] = {
        "summary": bundle.conversation_summary,
        "state": json_format.MessageToDict(bundle.state),
        "grade": bundle.profile.grade or None,
        "knowledge": [
            {"title": hit.node.title, "description": hit.node.description}
            for hit in bundle.retrieved_knowledge
        ],
    }
    body = json.dumps(_guarded_values(data, lang), ensure_ascii=False, sort_keys=True)
    return tagged(CONVERSATION_TAG[lang], body)


def _history(bundle: conv.ConversationBundle, lang: Lang) -> list[ChatMessage]:
    """Earlier turns as chat messages, guarded like every carrier; tool results appear as their
    summaries."""
    messages: list[ChatMessage] = []
    for message in bundle.recent_messages:
        content = guarded(message.content, lang)
        if message.role == conv.MESSAGE_ROLE_USER:
            messages.append(ChatMessage("user", content))
        elif message.role == conv.MESSAGE_ROLE_ASSISTANT:
            messages.append(ChatMessage("assistant", content))
        elif message.type == conv.MESSAGE_TYPE_TOOL_RESULT:
            messages.append(ChatMessage("assistant", f"[tool] {content}"))
    return messages


def _shown_as_written(text: str) -> str:
    if hidden_characters(text):
        raise ValueError("must hold no control or invisible characters but line breaks and tabs")
    return text


class ChatVariables(Strict):
    """One chat turn, as StreamPrompt receives it. The learner's message is stored with the turn
    as it is, so it may hold nothing the conversation store refuses or a reader cannot see."""

    session_id: str = Field(min_length=1, max_length=100)
    turn_id: str = Field(min_length=1, max_length=100)
    user_message: Annotated[str, AfterValidator(_shown_as_written)] = Field(
        min_length=1, max_length=4000
    )
    token_budget: int = Field(
        0,
        ge=0,
        le=CHAT_MAX_INPUT_TOKENS,
        description="Tokens the conversation bundle may take; 0: as many as the prompt allows.",
    )


class ChatReplyDraft(Strict):
    """The streamed reply text."""

    text: str


class ChatReplyResult(Strict):
    """The typed result of tutor.chat_reply."""

    text: str
    disclaimer: str


_TUTOR_ROLE: dict[Lang, str] = {
    Lang.VI: (
        "Bạn là gia sư toán kiên nhẫn cho học sinh phổ thông. Dẫn dắt học sinh tự tìm lời giải "
        "bằng câu hỏi gợi mở và từng bước nhỏ; không giải hộ toàn bộ, không nêu điểm số. "
        "Trả lời ngắn gọn, thân thiện."
    ),
    Lang.EN: (
        "You are a patient maths tutor for school students. Lead the student to find the "
        "solution with guiding questions and small steps; do not solve it all for them, state "
        "no score. Reply briefly and kindly."
    ),
}


def _chat_rules(lang: Lang) -> str:
    return " ".join((_TUTOR_ROLE[lang], DATA_RULE[lang], ANSWER_LANGUAGE[lang]))


def conversation_budget(requested: int, lang: Lang) -> int:
    """The token budget the conversation bundle is built with: the caller's, within what the
    chat prompt leaves once its rules are counted."""
    room = CHAT_MAX_INPUT_TOKENS - prompt_tokens((ChatMessage("system", _chat_rules(lang)),))
    return min(requested or room, room)


def render(prompt: PromptInput[ChatVariables]) -> tuple[ChatMessage, ...]:
    lang, bundle = prompt.lang, conversation_bundle(prompt)
    system = _chat_rules(lang) + "\n\n" + _conversation_data(bundle, lang)
    return (
        ChatMessage("system", system),
        *_history(bundle, lang),
        ChatMessage(
            "user", neutralise_tags(bundle.current_user_message or prompt.variables.user_message)
        ),
    )


REPLY_CHARS_PER_TOKEN = 6
"""Characters a reply may have per output token: more than any language's tokens average, so
only a provider that ignores the token limit reaches the bound."""


def reply_char_limit(max_output_tokens: int) -> int:
    """The reply's bound in characters, from the output token limit its requests carry."""
    return REPLY_CHARS_PER_TOKEN * max_output_tokens


def reply_problem(text: str, prompt: PromptInput[ChatVariables]) -> str | None:
    """Why the reply so far may not reach the learner: hidden characters, a score claim, markup
    or a link, the learner's pseudonym or any identifier shape, in any spelling. The stream runs
    it on the reply as a whole before each release (:mod:`nemo_gateway.screen`)."""
    forbidden = (conversation_bundle(prompt).learner_ref,)
    return content_problem("reply", text, forbidden) if text.strip() else None


def guardrail(draft: ChatReplyDraft, prompt: PromptInput[ChatVariables]) -> str | None:
    """The same check on the whole reply, before it is recorded as completed."""
    return reply_problem(draft.text, prompt)


def finish(draft: ChatReplyDraft, prompt: PromptInput[ChatVariables]) -> ChatReplyResult:
    return ChatReplyResult(text=draft.text, disclaimer=DISCLAIMER[prompt.lang])


_CHAT_BASELINE: dict[Lang, str] = {
    Lang.VI: (
        "Lúc này cô chưa trả lời chi tiết được. Em hãy đọc lại câu hỏi, viết ra điều đã biết và "
        "điều cần tìm, rồi thử làm từng bước nhỏ nhé."
    ),
    Lang.EN: (
        "I cannot give a detailed answer right now. Reread the question, write down what you "
        "know and what you need to find, then try it in small steps."
    ),
}
_CHAT_TOPIC: dict[Lang, str] = {
    Lang.VI: " Phần kiến thức liên quan: «{title}».",
    Lang.EN: " Related topic: «{title}».",
}


def baseline(prompt: PromptInput[ChatVariables]) -> ChatReplyResult:
    """The fixed reply, and the first retrieved node's title when the carrier guard lets a
    learner be shown it."""
    lang, bundle = prompt.lang, conversation_bundle(prompt)
    text = _CHAT_BASELINE[lang]
    titles = (quoted(hit.node.title, lang) for hit in bundle.retrieved_knowledge[:1])
    if title := next(titles, None):
        text += _CHAT_TOPIC[lang].format(title=title)
    return ChatReplyResult(text=text, disclaimer=DISCLAIMER[lang])


SPEC = PromptSpec(
    prompt_id="tutor.chat_reply",
    version="3",
    description="The tutor's streamed reply to one chat turn, from the conversation bundle.",
    purpose="tutor_chat",
    rpc=Rpc.STREAM_PROMPT,
    tier="fast",
    max_input_tokens=CHAT_MAX_INPUT_TOKENS,
    max_output_tokens=800,
    variables=ChatVariables,
    model_output=ChatReplyDraft,
    output=ChatReplyResult,
    render=render,
    guardrail=guardrail,
    finish=finish,
    baseline=baseline,
    output_field="chat_reply",
)
