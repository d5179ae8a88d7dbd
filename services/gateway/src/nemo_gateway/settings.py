"""Settings of the gateway (environment variables prefixed NEMO_GATEWAY_).

Model keys are secrets: they are ``SecretStr`` (masked in ``repr`` and logs) and are read only by
the provider module. The LLM key and the embedding key are separate settings and never stand in
for each other.
"""

from __future__ import annotations

import os
from typing import Annotated, Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from nemo_core.client import channel_target
from nemo_core.secret_files import SECRET_FILE
from nemo_core.settings import ServiceSettings

ProviderName = Literal["baseline", "openai", "anthropic", "local"]
LlmServer = Literal[
    "auto", "openai", "nim", "vllm", "llama-cpp", "llama-cpp-python", "ollama", "other"
]
StructuredOutput = Literal["auto", "json_schema", "json_object_schema", "json_object", "prompt"]

LOCAL_MODEL_NAME = "SmolLM2-135M-Instruct"
"""The model the local provider serves (its name on the local server)."""
LOCAL_BASE_URL = "http://127.0.0.1:8000/v1"

REMOVED_VARIABLES = {
    "NEMO_GATEWAY_JSON_SCHEMA_MODE": "set NEMO_GATEWAY_STRUCTURED_OUTPUT (json_schema, "
    "json_object_schema, json_object or prompt) or NEMO_GATEWAY_LLM_SERVER instead",
}
"""Variables that once configured the gateway: still set, they are refused at start rather than
ignored, since the deployment that sets one expects a behaviour the gateway no longer has."""


class GatewaySettings(ServiceSettings):
    """Gateway settings."""

    model_config = SettingsConfigDict(env_prefix="NEMO_GATEWAY_", extra="ignore", frozen=True)

    listen_address: str = Field(
        "127.0.0.1:50052",
        description="host:port the gRPC server listens on (0.0.0.0:50052 in a container).",
    )
    context_address: str = Field(
        "127.0.0.1:50051",
        description="host:port of the context service; calls are balanced over every address "
        "it resolves to (a headless Service: dns:///NAME:PORT), or over a comma-separated list "
        "of IP host:port addresses.",
    )
    provider: ProviderName = Field(
        "baseline",
        description="Model provider: `baseline` (no model; every prompt returns its "
        "deterministic baseline, no key needed), `openai` (any OpenAI-compatible chat "
        "completions API: OpenAI, NVIDIA NIM, vLLM, Ollama, llama.cpp server), `anthropic` "
        "(Anthropic messages API) or `local` (SmolLM2-135M-Instruct on llama-cpp-python's "
        "OpenAI-compatible server; `nemo dev up` and `make run` start it, no key needed).",
    )
    llm_base_url: str | None = Field(
        None,
        description="Base URL of the LLM API, for example https://integrate.api.nvidia.com/v1 "
        "(OpenAI-compatible, /chat/completions is appended) or https://api.anthropic.com "
        "(/v1/messages is appended). Unset: the provider's public endpoint "
        f"({LOCAL_BASE_URL} for `local`).",
    )
    llm_server: LlmServer = Field(
        "auto",
        description="Which server answers at an OpenAI-compatible base URL; decides the "
        "structured-output dialect, the name of the output token limit and how a prompt's "
        "reasoning is switched: `openai` (strict json_schema, max_completion_tokens, "
        "reasoning_effort), `nim`, `vllm`, `llama-cpp` (llama.cpp's llama-server) (json_schema, "
        "max_tokens, chat_template_kwargs.enable_thinking), `llama-cpp-python` (json_object "
        "with schema), `ollama` (json_schema, which it turns into its format), `other` "
        "(json_schema, no extra fields). `auto`: `llama-cpp-python` for `local`, `openai` or "
        "`nim` by the base URL's host, otherwise `other`.",
    )
    structured_output: StructuredOutput = Field(
        "auto",
        description="How an OpenAI-compatible request asks for an answer that follows the "
        "prompt's JSON Schema: `json_schema` (response_format json_schema), "
        "`json_object_schema` (response_format json_object with schema), `json_object` (JSON "
        "mode, the schema in the system prompt), `prompt` (the schema in the system prompt "
        "only, for servers that take no response_format). `auto`: the dialect of "
        "`llm_server`.",
    )
    output_token_limit: int | None = Field(
        None,
        gt=0,
        description="Upper bound on every prompt's output tokens (a prompt's own lower limit "
        "still applies); for slow local models and for tests. Unset: each prompt's limit.",
    )
    llm_api_key: Annotated[SecretStr | None, SECRET_FILE] = Field(
        None, description="Key of the LLM API; never logged. Local servers may need none."
    )
    embedding_base_url: str | None = Field(
        None,
        description="Base URL of the embedding API; kept apart from the LLM API and its key.",
    )
    embedding_api_key: Annotated[SecretStr | None, SECRET_FILE] = Field(
        None, description="Key of the embedding API; never falls back to the LLM key."
    )
    model_fast: str = Field(
        "nvidia/nemotron-3-nano-30b-a3b",
        description="Model name for prompts of the fast tier.",
    )
    model_strong: str = Field(
        "nvidia/nemotron-3-super-120b-a12b",
        description="Model name for prompts of the strong tier.",
    )
    ai_enrichment_enabled: bool = Field(
        True,
        description="Kill switch: false makes every prompt return its deterministic baseline "
        "without asking a model; the system stays fully usable.",
    )
    request_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description="Longest one provider request may take (for streams: until the first "
        "delta and between deltas); the caller's deadline shortens it.",
    )
    connect_timeout_seconds: float = Field(
        5.0, gt=0, description="Longest a connection to the provider may take to open."
    )
    max_answer_attempts: int = Field(
        3,
        ge=1,
        le=5,
        description="Model answers per prompt run: the first and the re-asks after a parse or "
        "validation failure, all inside the caller's deadline.",
    )
    max_retries: int = Field(
        2,
        ge=0,
        le=5,
        description="Retries of one provider request after 429, 5xx or a connection error, with "
        "exponential backoff and jitter, never past the caller's deadline.",
    )
    retry_backoff_seconds: float = Field(
        0.25, gt=0, description="Backoff before the first retry; doubled for each further one."
    )
    retry_backoff_max_seconds: float = Field(
        4.0,
        gt=0,
        description="Longest backoff between two retries. A provider's Retry-After is waited "
        "as it is when it ends before the caller's deadline; otherwise the run fails at once "
        "(PROVIDER_RATE_LIMITED for 429, PROVIDER_UNAVAILABLE for 5xx).",
    )
    fallback_reserve_seconds: float = Field(
        0.1,
        ge=0,
        description="Time kept back from the caller's deadline to build and return the "
        "baseline when the provider is slow.",
    )
    provider_max_concurrency: int = Field(
        64,
        gt=0,
        description="Provider requests in flight at once on this replica (the provider sees "
        "the sum: size it as floor(provider concurrency / maxReplicas)); a prompt that needs one "
        "more fails with RESOURCE_EXHAUSTED (PROVIDER_BUSY).",
    )
    caller_max_concurrency: int = Field(
        32,
        gt=0,
        description="Gateway RPCs one caller identity may have in flight at once on this "
        "replica (docs/operations/scaling.md gives the bounds from min and max replicas); one "
        "more fails with RESOURCE_EXHAUSTED (CALLER_BUSY).",
    )
    cache_max_entries: int = Field(
        1024,
        ge=0,
        description="Entries of the exact result cache (0 turns it off). Keys include the "
        "caller's permission scope, so entries are never shared across scopes.",
    )
    cache_ttl_seconds: float = Field(
        300.0, gt=0, description="How long a cached result may be served."
    )
    answer_context_token_budget: int = Field(
        4000,
        gt=0,
        description="Token budget of the passages of a grounded answer; the strongest go first.",
    )
    answer_search_limit: int = Field(
        8,
        ge=1,
        le=50,
        description="Knowledge passages a grounded answer retrieves when the caller gives none.",
    )

    @field_validator("context_address")
    @classmethod
    def _check_context_address(cls, value: str) -> str:
        channel_target(value)
        return value

    @model_validator(mode="after")
    def _local_model_names(self) -> Self:
        # The local server serves one model; tiers name it unless they were set explicitly.
        if self.provider == "local":
            for tier in ("model_fast", "model_strong"):
                if tier not in self.model_fields_set:
                    object.__setattr__(self, tier, LOCAL_MODEL_NAME)
        return self

    @model_validator(mode="after")
    def _no_removed_variables(self) -> Self:
        removed = [
            f"{name}: {hint}" for name, hint in REMOVED_VARIABLES.items() if name in os.environ
        ]
        if removed:
            raise ValueError("removed settings are set; " + "; ".join(removed))
        return self

    def model_for(self, tier: Literal["fast", "strong"]) -> str:
        """The configured model name of a tier."""
        return self.model_fast if tier == "fast" else self.model_strong

    def output_tokens(self, prompt_limit: int) -> int:
        """The output token limit of a prompt's model requests."""
        if self.output_token_limit is None:
            return prompt_limit
        return min(prompt_limit, self.output_token_limit)
