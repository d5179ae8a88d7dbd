"""GenAI spans: the semantic-convention attributes, no prompt or completion text, and one trace
from the gateway's caller to the context service."""

from __future__ import annotations

import asyncio
import json

import grpc.aio
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from nemo_gateway.prompts.learner import tutor_hint
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_testing.providers import Answer, Hang, HttpError, Reply, ScriptedProvider

from .gateway_testing import FIXED_TIME, Gateway, StartGateway, variables

HINT = "Hãy nhớ rằng hạng tử ở giữa là hai lần tích."
ITEM = {
    "stem": "Khai triển (x + 3)².", "kind": "short_answer", "answer_key": "x² + 6x + 9",
    "subject": "math", "grade": 8,
}  # fmt: skip


async def test_a_learner_prompt_span_has_genai_attributes_and_no_text(
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
    spans: InMemorySpanExporter,
) -> None:
    gateway = await start_gateway(context_address=context_address)
    provider.script(Answer(json.dumps({"hint": HINT}, ensure_ascii=False), input_tokens=321))
    spans.clear()
    response = await gateway.stub.RunPrompt(
        pb.RunPromptRequest(
            prompt_id="learner.tutor_hint",
            learner_id="L-2041-1",
            variables=variables(question="Khai triển (2x - 1)²"),
            evaluate_time=FIXED_TIME,
        ),
        metadata=gateway.metadata,
        timeout=10,
    )
    finished = spans.get_finished_spans()
    model = gateway.settings.model_fast
    [genai] = [span for span in finished if span.name == f"chat {model}"]
    attributes = dict(genai.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.request.model"] == model
    assert attributes["gen_ai.prompt.name"] == "learner.tutor_hint"
    assert attributes["nemo.prompt.version"] == tutor_hint.SPEC.version
    assert attributes["gen_ai.usage.input_tokens"] == 321
    assert attributes["gen_ai.usage.output_tokens"] == 12
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert attributes["nemo.input_ref"] == response.run.input_ref != ""
    assert attributes["nemo.run.path"] == "MODEL"

    # No span carries the prompt (instructions, learner context, question) or the completion.
    texts = [m["content"] for m in provider.requests[0].json()["messages"]]
    texts += [HINT, "Khai triển (2x - 1)²"]
    for span in finished:
        for value in (span.attributes or {}).values():
            assert not any(text in str(value) for text in texts), span.name

    # The context service's span is in the same trace as the gateway's.
    [context_span] = [
        s
        for s in finished
        if s.name.endswith("ContextService/BuildContext") and s.kind.name == "SERVER"
    ]
    assert context_span.context.trace_id == genai.context.trace_id


async def _evaluate(gateway: Gateway) -> pb.RunPromptResponse:
    response: pb.RunPromptResponse = await gateway.stub.RunPrompt(
        pb.RunPromptRequest(prompt_id="coral.evaluate_item", variables=variables(**ITEM)),
        metadata=gateway.metadata,
        timeout=10,
    )
    return response


def _genai(spans: InMemorySpanExporter, gateway: Gateway) -> list[ReadableSpan]:
    name = f"chat {gateway.settings.model_fast}"
    return [span for span in spans.get_finished_spans() if span.name == name]


@pytest.mark.parametrize(
    ("replies", "reason"),
    [
        ((Answer('{"verdict": "acc', truncated=True),), "TRUNCATED"),
        ((HttpError(400),), "PROVIDER_REJECTED"),
        ((Answer("không phải JSON"),) * 3, "ATTEMPTS_EXHAUSTED"),
        ((Answer(json.dumps({"verdict": "accept", "issues": ["x"], "summary": "y"})),),
         "GUARDRAIL_REJECTED"),
    ],
)  # fmt: skip
async def test_a_failed_run_sets_error_type_and_the_span_status(
    replies: tuple[Reply, ...],
    reason: str,
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    spans: InMemorySpanExporter,
) -> None:
    gateway = await start_gateway(max_retries=0)
    provider.script(*replies)
    spans.clear()
    response = await _evaluate(gateway)
    assert response.run.reason == reason
    [span] = _genai(spans, gateway)
    assert (span.attributes or {})["error.type"] == reason
    assert (span.status.status_code, span.status.description) == (StatusCode.ERROR, reason)


async def test_a_clean_run_has_no_error_and_a_cache_hit_no_model_span(
    start_gateway: StartGateway, provider: ScriptedProvider, spans: InMemorySpanExporter
) -> None:
    gateway = await start_gateway()
    provider.script(Answer(json.dumps({"verdict": "accept", "issues": [], "summary": "Tốt."})))
    spans.clear()
    first, second = await _evaluate(gateway), await _evaluate(gateway)
    assert (first.run.cache_hit, second.run.cache_hit) == (False, True)
    [span] = _genai(spans, gateway)
    assert "error.type" not in (span.attributes or {})
    assert span.status.status_code is StatusCode.UNSET
    assert len(provider.requests) == 1


async def test_a_provider_busy_run_is_marked_failed_too(
    start_gateway: StartGateway, provider: ScriptedProvider, spans: InMemorySpanExporter
) -> None:
    gateway = await start_gateway(provider_max_concurrency=1)
    provider.script(Hang(1.0), Answer("{}"))
    spans.clear()
    slow = asyncio.ensure_future(_evaluate(gateway))
    await provider.wait_for_requests(1)
    with pytest.raises(grpc.aio.AioRpcError):
        await gateway.stub.RunPrompt(
            pb.RunPromptRequest(
                prompt_id="coral.evaluate_item", variables=variables(**{**ITEM, "grade": 9})
            ),
            metadata=gateway.metadata,
            timeout=10,
        )
    await slow
    busy = [
        s
        for s in _genai(spans, gateway)
        if (s.attributes or {}).get("error.type") == "PROVIDER_BUSY"
    ]
    assert len(busy) == 1
    assert busy[0].status.status_code is StatusCode.ERROR
