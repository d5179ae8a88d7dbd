"""The provider transport: keys sent only to the provider, never into logs, spans, errors or
repr; backoff bounded and jittered."""

from __future__ import annotations

import asyncio
import json
import logging

import grpc
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr

from nemo_gateway.providers.factory import build_provider
from nemo_gateway.providers.http import RetryPolicy
from nemo_gateway.settings import GatewaySettings
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_protos.gateway.v1 import run_pb2
from nemo_testing.providers import Answer, HttpError, ScriptedProvider
from services.gateway.tests.gateway_testing import LLM_KEY, StartGateway, variables

REQUEST = pb.RunPromptRequest(
    prompt_id="coral.evaluate_item",
    variables=variables(stem="2 + 2 = ?", kind="short_answer", subject="math", grade=1),
)


@pytest.mark.parametrize(
    ("wire", "header"), [("openai", "authorization"), ("anthropic", "x-api-key")]
)
async def test_the_key_goes_to_the_provider_and_nowhere_else(
    wire: str,
    header: str,
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    spans: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    gateway = await start_gateway(provider=wire, max_retries=1)
    provider.script(HttpError(503), HttpError(401), Answer("{}"))
    spans.clear()
    with caplog.at_level(logging.DEBUG):
        first = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await gateway.stub.RunPrompt(
                pb.RunPromptRequest(prompt_id="coral.evaluate_item"),
                metadata=gateway.metadata,
                timeout=5,
            )
    assert first.run.reason == "PROVIDER_REJECTED"
    assert LLM_KEY in provider.requests[0].headers[header]
    for record in caplog.records:
        assert LLM_KEY not in record.getMessage()
        assert LLM_KEY not in json.dumps(vars(record), default=str)
    for span in spans.get_finished_spans():
        assert LLM_KEY not in json.dumps(dict(span.attributes or {}), default=str)
    assert LLM_KEY.encode() not in first.SerializeToString()
    assert LLM_KEY not in (failed.value.details() or "")
    assert LLM_KEY not in str(failed.value.trailing_metadata())


def test_the_provider_repr_shows_no_key() -> None:
    settings = GatewaySettings(provider="openai", llm_api_key=SecretStr(LLM_KEY))
    provider = build_provider(settings)
    assert provider is not None
    assert LLM_KEY not in repr(provider)
    assert LLM_KEY not in repr(vars(provider))


def test_the_provider_repr_hides_credentials_in_the_base_url() -> None:
    settings = GatewaySettings(
        provider="openai",
        llm_base_url="https://agent:url-secret@models.example/v1?api-key=query-secret",
        llm_api_key=SecretStr(LLM_KEY),
    )
    provider = build_provider(settings)
    assert provider is not None
    shown = repr(provider)
    assert "https://models.example/v1" in shown
    assert "url-secret" not in shown
    assert "query-secret" not in shown


def test_the_baseline_provider_makes_no_provider_at_all() -> None:
    assert build_provider(GatewaySettings()) is None


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(
        request_timeout=1, connect_timeout=1, max_retries=5, backoff=0.2, backoff_max=1.0
    )
    for retry, ceiling in ((0, 0.2), (1, 0.4), (2, 0.8), (3, 1.0), (6, 1.0)):
        delays = {policy.delay(retry) for _ in range(50)}
        assert all(ceiling / 2 <= delay <= ceiling for delay in delays)
        assert len(delays) > 1, "jitter spreads retries out"


async def test_a_provider_that_hangs_up_without_answering_is_retried(
    start_gateway: StartGateway,
) -> None:
    accepted = 0

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        await reader.readuntil(b"\r\n\r\n")  # the request has arrived; close without a word
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        gateway = await start_gateway(llm_base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)
        response = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    finally:
        server.close()
        await server.wait_closed()
    # A dropped connection is a connection error (retried on a new connection), never an
    # unexpected failure of the RPC.
    assert (response.run.path, response.run.reason, response.run.attempts) == (
        run_pb2.RUN_PATH_FALLBACK,
        "PROVIDER_UNAVAILABLE",
        2,
    )
    assert accepted == 2
