"""The prompt registry: every prompt the gateway runs. Code is the source of truth.

Each prompt is one module, ``prompts/<family>/<name>.py`` for the id ``<family>.<name>``, that
declares its ``SPEC`` (:class:`~nemo_gateway.prompts.spec.PromptSpec`: id and version, the
context purpose it builds learner context with, or None when no learner data may reach it, the
RPC that serves it, the model tier, token limits, input and output models, guardrail and
deterministic baseline) beside the functions it names. Temperature is 0 for all. Bump
``version`` whenever the wording, models or rules of a prompt change: cached results are keyed
by it. A new prompt is a new module listed in :data:`MODULES`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from nemo_gateway.prompts.coral import evaluate_item, generate_items
from nemo_gateway.prompts.knowledge import answer
from nemo_gateway.prompts.learner import plan_explanation, portrait_summary, tutor_hint
from nemo_gateway.prompts.proto_mirror import mismatches
from nemo_gateway.prompts.spec import PromptSpec
from nemo_gateway.prompts.tutor import chat_reply, summarize_conversation

AnySpec = PromptSpec[Any, Any, Any]

MODULES = (
    generate_items,
    evaluate_item,
    tutor_hint,
    plan_explanation,
    portrait_summary,
    answer,
    chat_reply,
    summarize_conversation,
)

PROMPTS: tuple[AnySpec, ...] = tuple(module.SPEC for module in MODULES)


class Registry:
    """Prompts by id. A prompt whose result is converted field by field must mirror its output
    message (:mod:`.proto_mirror`), or the registry refuses it."""

    def __init__(self, prompts: Iterable[AnySpec]) -> None:
        specs = tuple(prompts)
        self._by_id = {spec.prompt_id: spec for spec in specs}
        if len(self._by_id) != len(specs):
            raise ValueError("two prompts share an id")
        for spec in specs:
            if spec.client_view is None and (
                problems := mismatches(spec.output, spec.output_descriptor)
            ):
                raise ValueError(f"{spec.ref} needs a client view: {'; '.join(problems)}")

    def get(self, prompt_id: str) -> AnySpec | None:
        return self._by_id.get(prompt_id)

    def __iter__(self) -> Iterator[AnySpec]:
        return iter(sorted(self._by_id.values(), key=lambda spec: spec.prompt_id))


REGISTRY = Registry(PROMPTS)
