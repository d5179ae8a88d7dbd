"""Reasoning text is never the answer: dropped before parsing and before streaming."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from nemo_gateway.providers.reasoning import ReasoningFilter, strip_reasoning
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_protos.gateway.v1 import run_pb2
from nemo_testing.providers import Answer, ScriptedProvider
from services.gateway.tests.gateway_testing import StartGateway, variables

REQUEST = pb.RunPromptRequest(
    prompt_id="coral.evaluate_item",
    variables=variables(stem="2 + 2 = ?", kind="short_answer", subject="math", grade=1),
)
VALID = {"verdict": "accept", "issues": [], "summary": "Ổn."}

_pieces = st.sampled_from(["<think>", "</think>", "<th", "ink>", "</", " ", "\n", "{", "a", "}"])
_texts = st.lists(st.one_of(_pieces, st.text(max_size=4)), max_size=12).map("".join)


@given(_texts, st.lists(st.integers(0, 40), max_size=6))
def test_the_stream_filter_drops_exactly_what_the_whole_text_filter_drops(
    text: str, cuts: list[int]
) -> None:
    points = sorted({min(cut, len(text)) for cut in cuts})
    deltas = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    reasoning = ReasoningFilter()
    streamed = "".join(reasoning.feed(delta) for delta in deltas) + reasoning.flush()
    assert streamed == strip_reasoning(text)


@given(st.text(), st.text().filter(lambda answer: "</think>" not in answer))
def test_a_leading_reasoning_block_is_dropped_and_the_answer_kept(
    thinking: str, answer: str
) -> None:
    thinking = thinking.replace("</think>", "")
    assert strip_reasoning(f"<think>{thinking}</think>\n{answer}") == answer.lstrip()
    assert strip_reasoning(f"  <think>{thinking}") == ""
    if not answer.lstrip().startswith("<think>"):
        assert strip_reasoning(answer) == answer


async def test_a_reasoning_block_in_the_content_is_not_parsed_as_the_answer(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="openai")
    thinking = 'Maybe {"verdict": "reject"} ... no.'
    provider.script(Answer(f"<think>{thinking}</think>\n{json.dumps(VALID)}"))
    response = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    assert response.run.path == run_pb2.RUN_PATH_MODEL
    assert response.output.item_evaluation.verdict == "accept"


async def test_reasoning_fields_are_never_the_answer(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="openai")
    provider.script(Answer(json.dumps(VALID), reasoning=json.dumps({**VALID, "verdict": "x"})))
    response = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    assert response.run.path == run_pb2.RUN_PATH_MODEL


async def test_a_model_that_spent_its_limit_thinking_is_truncated_not_refused(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="openai")
    provider.script(Answer(None, truncated=True, reasoning="step 1, step 2, ..."))
    response = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    assert (response.run.path, response.run.reason) == (run_pb2.RUN_PATH_FALLBACK, "TRUNCATED")


async def test_anthropic_thinking_blocks_are_not_the_answer(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="anthropic")
    provider.script(Answer(json.dumps(VALID), reasoning='{"verdict": "reject"}'))
    response = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    assert response.run.path == run_pb2.RUN_PATH_MODEL
    assert response.output.item_evaluation.verdict == "accept"
