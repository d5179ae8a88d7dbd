"""Assembles the gateway: provider, context client, cache, limits, servicer and ACL."""

from __future__ import annotations

from nemo_core.client import create_channel
from nemo_core.limits import InFlightLimit, KeyedInFlightLimit
from nemo_core.server import Cleanup, Service, ServiceSetup
from nemo_gateway.acl import ACL
from nemo_gateway.cache import ResultCache
from nemo_gateway.chat import ChatStreamer
from nemo_gateway.context_client import ContextClient
from nemo_gateway.errors import caller_busy, provider_busy
from nemo_gateway.prompts import common
from nemo_gateway.providers.factory import build_provider
from nemo_gateway.runner import PromptRunner
from nemo_gateway.servicer import GatewayServicer
from nemo_gateway.settings import GatewaySettings
from nemo_gateway.structured import language
from nemo_protos.gateway.v1 import gateway_service_pb2, gateway_service_pb2_grpc

SERVICE_NAME = "gateway"
# Each calls the context service or a model provider: without a deadline, a stuck dependency
# would hold the call and the caller's concurrency slot forever.
DEADLINE_REQUIRED = ("RunPrompt", "StreamPrompt", "Answer")


async def build(settings: GatewaySettings) -> ServiceSetup:
    """Everything the gateway serves, and how to clean it up."""
    provider = build_provider(settings)
    if provider is not None:
        # Model output is checked from the first answer on: its tables are built now.
        common.prepare()
        language.prepare()
    channel = create_channel(settings.context_address, settings)
    provider_limit = InFlightLimit(settings.provider_max_concurrency, provider_busy)
    runner = PromptRunner(
        settings,
        provider,
        ContextClient(channel),
        ResultCache(settings.cache_max_entries, settings.cache_ttl_seconds),
        provider_limit,
    )
    servicer = GatewayServicer(
        runner,
        ChatStreamer(settings, provider, runner, provider_limit),
        KeyedInFlightLimit(settings.caller_max_concurrency, caller_busy),
        ai_enrichment_enabled=settings.ai_enrichment_enabled,
    )
    cleanup: list[Cleanup] = [channel.close]
    if provider is not None:
        cleanup.append(provider.aclose)
    return ServiceSetup(
        services=[
            Service.from_servicer(
                gateway_service_pb2_grpc.add_GatewayServiceServicer_to_server,
                servicer,
                gateway_service_pb2.DESCRIPTOR.services_by_name["GatewayService"],
            )
        ],
        acl=ACL,
        deadline_required=DEADLINE_REQUIRED,
        cleanup=cleanup,
    )
