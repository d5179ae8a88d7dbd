"""Builds the configured model provider; the baseline provider is no provider at all."""

from __future__ import annotations

from nemo_gateway.providers.anthropic import DEFAULT_BASE_URL as ANTHROPIC_URL
from nemo_gateway.providers.anthropic import AnthropicMessagesFormat
from nemo_gateway.providers.base import ModelProvider
from nemo_gateway.providers.http import HttpProvider, RetryPolicy, WireFormat
from nemo_gateway.providers.openai import DEFAULT_BASE_URL as OPENAI_URL
from nemo_gateway.providers.openai import OpenAIChatFormat
from nemo_gateway.settings import GatewaySettings


def build_provider(settings: GatewaySettings) -> ModelProvider | None:
    """The provider the settings name; None for ``baseline`` (no model is ever asked)."""
    wire: WireFormat
    if settings.provider == "baseline":
        return None
    if settings.provider == "openai":
        wire, default_url = OpenAIChatFormat(json_schema_mode=settings.json_schema_mode), OPENAI_URL
    else:
        wire, default_url = AnthropicMessagesFormat(), ANTHROPIC_URL
    return HttpProvider(
        wire,
        base_url=settings.llm_base_url or default_url,
        api_key=settings.llm_api_key,
        policy=RetryPolicy(
            request_timeout=settings.request_timeout_seconds,
            connect_timeout=settings.connect_timeout_seconds,
            max_retries=settings.max_retries,
            backoff=settings.retry_backoff_seconds,
            backoff_max=settings.retry_backoff_max_seconds,
        ),
        max_connections=settings.provider_max_concurrency,
    )
