"""What the learner prompts share: the bundle they run on, its place in the prompt, the
learner's pseudonym as a forbidden string, and the length limits of learner-facing text."""

from __future__ import annotations

from typing import Any

from nemo_gateway.grounding.carriers import guarded_lines
from nemo_gateway.grounding.tags import CONTEXT_TAG, neutralise_tags, tagged
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.common import ANSWER_LANGUAGE, CONTEXT_IS_DATA, JSON_ONLY
from nemo_gateway.prompts.spec import PromptInput, Strict
from nemo_gateway.providers.base import ChatMessage
from nemo_protos.context.v1 import learner_context_pb2 as ctx

MAX_TEXT_CHARS = 800
MAX_POINT_CHARS = 200
MAX_POINTS = 5
WEAK_STATES = (ctx.KNOWLEDGE_STATE_GAP, ctx.KNOWLEDGE_STATE_SHAKY)


class NoVariables(Strict):
    """The prompt takes no variables: everything comes from the learner's bundle."""


def context_bundle(prompt: PromptInput[Any]) -> ctx.ContextBundle:
    if prompt.context is None:
        raise ValueError("a learner prompt runs on a context bundle")
    return prompt.context


def messages(prompt: PromptInput[Any], role: dict[Lang, str], task: str) -> tuple[ChatMessage, ...]:
    lang = prompt.lang
    system = " ".join((role[lang], CONTEXT_IS_DATA[lang], ANSWER_LANGUAGE[lang], JSON_ONLY[lang]))
    # The bundle's text carries what others wrote (goals, titles): guarded line by line. The
    # task holds the caller's question and topic titles: kept from posing as a data tag.
    context = tagged(CONTEXT_TAG[lang], guarded_lines(context_bundle(prompt).rendered_text, lang))
    user = f"{context}\n\n{neutralise_tags(task)}"
    return (ChatMessage("system", system), ChatMessage("user", user))


def forbidden_strings(prompt: PromptInput[Any]) -> tuple[str, ...]:
    return (context_bundle(prompt).learner_ref,)
