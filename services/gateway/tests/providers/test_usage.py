"""Token usage the provider did not report is unknown on the run record and the span, never 0."""

from __future__ import annotations

import json

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from nemo_gateway.providers.base import ChatMessage, ModelRequest, StreamEnd, Usage
from nemo_gateway.providers.factory import build_provider
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_testing.providers import Answer, Hang, ScriptedProvider, Stream
from services.gateway.tests.gateway_testing import StartGateway, variables

REQUEST = pb.RunPromptRequest(
    prompt_id="coral.evaluate_item",
    variables=variables(stem="2 + 2 = ?", kind="short_answer", subject="math", grade=1),
)
VALID = json.dumps({"verdict": "accept", "issues": [], "summary": "Ổn."})


def _usage_attributes(spans: InMemorySpanExporter) -> dict[str, object]:
    """The usage attributes of the last prompt span (the exporter is the session's)."""
    span = [s for s in spans.get_finished_spans() if s.name.startswith("chat")][-1]
    attributes = dict(span.attributes or {})
    return {key: value for key, value in attributes.items() if key.startswith("gen_ai.usage")}


async def test_reported_usage_is_summed_over_the_attempts(
    start_gateway: StartGateway, provider: ScriptedProvider, spans: InMemorySpanExporter
) -> None:
    gateway = await start_gateway(provider="openai")
    provider.script(Answer("not json", input_tokens=30, output_tokens=5), Answer(VALID))
    response = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    usage = response.run.usage
    assert (usage.input_tokens, usage.output_tokens) == (70, 17)
    assert not (usage.input_tokens_unknown)
    assert not (usage.output_tokens_unknown)
    assert _usage_attributes(spans) == {
        "gen_ai.usage.input_tokens": 70,
        "gen_ai.usage.output_tokens": 17,
    }


async def test_one_unreported_attempt_makes_the_total_unknown(
    start_gateway: StartGateway, provider: ScriptedProvider, spans: InMemorySpanExporter
) -> None:
    gateway = await start_gateway(provider="openai")
    provider.script(Answer("not json"), Answer(VALID, usage=False))
    response = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    usage = response.run.usage
    assert (usage.input_tokens_unknown, usage.output_tokens_unknown) == (True, True)
    assert (usage.input_tokens, usage.output_tokens) == (0, 0)
    assert _usage_attributes(spans) == {}


async def test_a_request_that_timed_out_used_an_unknown_number_of_tokens(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="openai", request_timeout_seconds=0.3, max_retries=0)
    provider.script(Hang(5))
    response = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    assert response.run.reason == "PROVIDER_TIMEOUT"
    assert response.run.usage.input_tokens_unknown
    assert response.run.usage.output_tokens_unknown


async def test_a_run_that_asked_no_model_used_no_tokens(start_gateway: StartGateway) -> None:
    gateway = await start_gateway(provider="baseline")
    response = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    usage = response.run.usage
    assert (usage.input_tokens, usage.output_tokens) == (0, 0)
    assert not (usage.input_tokens_unknown)
    assert not (usage.output_tokens_unknown)


async def test_a_stream_without_usage_ends_with_unknown_usage(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="openai")
    http = build_provider(gateway.settings)
    assert http is not None
    provider.script_stream(Stream(("Xin ", "chào"), usage=False), Stream(("Xin ", "chào")))
    request = ModelRequest("m", (ChatMessage("user", "hi"),), 10, 0.0, None)
    ends: list[StreamEnd] = []
    try:
        for _ in range(2):
            async with http.open_stream(request, None) as stream:
                ends += [e async for e in stream.events() if isinstance(e, StreamEnd)]
    finally:
        await http.aclose()
    assert [end.usage for end in ends] == [Usage(None, None), Usage(40, 2)]
