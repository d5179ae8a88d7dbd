"""Builds the configured model provider; the baseline provider is no provider at all."""

from __future__ import annotations

from nemo_gateway.providers.anthropic import DEFAULT_BASE_URL as ANTHROPIC_URL
from nemo_gateway.providers.anthropic import AnthropicMessagesFormat
from nemo_gateway.providers.base import ModelProvider
from nemo_gateway.providers.http import HttpProvider, RetryPolicy, WireFormat
from nemo_gateway.providers.openai import DEFAULT_BASE_URL as OPENAI_URL
from nemo_gateway.providers.openai import OpenAIChatFormat
from nemo_gateway.providers.servers import SERVERS, ServerKind, detect_server
from nemo_gateway.settings import LOCAL_BASE_URL, GatewaySettings


def server_kind(settings: GatewaySettings) -> ServerKind:
    """The kind of OpenAI-compatible server the settings point at."""
    if settings.llm_server != "auto":
        return settings.llm_server
    return detect_server(base_url(settings), local=settings.provider == "local")


def base_url(settings: GatewaySettings) -> str:
    """The LLM API's base URL: the configured one, or the provider's own."""
    defaults = {"openai": OPENAI_URL, "anthropic": ANTHROPIC_URL, "local": LOCAL_BASE_URL}
    return settings.llm_base_url or defaults.get(settings.provider, OPENAI_URL)


def build_provider(settings: GatewaySettings) -> ModelProvider | None:
    """The provider the settings name; None for ``baseline`` (no model is ever asked)."""
    wire: WireFormat
    if settings.provider == "baseline":
        return None
    if settings.provider == "anthropic":
        wire = AnthropicMessagesFormat()
    else:
        dialect = None if settings.structured_output == "auto" else settings.structured_output
        wire = OpenAIChatFormat(
            SERVERS[server_kind(settings)], dialect=dialect, name=settings.provider
        )
    return HttpProvider(
        wire,
        base_url=base_url(settings),
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
