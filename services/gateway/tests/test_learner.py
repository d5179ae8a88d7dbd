"""Learner prompts run on the bundle the real context service builds for their purpose."""

from __future__ import annotations

import json

import grpc
import pytest
from google.protobuf import timestamp_pb2

from nemo_context.pseudonym import Pseudonymizer
from nemo_core.errors import error_details
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_protos.gateway.v1 import run_pb2
from nemo_testing.providers import Answer, ScriptedProvider

from .gateway_testing import FIXED_TIME, PSEUDONYM_KEY, StartGateway, variables


async def test_a_hint_carries_the_learner_context_and_names_its_snapshot(
    start_gateway: StartGateway, provider: ScriptedProvider, context_address: str
) -> None:
    gateway = await start_gateway(context_address=context_address)
    provider.script(
        Answer(json.dumps({"hint": "Hãy nhớ hạng tử ở giữa là 2ab."}, ensure_ascii=False))
    )
    response = await gateway.stub.RunPrompt(
        pb.RunPromptRequest(
            prompt_id="learner.tutor_hint",
            learner_id="L-2041-1",
            variables=variables(node_id="math-08-algebraic-identities"),
            evaluate_time=FIXED_TIME,
        ),
        metadata=gateway.metadata,
        timeout=10,
    )
    assert response.run.path == run_pb2.RUN_PATH_MODEL
    assert response.output.tutor_hint.hint == "Hãy nhớ hạng tử ở giữa là 2ab."
    assert response.output.tutor_hint.focus_node_id == "math-08-algebraic-identities"
    assert response.output.tutor_hint.disclaimer
    assert response.run.input_ref.startswith("ai-context/")
    sent = json.dumps(provider.requests[0].json(), ensure_ascii=False)
    # The pseudonymous rendered context went into the prompt; the internal id did not.
    assert "nemo_" in sent
    assert "L-2041-1" not in sent


async def test_a_learner_prompt_without_a_learner_is_refused(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await gateway.stub.RunPrompt(
            pb.RunPromptRequest(prompt_id="learner.plan_explanation"),
            metadata=gateway.metadata,
            timeout=10,
        )
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(refused.value).reason == "LEARNER_REQUIRED"


async def test_no_prompt_is_sent_when_the_context_service_is_unavailable(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()  # its context address has nothing listening
    provider.script(Answer(json.dumps({"hint": "x"})))
    with pytest.raises(grpc.aio.AioRpcError) as unavailable:
        await gateway.stub.RunPrompt(
            pb.RunPromptRequest(prompt_id="learner.tutor_hint", learner_id="L-2041-1"),
            metadata=gateway.metadata,
            timeout=10,
        )
    assert unavailable.value.code() is grpc.StatusCode.UNAVAILABLE
    details = error_details(unavailable.value)
    assert (details.reason, details.domain) == ("CONTEXT_UNAVAILABLE", "gateway")
    assert provider.requests == []


async def test_an_unknown_learner_is_reported_as_the_context_service_refused_it(
    start_gateway: StartGateway, provider: ScriptedProvider, context_address: str
) -> None:
    gateway = await start_gateway(context_address=context_address)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await gateway.stub.RunPrompt(
            pb.RunPromptRequest(prompt_id="learner.portrait_summary", learner_id="L-2041-404"),
            metadata=gateway.metadata,
            timeout=10,
        )
    details = error_details(refused.value)
    assert details.reason == "CONTEXT_REJECTED"
    assert refused.value.code() is grpc.StatusCode.NOT_FOUND, details
    assert provider.requests == []


REF = Pseudonymizer(PSEUDONYM_KEY.encode()).learner_ref("L-2041-1")


@pytest.mark.parametrize(
    ("prompt_id", "draft"),
    [
        (
            "learner.plan_explanation",
            {"explanation": "Kế hoạch đi từ dễ đến khó.", "key_points": ["Ôn lại {point}"]},
        ),
        (
            "learner.portrait_summary",
            {"summary": "Em chăm chỉ.", "strengths": ["{point}"], "growth_areas": []},
        ),
        (
            "learner.portrait_summary",
            {"summary": "Em chăm chỉ.", "strengths": [], "growth_areas": ["Củng cố {point}"]},
        ),
    ],
)
async def test_the_pseudonym_in_any_learner_facing_list_entry_is_rejected(
    prompt_id: str,
    draft: dict[str, object],
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
) -> None:
    gateway = await start_gateway(context_address=context_address, cache_max_entries=0)

    async def run(point: str) -> pb.RunPromptResponse:
        answer = json.dumps(draft, ensure_ascii=False).replace("{point}", point)
        provider.script(Answer(answer))
        response: pb.RunPromptResponse = await gateway.stub.RunPrompt(
            pb.RunPromptRequest(
                prompt_id=prompt_id, learner_id="L-2041-1", evaluate_time=FIXED_TIME
            ),
            metadata=gateway.metadata,
            timeout=10,
        )
        return response

    clean = await run("hằng đẳng thức")
    assert (clean.run.path, clean.run.reason) == (run_pb2.RUN_PATH_MODEL, "")
    leaking = await run(f"hằng đẳng thức của {REF}")
    assert (leaking.run.path, leaking.run.reason) == (
        run_pb2.RUN_PATH_FALLBACK,
        "GUARDRAIL_REJECTED",
    )
    assert REF not in str(leaking.output)
    assert len(provider.requests) == 2


async def test_the_evaluation_time_reaches_the_context_service(
    start_gateway: StartGateway, provider: ScriptedProvider, context_address: str
) -> None:
    gateway = await start_gateway(context_address=context_address, cache_max_entries=0)
    # Before the seeded evidence and models, at the fixed time after them, then the first again.
    early = timestamp_pb2.Timestamp(seconds=FIXED_TIME.seconds - 86_400 * 200)
    provider.script(*[Answer(json.dumps({"hint": "Gợi ý."}, ensure_ascii=False))] * 3)
    for when in (early, FIXED_TIME, early):
        await gateway.stub.RunPrompt(
            pb.RunPromptRequest(
                prompt_id="learner.tutor_hint", learner_id="L-2041-1", evaluate_time=when
            ),
            metadata=gateway.metadata,
            timeout=10,
        )
    prompts = [request.json()["messages"][1]["content"] for request in provider.requests]
    # The same request and time build the same bundle; another time, another one.
    assert prompts[0] == prompts[2]
    assert prompts[0] != prompts[1]
