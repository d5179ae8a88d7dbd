"""The RPC surface: ListPrompts, required deadlines, and precise errors for requests that cannot
run."""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import Any

import grpc
import pytest
from google.protobuf import timestamp_pb2

from nemo_core.errors import error_details
from nemo_protos.gateway.v1 import answer_pb2, prompt_pb2
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_testing.providers import Answer, ScriptedProvider

from .gateway_testing import StartGateway, variables

PASSAGE = answer_pb2.Passage(document_id="doc-1", title="Hằng đẳng thức", text="(a + b)².")
PROMPT_IDS = [
    "coral.evaluate_item",
    "coral.generate_items",
    "knowledge.answer",
    "learner.plan_explanation",
    "learner.portrait_summary",
    "learner.tutor_hint",
    "tutor.chat_reply",
    "tutor.summarize_conversation",
]


async def test_list_prompts_describes_the_registry(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    response = await gateway.stub.ListPrompts(
        pb.ListPromptsRequest(), metadata=gateway.metadata, timeout=5
    )
    by_id = {p.prompt_id: p for p in response.prompts}
    assert [p.prompt_id for p in response.prompts] == PROMPT_IDS
    assert all(p.temperature == 0 and p.version for p in response.prompts)
    assert (by_id["coral.generate_items"].purpose, by_id["learner.tutor_hint"].purpose) == (
        "",
        "tutor_hint",
    )
    assert by_id["tutor.chat_reply"].streamed
    assert by_id["tutor.summarize_conversation"].rpc == "internal"
    assert by_id["knowledge.answer"].rpc == "Answer"
    assert by_id["coral.evaluate_item"].model_tier == prompt_pb2.MODEL_TIER_FAST
    schema = json.loads(by_id["coral.generate_items"].output_schema_json)
    assert schema["additionalProperties"] is False
    inputs = json.loads(by_id["coral.generate_items"].variables_schema_json)
    assert inputs["additionalProperties"] is False
    assert "learner_id" not in inputs["properties"]


@pytest.mark.parametrize(
    ("request_", "code", "reason"),
    [
        (
            pb.RunPromptRequest(prompt_id="coral.nonexistent"),
            grpc.StatusCode.NOT_FOUND,
            "UNKNOWN_PROMPT",
        ),
        (
            pb.RunPromptRequest(prompt_id="tutor.chat_reply"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "WRONG_RPC_FOR_PROMPT",
        ),
        (
            pb.RunPromptRequest(prompt_id="tutor.summarize_conversation"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "WRONG_RPC_FOR_PROMPT",
        ),
        (
            pb.RunPromptRequest(
                prompt_id="coral.evaluate_item",
                variables=variables(stem="x", kind="essay", subject="math", grade=13),
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_VARIABLES",
        ),
        (
            pb.RunPromptRequest(prompt_id="coral.generate_items", variables=variables(topic="")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_VARIABLES",
        ),
    ],
)
async def test_requests_that_cannot_run_get_a_precise_error_and_send_nothing(
    request_: pb.RunPromptRequest,
    code: grpc.StatusCode,
    reason: str,
    start_gateway: StartGateway,
    provider: ScriptedProvider,
) -> None:
    gateway = await start_gateway()
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await gateway.stub.RunPrompt(request_, metadata=gateway.metadata, timeout=5)
    assert failed.value.code() is code
    details = error_details(failed.value)
    assert (details.reason, details.domain) == (reason, "gateway")
    assert provider.requests == []


async def test_invalid_variables_name_the_fields_without_echoing_values(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway()
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await gateway.stub.RunPrompt(
            pb.RunPromptRequest(
                prompt_id="coral.evaluate_item",
                variables=variables(stem="secret-stem", kind="essay", subject="math", grade=8),
            ),
            metadata=gateway.metadata,
            timeout=5,
        )
    message = failed.value.details() or ""
    assert "kind" in message
    assert "secret-stem" not in message


async def test_a_caller_without_a_token_is_unauthenticated(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await gateway.stub.ListPrompts(pb.ListPromptsRequest(), timeout=5)
    assert failed.value.code() is grpc.StatusCode.UNAUTHENTICATED


async def test_every_rpc_that_calls_a_dependency_requires_a_deadline(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()
    calls: dict[str, Awaitable[object]] = {
        "RunPrompt": gateway.stub.RunPrompt(
            pb.RunPromptRequest(
                prompt_id="coral.evaluate_item",
                variables=variables(stem="1 + 1 = ?", kind="short_answer", subject="math", grade=1),
            ),
            metadata=gateway.metadata,
        ),
        "Answer": gateway.stub.Answer(
            pb.AnswerRequest(question="Q?", passages=[PASSAGE]), metadata=gateway.metadata
        ),
        "StreamPrompt": gateway.stub.StreamPrompt(
            pb.StreamPromptRequest(
                prompt_id="tutor.chat_reply", session_id="S", turn_id="T", user_message="Chào"
            ),
            metadata=gateway.metadata,
        ).read(),
    }
    for rpc, call in calls.items():
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call
        assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT, rpc
        assert error_details(refused.value).reason == "DEADLINE_REQUIRED", rpc
    assert provider.requests == []
    # Describing the prompts calls nothing else and needs no deadline.
    listed = await gateway.stub.ListPrompts(pb.ListPromptsRequest(), metadata=gateway.metadata)
    assert listed.prompts


def _evaluate_item(**fields: Any) -> pb.RunPromptRequest:
    return pb.RunPromptRequest(
        prompt_id="coral.evaluate_item",
        variables=variables(stem="1 + 1 = ?", kind="short_answer", subject="math", grade=1),
        **fields,
    )


def _with_unset_value() -> pb.RunPromptRequest:
    request = _evaluate_item()
    # A Value with no kind set: legal on the wire, holding nothing.
    request.variables.fields["answer_key"].SetInParent()
    return request


@pytest.mark.parametrize(
    ("rpc", "request_", "reason"),
    [
        (
            "RunPrompt",
            _evaluate_item(evaluate_time=timestamp_pb2.Timestamp(seconds=10**12)),
            "INVALID_EVALUATE_TIME",
        ),
        (
            "RunPrompt",
            _evaluate_item(evaluate_time=timestamp_pb2.Timestamp(seconds=0, nanos=-1)),
            "INVALID_EVALUATE_TIME",
        ),
        (
            "Answer",
            pb.AnswerRequest(
                question="Q?",
                passages=[PASSAGE],
                evaluate_time=timestamp_pb2.Timestamp(seconds=-(10**12)),
            ),
            "INVALID_EVALUATE_TIME",
        ),
        ("RunPrompt", _with_unset_value(), "INVALID_VARIABLES"),
        (
            "Answer",
            pb.AnswerRequest(
                question="Q?", passages=[answer_pb2.Passage(document_id="d", text=" \n\t ")]
            ),
            "INVALID_VARIABLES",
        ),
        ("Answer", pb.AnswerRequest(question="   ", passages=[PASSAGE]), "INVALID_VARIABLES"),
    ],
)
async def test_malformed_input_is_an_invalid_argument_and_sends_nothing(
    rpc: str,
    request_: pb.RunPromptRequest | pb.AnswerRequest,
    reason: str,
    start_gateway: StartGateway,
    provider: ScriptedProvider,
) -> None:
    gateway = await start_gateway()
    provider.script(Answer(json.dumps({"covered": False, "answer": ""})))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await getattr(gateway.stub, rpc)(request_, metadata=gateway.metadata, timeout=5)
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    details = error_details(refused.value)
    assert (details.reason, details.domain) == (reason, "gateway")
    assert provider.requests == []


async def test_a_chat_turn_with_an_invalid_evaluate_time_is_refused(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway()
    call = gateway.stub.StreamPrompt(
        pb.StreamPromptRequest(
            prompt_id="tutor.chat_reply",
            session_id="S",
            turn_id="T",
            user_message="Chào",
            evaluate_time=timestamp_pb2.Timestamp(seconds=10**12),
        ),
        metadata=gateway.metadata,
        timeout=5,
    )
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call.read()
    assert error_details(refused.value).reason == "INVALID_EVALUATE_TIME"
