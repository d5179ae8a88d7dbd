"""Each OpenAI-compatible server's dialect on the wire, and the requests servers refuse.

Every case goes through the scripted provider server: the body the server received, the reason
the run record gives and the number of requests made are what is asserted.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from nemo_gateway.prompts.registry import REGISTRY
from nemo_gateway.providers.schemas import OPENAI_STRICT
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_protos.gateway.v1 import run_pb2
from nemo_testing.providers import Answer, HttpError, ScriptedProvider, Stream
from services.gateway.tests.gateway_testing import StartGateway, variables

REQUEST = pb.RunPromptRequest(
    prompt_id="coral.evaluate_item",
    variables=variables(stem="2 + 2 = ?", kind="short_answer", subject="math", grade=1),
)
VALID = json.dumps({"verdict": "accept", "issues": [], "summary": "Ổn."})
SCHEMA = REGISTRY.get("coral.evaluate_item").output_schema  # type: ignore[union-attr]

#: What llama-cpp-python's server answers for a body it cannot validate (here a response_format
#: of type json_schema): FastAPI's validation error, caught by its route handler as a 500.
LLAMA_CPP_PYTHON_INVALID = HttpError(
    500,
    body={
        "error": {
            "message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
            "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
            "'ctx': {'expected': \"'text' or 'json_object'\"}}]",
            "type": "internal_server_error",
            "param": None,
            "code": None,
        }
    },
)


async def _run(gateway: Any, request: pb.RunPromptRequest = REQUEST) -> pb.RunPromptResponse:
    response: pb.RunPromptResponse = await gateway.stub.RunPrompt(
        request, metadata=gateway.metadata, timeout=10
    )
    return response


@pytest.mark.parametrize(
    ("overrides", "response_format", "schema_in_prompt"),
    [
        (
            {"structured_output": "json_schema"},
            {
                "type": "json_schema",
                "json_schema": {"name": "coral_evaluate_item", "schema": SCHEMA},
            },
            False,
        ),
        ({"llm_server": "llama-cpp-python"}, {"type": "json_object", "schema": SCHEMA}, False),
        ({"structured_output": "json_object"}, {"type": "json_object"}, True),
        ({"structured_output": "prompt"}, None, True),
        (
            {"llm_server": "ollama"},
            {
                "type": "json_schema",
                "json_schema": {"name": "coral_evaluate_item", "schema": SCHEMA},
            },
            False,
        ),
    ],
    ids=["json_schema", "llama-cpp-python", "json_object", "prompt", "ollama"],
)
async def test_each_dialect_sends_the_schema_its_own_way(
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    overrides: dict[str, str],
    response_format: dict[str, Any] | None,
    schema_in_prompt: bool,
) -> None:
    gateway = await start_gateway(provider="openai", **overrides)
    provider.script(Answer(VALID))
    response = await _run(gateway)
    [request] = provider.requests
    body = request.json()
    assert body.get("response_format") == response_format
    encoded = json.dumps(SCHEMA, ensure_ascii=False, separators=(",", ":"))
    assert body["messages"][0]["content"].endswith("\n" + encoded) is schema_in_prompt
    assert "max_completion_tokens" not in body
    # Whatever the dialect, the run record names the exact bytes the server received.
    assert request.body == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    assert response.run.request_sha256 == request.sha256
    assert response.run.path == run_pb2.RUN_PATH_MODEL


def _objects(schema: Any) -> list[dict[str, Any]]:
    """Every object schema anywhere in a JSON Schema."""
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if "properties" in schema:
            found.append(schema)
        for value in schema.values():
            found += _objects(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _objects(value)
    return found


def _keywords(schema: Any, *, named: bool = False) -> set[str]:
    """Every keyword used anywhere in a JSON Schema (property and definition names aside)."""
    if isinstance(schema, list):
        return set().union(*(_keywords(value) for value in schema))
    if not isinstance(schema, dict):
        return set()
    if named:
        return set().union(*(_keywords(value) for value in schema.values()))
    keys = set(schema)
    for key, value in schema.items():
        keys |= _keywords(value, named=key in ("properties", "$defs"))
    return keys


async def test_openai_itself_gets_strict_schemas_and_max_completion_tokens(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="openai", llm_server="openai", model_fast="gpt-4.1")
    provider.script(Answer(VALID))
    response = await _run(gateway)
    body = provider.requests[0].json()
    assert (body["max_completion_tokens"], "max_tokens" in body) == (800, False)
    assert "reasoning_effort" not in body, "gpt-4.1 does not reason: it would refuse the field"
    sent = body["response_format"]["json_schema"]
    assert sent["strict"] is True
    for node in _objects(sent["schema"]):
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
    assert _keywords(sent["schema"]) <= OPENAI_STRICT.keywords
    assert response.run.path == run_pb2.RUN_PATH_MODEL


@pytest.mark.parametrize("prompt_id", [spec.prompt_id for spec in REGISTRY])
def test_every_prompt_schema_has_a_strict_form_in_the_strict_subset(prompt_id: str) -> None:
    from nemo_gateway.providers.schemas import constrained_schema

    spec = REGISTRY.get(prompt_id)
    assert spec is not None
    strict = constrained_schema(spec.output_schema, OPENAI_STRICT)
    if spec.output_schema.get("type") != "object":
        assert strict is None
        return
    assert strict is not None
    assert _keywords(strict) <= OPENAI_STRICT.keywords
    for node in _objects(strict):
        assert node["additionalProperties"] is False
        assert set(node["required"]) == set(node["properties"])
    # The shape is kept: the same properties at the top.
    assert set(strict["properties"]) == set(spec.output_schema["properties"])


@pytest.mark.parametrize(
    ("model", "effort"), [("o4-mini", "low"), ("gpt-5-mini", "low"), ("gpt-4o", None)]
)
async def test_openai_reasoning_models_get_a_reasoning_effort(
    start_gateway: StartGateway, provider: ScriptedProvider, model: str, effort: str | None
) -> None:
    gateway = await start_gateway(provider="openai", llm_server="openai", model_fast=model)
    provider.script(Answer(VALID))
    await _run(gateway)
    assert provider.requests[0].json().get("reasoning_effort") == effort


@pytest.mark.parametrize("server", ["nim", "vllm", "llama-cpp"])
async def test_reasoning_is_switched_off_through_the_chat_template_where_the_server_takes_it(
    start_gateway: StartGateway, provider: ScriptedProvider, server: str
) -> None:
    gateway = await start_gateway(provider="openai", llm_server=server)
    provider.script(Answer(VALID))
    await _run(gateway)
    body = provider.requests[0].json()
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["max_tokens"] == 800


@pytest.mark.parametrize("server", ["llama-cpp-python", "ollama", "other"])
async def test_servers_without_a_reasoning_switch_get_no_extra_fields(
    start_gateway: StartGateway, provider: ScriptedProvider, server: str
) -> None:
    gateway = await start_gateway(provider="openai", llm_server=server)
    provider.script(Answer(VALID))
    await _run(gateway)
    body = provider.requests[0].json()
    assert not {"chat_template_kwargs", "reasoning_effort"} & set(body)


@pytest.mark.parametrize(
    "refusal",
    [
        HttpError(400, body={"error": {"type": "invalid_request_error", "message": "bad"}}),
        HttpError(422, body={"detail": [{"loc": ["body", "messages"], "msg": "field required"}]}),
        HttpError(404, body={"error": {"message": "model not found"}}),
        LLAMA_CPP_PYTHON_INVALID,
        HttpError(500, body={"error": {"type": "invalid_request_error", "message": "x"}}),
        HttpError(500, body={"error": {"message": "1 validation error for Request", "code": 500}}),
    ],
    ids=["400", "422", "404", "500-llama-cpp-python", "500-invalid-type", "500-validation"],
)
async def test_a_request_the_server_refuses_is_never_retried_and_says_so(
    start_gateway: StartGateway, provider: ScriptedProvider, refusal: HttpError
) -> None:
    gateway = await start_gateway(provider="openai", max_retries=3)
    provider.script(refusal, Answer(VALID))
    response = await _run(gateway)
    assert (response.run.path, response.run.reason) == (
        run_pb2.RUN_PATH_FALLBACK,
        "PROVIDER_REJECTED",
    )
    assert len(provider.requests) == 1
    assert response.run.attempts == 1
    # The server received a body, so the run record names it.
    assert response.run.request_sha256 == provider.requests[0].sha256


@pytest.mark.parametrize(
    "failure",
    [
        HttpError(500, body={"error": {"message": "CUDA out of memory", "type": "server_error"}}),
        HttpError(503, body={"error": {"message": "overloaded"}}),
        HttpError(502, body="<html>bad gateway</html>"),
    ],
    ids=["500-server", "503", "502-html"],
)
async def test_a_failing_server_is_retried_and_reported_unavailable(
    start_gateway: StartGateway, provider: ScriptedProvider, failure: HttpError
) -> None:
    gateway = await start_gateway(provider="openai", max_retries=2)
    provider.script(failure, failure, failure, Answer(VALID))
    response = await _run(gateway)
    assert (response.run.reason, len(provider.requests)) == ("PROVIDER_UNAVAILABLE", 3)


async def test_a_refused_stream_is_not_retried_either(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    from nemo_gateway.providers.base import ChatMessage, ModelRequest, ProviderRejected
    from nemo_gateway.providers.factory import build_provider

    gateway = await start_gateway(provider="openai", max_retries=3)
    http = build_provider(gateway.settings)
    assert http is not None
    provider.script_stream(LLAMA_CPP_PYTHON_INVALID, Stream(("x",)))
    request = ModelRequest("m", (ChatMessage("user", "hi"),), 10, 0.0, None)
    try:
        with pytest.raises(ProviderRejected) as raised:
            async with http.open_stream(request, None):
                pass
    finally:
        await http.aclose()
    assert (raised.value.requests, len(provider.requests)) == (1, 1)
    assert "internal_server_error" in str(raised.value)
    assert "Input should be" not in str(raised.value), "the message may quote the request"


async def test_anthropic_models_with_structured_outputs_get_the_schema_as_output_config(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="anthropic", model_fast="claude-sonnet-4-5-20250929")
    provider.script(Answer(VALID))
    response = await _run(gateway)
    body = provider.requests[0].json()
    sent = body["output_config"]["format"]
    assert sent["type"] == "json_schema"
    for node in _objects(sent["schema"]):
        assert node["additionalProperties"] is False
    assert set(sent["schema"]["properties"]) == set(SCHEMA["properties"])
    assert "additionalProperties" not in body["system"], "the schema is not repeated"
    assert response.run.path == run_pb2.RUN_PATH_MODEL


async def test_older_anthropic_models_get_the_schema_in_the_system_prompt(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="anthropic", model_fast="claude-3-5-haiku-20241022")
    provider.script(Answer(VALID))
    await _run(gateway)
    body = provider.requests[0].json()
    assert "output_config" not in body
    encoded = json.dumps(SCHEMA, ensure_ascii=False, separators=(",", ":"))
    assert body["system"].endswith("\n" + encoded)


async def test_the_local_provider_speaks_llama_cpp_pythons_dialect_to_the_local_model(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="local", llm_base_url=provider.openai_base_url)
    provider.script(Answer(VALID))
    response = await _run(gateway)
    body = provider.requests[0].json()
    assert body["model"] == "SmolLM2-135M-Instruct"
    assert body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert (response.run.provider, response.run.model) == ("local", "SmolLM2-135M-Instruct")


async def test_the_output_token_limit_caps_every_prompt(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="openai", output_token_limit=16)
    provider.script(Answer(VALID))
    await _run(gateway)
    assert provider.requests[0].json()["max_tokens"] == 16


@pytest.mark.parametrize(
    ("server", "model", "field", "on", "off"),
    [
        ("nim", "nvidia/nemotron-3-nano-30b-a3b", "chat_template_kwargs",
         {"enable_thinking": True}, {"enable_thinking": False}),
        ("openai", "o4-mini", "reasoning_effort", "medium", "low"),
    ],
)  # fmt: skip
def test_a_prompt_that_may_reason_is_sent_with_reasoning_on(
    server: str, model: str, field: str, on: object, off: object
) -> None:
    from nemo_gateway.providers.base import ChatMessage, ModelRequest
    from nemo_gateway.providers.openai import OpenAIChatFormat
    from nemo_gateway.providers.servers import SERVERS

    wire = OpenAIChatFormat(SERVERS[server])  # type: ignore[index]
    for reasoning, expected in ((True, on), (False, off)):
        request = ModelRequest(
            model, (ChatMessage("user", "x"),), 10, 0.0, None, reasoning=reasoning
        )
        assert wire.body(request, stream=False)[field] == expected
