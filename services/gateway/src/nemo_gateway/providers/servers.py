"""What each OpenAI-compatible server takes, as data: the structured-output dialect, the name of
the output token limit, how reasoning is switched, and whether streams report usage.

The servers differ where it matters to the gateway:

- OpenAI itself: ``response_format`` ``json_schema`` with ``strict: true`` (on a schema rewritten
  to the subset strict mode accepts), ``max_completion_tokens`` (``max_tokens`` is deprecated
  there and refused by reasoning models), ``reasoning_effort`` for its reasoning models.
- NVIDIA NIM, vLLM and llama.cpp's own server (``llama-server``): ``json_schema``, ``max_tokens``,
  and ``chat_template_kwargs.enable_thinking`` for models whose chat template thinks by default
  (the Nemotron 3 models do).
- llama-cpp-python's server: ``{"type": "json_object", "schema": ...}``; it refuses
  ``json_schema`` (with a 500 that names the validation error).
- Ollama's OpenAI-compatible endpoint: ``json_schema``, which it turns into its own ``format``
  with the schema; a top-level ``format`` is not read there.
- Anything else: ``json_schema``, ``max_tokens`` and no extra fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

Dialect = Literal["json_schema", "json_object_schema", "json_object", "prompt"]
"""How an answer's schema reaches the server:

- ``json_schema``: ``response_format: {"type": "json_schema", "json_schema": {name, schema}}``;
- ``json_object_schema``: ``response_format: {"type": "json_object", "schema": schema}``;
- ``json_object``: JSON mode (``{"type": "json_object"}``) and the schema in the system prompt;
- ``prompt``: no ``response_format``, the schema in the system prompt only.
"""

ServerKind = Literal["openai", "nim", "vllm", "llama-cpp", "llama-cpp-python", "ollama", "other"]

ReasoningSwitch = Literal["none", "reasoning_effort", "chat_template_kwargs"]
"""How a request turns a model's reasoning on or off: not at all, OpenAI's ``reasoning_effort``
(for its reasoning models only), or the chat template's ``enable_thinking``."""


@dataclass(frozen=True, slots=True)
class ServerProfile:
    """The request fields one kind of server takes."""

    dialect: Dialect
    strict_schema: bool
    """Send ``strict: true`` with a schema rewritten to strict mode's subset."""
    token_limit_field: Literal["max_tokens", "max_completion_tokens"]
    reasoning: ReasoningSwitch
    stream_usage: bool
    """Ask for usage in a stream's last chunk (``stream_options.include_usage``)."""


SERVERS: Mapping[ServerKind, ServerProfile] = {
    "openai": ServerProfile("json_schema", True, "max_completion_tokens", "reasoning_effort", True),
    "nim": ServerProfile("json_schema", False, "max_tokens", "chat_template_kwargs", True),
    "vllm": ServerProfile("json_schema", False, "max_tokens", "chat_template_kwargs", True),
    "llama-cpp": ServerProfile("json_schema", False, "max_tokens", "chat_template_kwargs", True),
    "llama-cpp-python": ServerProfile("json_object_schema", False, "max_tokens", "none", False),
    "ollama": ServerProfile("json_schema", False, "max_tokens", "none", True),
    "other": ServerProfile("json_schema", False, "max_tokens", "none", True),
}

#: Hosts whose server kind is known from the base URL alone.
KNOWN_HOSTS: Mapping[str, ServerKind] = {
    "api.openai.com": "openai",
    "integrate.api.nvidia.com": "nim",
}

#: OpenAI models that reason, and so take ``reasoning_effort`` (others refuse the field).
OPENAI_REASONING_MODEL_PREFIXES: tuple[str, ...] = ("o1", "o3", "o4", "gpt-5")

#: ``reasoning_effort`` for a prompt that does not ask for reasoning, and for one that does.
OPENAI_REASONING_EFFORT: Mapping[bool, str] = {False: "low", True: "medium"}


def detect_server(base_url: str, *, local: bool) -> ServerKind:
    """The server kind when the settings leave it to ``auto``: llama-cpp-python for the local
    model, a known public API by its host, otherwise ``other``."""
    if local:
        return "llama-cpp-python"
    return KNOWN_HOSTS.get((urlsplit(base_url).hostname or "").lower(), "other")


def openai_reasons(model: str) -> bool:
    """Whether an OpenAI model is one of its reasoning models."""
    name = model.rsplit("/", 1)[-1].lower()
    return name.startswith(OPENAI_REASONING_MODEL_PREFIXES)
