"""What a registered prompt is: the spec each prompt module declares and the input it runs on."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any, Generic, Literal, TypeVar

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message as ProtoMessage
from pydantic import AfterValidator, BaseModel, ConfigDict

from nemo_gateway.grounding.sources import NumberedSource
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.proto_mirror import mirrored
from nemo_gateway.providers.base import ChatMessage, OutputSchema
from nemo_protos.context.v1 import conversation_pb2, item_bank_pb2, learner_context_pb2
from nemo_protos.gateway.v1 import outputs_pb2, prompt_pb2


class Strict(BaseModel):
    """Base of every input and output model: unknown fields are an error, values are frozen so
    a guardrail can only accept or reject, never rewrite."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must contain more than whitespace")
    return value


NonBlank = Annotated[str, AfterValidator(_not_blank)]
"""A text variable that must hold something besides whitespace (as ``str.strip`` sees it)."""


class Rpc(StrEnum):
    """Which RPC serves a prompt."""

    RUN_PROMPT = "RunPrompt"
    ANSWER = "Answer"
    STREAM_PROMPT = "StreamPrompt"
    INTERNAL = "internal"
    """Run by the gateway itself (the conversation summary), never by a caller."""


V = TypeVar("V", bound=Strict)
M = TypeVar("M", bound=Strict)
Out = TypeVar("Out", bound=Strict)


@dataclass(frozen=True)
class PromptInput(Generic[V]):
    """Everything a prompt's renderer, guardrail and baseline may read."""

    variables: V
    lang: Lang
    evaluated_at: datetime
    context: learner_context_pb2.ContextBundle | None = None
    """The learner bundle, for prompts with a purpose; None for content-only prompts."""
    conversation: conversation_pb2.ConversationBundle | None = None
    """The conversation bundle, for the tutor prompts."""
    sources: tuple[NumberedSource, ...] = field(default=())
    """Numbered passages, for grounded answers."""


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a valid model output cannot be used yet, in words the model can act on when it is
    asked again; ``reason`` is the run record's reason if no answer ever fixes it."""

    reason: str
    text: str


def no_problem(draft: Any, prompt: PromptInput[Any]) -> Problem | None:
    """The check of prompts whose schema says all a model can fix."""
    return None


@dataclass(frozen=True)
class PromptSpec(Generic[V, M, Out]):
    """One registered prompt, declared as ``SPEC`` by its module; the registry gathers them."""

    prompt_id: str
    version: str
    description: str
    purpose: str | None
    """Context purpose for learner prompts; None for prompts that may see no learner data."""
    rpc: Rpc
    tier: Literal["fast", "strong"]
    max_input_tokens: int
    max_output_tokens: int
    variables: type[V]
    model_output: type[M]
    """What the model must produce (JSON), or for streamed prompts the reply text's wrapper."""
    output: type[Out]
    """The typed result, with the server-authoritative fields the model never sets."""
    render: Callable[[PromptInput[V]], tuple[ChatMessage, ...]]
    guardrail: Callable[[M, PromptInput[V]], str | None]
    """Returns why the model's output is rejected, or None to accept it; never changes it."""
    finish: Callable[[M, PromptInput[V]], Out]
    """Adds the server-authoritative fields to an accepted model output."""
    baseline: Callable[[PromptInput[V]], Out]
    """The deterministic result: no model, no clock, no randomness."""
    output_field: str
    """The field of ``PromptOutput`` that carries the result."""
    bank_items: Callable[[Out], tuple[item_bank_pb2.GeneratedItem, ...]] | None = None
    """Items a result puts in the knowledge item bank, with the answer keys and rubrics its
    client view leaves out; stored through the context service before the result is returned."""
    check: Callable[[M, PromptInput[V]], Problem | None] = no_problem
    """What the model can still fix in a schema-valid output: re-asked with the problem, unlike
    a guardrail rejection, which goes straight to the baseline."""
    client_view: Callable[[Out], ProtoMessage] | None = None
    """The message a client receives, for results with server-side fields it must not see
    (answer keys, rubrics); None: the result mirrors its message field by field
    (:mod:`.proto_mirror`), which the registry checks when it is built."""
    temperature: float = 0.0
    declares_language: bool = True
    """Whether the output must be written in the request's language, an answer in the other one
    being re-asked (WRONG_LANGUAGE). Off for content prompts whose text follows the item's own
    language (an English lesson's items are in English)."""
    reasoning: bool = False
    """Whether the model may reason before it answers, where the server can switch it (the
    Nemotron 3 models think unless told not to). Off for every prompt so far: the answers are
    short, their deadlines tight, and reasoning text is dropped anyway."""

    @property
    def ref(self) -> str:
        """``id@version``."""
        return f"{self.prompt_id}@{self.version}"

    @cached_property
    def output_descriptor(self) -> Descriptor:
        """The message type of :attr:`output_field`."""
        field = outputs_pb2.PromptOutput.DESCRIPTOR.fields_by_name[self.output_field]
        if field.message_type is None:
            raise ValueError(f"PromptOutput.{self.output_field} is not a message")
        return field.message_type

    @cached_property
    def output_message(self) -> type[ProtoMessage]:
        return message_factory.GetMessageClass(self.output_descriptor)

    def to_proto(self, result: Out) -> outputs_pb2.PromptOutput:
        """What a client receives."""
        if self.client_view is None:
            message = mirrored(result, self.output_message)
        else:
            message = self.client_view(result)
        fields: dict[str, Any] = {self.output_field: message}
        return outputs_pb2.PromptOutput(**fields)

    @property
    def streamed(self) -> bool:
        return self.rpc is Rpc.STREAM_PROMPT

    @cached_property
    def output_schema(self) -> dict[str, Any]:
        """JSON Schema of the model's output."""
        return self.model_output.model_json_schema()

    @cached_property
    def request_schema(self) -> OutputSchema:
        """The output schema as model requests carry it."""
        return OutputSchema(self.prompt_id.replace(".", "_"), self.output_schema)

    @cached_property
    def output_schema_json(self) -> str:
        return json.dumps(self.output_schema, ensure_ascii=False, sort_keys=True)

    @cached_property
    def variables_schema_json(self) -> str:
        return json.dumps(self.variables.model_json_schema(), ensure_ascii=False, sort_keys=True)

    def describe(self) -> prompt_pb2.PromptDescriptor:
        """The ListPrompts entry."""
        return prompt_pb2.PromptDescriptor(
            prompt_id=self.prompt_id,
            version=self.version,
            purpose=self.purpose or "",
            description=self.description,
            model_tier=prompt_pb2.MODEL_TIER_FAST
            if self.tier == "fast"
            else prompt_pb2.MODEL_TIER_STRONG,
            temperature=self.temperature,
            max_input_tokens=self.max_input_tokens,
            max_output_tokens=self.max_output_tokens,
            output_schema_json=self.output_schema_json,
            streamed=self.streamed,
            rpc=self.rpc.value,
            variables_schema_json=self.variables_schema_json,
        )
