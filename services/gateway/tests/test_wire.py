"""What each wire format puts on the wire, as the provider server receives it."""

from __future__ import annotations

import json

from nemo.gateway.v1 import gateway_service_pb2 as pb
from nemo_gateway.prompts.registry import REGISTRY
from nemo_testing.providers import ANTHROPIC_PATH, OPENAI_PATH, Answer, ScriptedProvider

from .gateway_testing import StartGateway, variables

REQUEST = pb.RunPromptRequest(
    prompt_id="coral.evaluate_item",
    variables=variables(stem="2 + 2 = ?", kind="short_answer", subject="math", grade=1),
)
VALID = json.dumps({"verdict": "accept", "issues": [], "summary": "Ổn."})


async def test_openai_chat_completions(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="openai")
    provider.script(Answer(VALID))
    await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    [request] = provider.requests
    body = request.json()
    assert request.path == OPENAI_PATH
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert (body["model"], body["max_tokens"], body["temperature"]) == (
        gateway.settings.model_fast,
        800,
        0,
    )
    assert "stream" not in body


async def test_openai_schema_mode_sends_the_prompts_schema_in_one_compact_encoding(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="openai", json_schema_mode=True)
    provider.script(Answer(VALID))
    response = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    [request] = provider.requests
    body = request.json()
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "coral_evaluate_item",
            "schema": REGISTRY.get("coral.evaluate_item").output_schema,  # type: ignore[union-attr]
        },
    }
    # The schema is encoded once per prompt and spliced in: the bytes must still be exactly
    # one compact encoding of the whole body, and the run record must name those bytes.
    assert request.body == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    assert response.run.request_sha256 == request.sha256


async def test_openai_without_schema_mode_asks_for_a_json_object(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="openai", json_schema_mode=False)
    provider.script(Answer(VALID))
    await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    assert provider.requests[0].json()["response_format"] == {"type": "json_object"}


async def test_anthropic_messages(start_gateway: StartGateway, provider: ScriptedProvider) -> None:
    gateway = await start_gateway(provider="anthropic")
    provider.script(Answer(VALID))
    await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    [request] = provider.requests
    body = request.json()
    assert request.path == ANTHROPIC_PATH
    assert request.headers["anthropic-version"] == "2023-06-01"
    # The system prompt is a top-level field; messages are the conversation only.
    assert body["system"].startswith("Bạn thẩm định")
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert (body["max_tokens"], body["temperature"]) == (800, 0)
