"""What each wire format puts on the wire, as the provider server receives it."""

from __future__ import annotations

import json

from nemo_gateway.prompts.registry import REGISTRY
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_testing.providers import ANTHROPIC_PATH, OPENAI_PATH, Answer, ScriptedProvider
from services.gateway.tests.gateway_testing import StartGateway, variables

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
    gateway = await start_gateway(provider="openai", structured_output="json_schema")
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
    gateway = await start_gateway(provider="openai", structured_output="json_object")
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


def _field_names(schema: object) -> set[str]:
    """Every property name anywhere in a JSON Schema."""
    if isinstance(schema, dict):
        names = set(schema.get("properties", {}))
        return names.union(*(_field_names(value) for value in schema.values()))
    if isinstance(schema, list):
        return set().union(*(_field_names(value) for value in schema))
    return set()


async def test_anthropic_gets_the_output_schema_in_its_system_prompt(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="anthropic")
    provider.script(Answer(VALID))
    response = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    [request] = provider.requests
    system = request.json()["system"]
    spec = REGISTRY.get("coral.evaluate_item")
    assert spec is not None
    # The prompt's own rules first, then the schema as one compact JSON document.
    assert system.startswith("Bạn thẩm định")
    encoded = json.dumps(spec.output_schema, ensure_ascii=False, separators=(",", ":"))
    assert system.endswith("\n" + encoded)
    names = _field_names(spec.output_schema)
    assert names == {"verdict", "issues", "summary"}
    assert all(f'"{name}"' in system for name in names)
    # The run record still names the exact bytes sent.
    assert response.run.request_sha256 == request.sha256


async def test_openai_json_mode_gets_the_output_schema_in_its_system_prompt(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="openai", structured_output="json_object")
    provider.script(Answer(VALID))
    response = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    [request] = provider.requests
    messages = request.json()["messages"]
    spec = REGISTRY.get("coral.evaluate_item")
    assert spec is not None
    encoded = json.dumps(spec.output_schema, ensure_ascii=False, separators=(",", ":"))
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"].startswith("Bạn thẩm định")
    assert messages[0]["content"].endswith("\n" + encoded)
    assert response.run.request_sha256 == request.sha256


async def test_openai_schema_mode_does_not_repeat_the_schema_in_the_prompt(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="openai", structured_output="json_schema")
    provider.script(Answer(VALID))
    await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    system = provider.requests[0].json()["messages"][0]["content"]
    assert "additionalProperties" not in system
