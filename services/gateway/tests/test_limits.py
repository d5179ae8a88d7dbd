"""Concurrency limits fail fast with RESOURCE_EXHAUSTED instead of queueing."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest

from nemo_core.errors import error_details
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_testing.providers import Answer, Hang, ScriptedProvider

from .gateway_testing import Gateway, StartGateway, variables

REQUEST = pb.RunPromptRequest(
    prompt_id="coral.evaluate_item",
    variables=variables(stem="1 + 1 = ?", kind="short_answer", subject="math", grade=1),
)

# Time the first call keeps back for its baseline once the provider has timed out: room for a
# busy machine, since what is tested is the refusal of the second call.
RESERVE = 0.5


async def _second_call_fails(gateway: Gateway, provider: ScriptedProvider) -> str:
    provider.script(Hang(3.0), Answer(json.dumps({"verdict": "accept", "summary": "Ổn."})))

    async def call() -> pb.RunPromptResponse:
        response: pb.RunPromptResponse = await gateway.stub.RunPrompt(
            REQUEST, metadata=gateway.metadata, timeout=1.5
        )
        return response

    first = asyncio.create_task(call())
    async with asyncio.timeout(5):
        await provider.wait_for_requests(1)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    # The first call still ends normally, on its baseline after the provider timed out.
    assert (await first).run.reason == "PROVIDER_TIMEOUT"
    assert len(provider.requests) == 1
    reason = error_details(refused.value).reason
    assert reason is not None
    return reason


async def test_a_full_provider_limit_refuses_the_next_prompt(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider_max_concurrency=1, fallback_reserve_seconds=RESERVE)
    assert await _second_call_fails(gateway, provider) == "PROVIDER_BUSY"


async def test_a_full_caller_limit_refuses_the_callers_next_rpc(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(caller_max_concurrency=1, fallback_reserve_seconds=RESERVE)
    assert await _second_call_fails(gateway, provider) == "CALLER_BUSY"
