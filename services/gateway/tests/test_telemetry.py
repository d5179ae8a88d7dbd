"""GenAI spans: the semantic-convention attributes, no prompt or completion text, and one trace
from the gateway's caller to the context service."""

from __future__ import annotations

import json

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from nemo.gateway.v1 import gateway_service_pb2 as pb
from nemo_testing.providers import Answer, ScriptedProvider

from .gateway_testing import FIXED_TIME, StartGateway, variables

HINT = "Hãy nhớ rằng hạng tử ở giữa là hai lần tích."


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
            evaluated_at=FIXED_TIME,
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
    assert attributes["nemo.prompt.version"] == "1"
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
