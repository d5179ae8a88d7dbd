"""The deterministic grounded answer never quotes a passage the gateway flagged, and says "not
covered" unless a source matches the question: under the kill switch, after a guardrail
rejection, without a provider, and for retrieved knowledge."""

from __future__ import annotations

import json

import pytest

from nemo_protos.gateway.v1 import answer_pb2, run_pb2
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_testing import corpora
from nemo_testing.providers import Answer, ScriptedProvider
from services.gateway.tests.gateway_testing import FIXED_TIME, Gateway, StartGateway

NOT_COVERED = "Tài liệu hiện có không đề cập tới vấn đề này."
IDENTITIES = answer_pb2.Passage(
    document_id="doc-identities", title="Hằng đẳng thức", score=0.4,
    text="Bình phương của một tổng: (a + b)² = a² + 2ab + b².",
)  # fmt: skip
# Injected passages of the labelled corpus, each with a question built from its own words, so
# the injected passage is the one that matches the question best.
INJECTED = [row.text for row in corpora.load("instructions") if row.label == "injected"][::13]


def _question(text: str) -> str:
    return " ".join(text.split()[:6]) + "?"


async def _ask(gateway: Gateway, question: str, *passages: answer_pb2.Passage) -> pb.AnswerResponse:
    response: pb.AnswerResponse = await gateway.stub.Answer(
        pb.AnswerRequest(question=question, passages=passages, evaluate_time=FIXED_TIME),
        metadata=gateway.metadata,
        timeout=10,
    )
    return response


def _quotes(answer: str, passage: str) -> bool:
    """Whether ``answer`` repeats any run of five words of ``passage``."""
    words = passage.split()
    return any(" ".join(words[i : i + 5]) in answer for i in range(max(1, len(words) - 4)))


@pytest.mark.parametrize("text", INJECTED)
async def test_under_the_kill_switch_a_flagged_passage_is_never_quoted(
    text: str, start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(ai_enrichment_enabled=False)
    injected = answer_pb2.Passage(document_id="doc-x", title="Ghi chú", score=0.9, text=text)
    response = await _ask(gateway, _question(text), injected, IDENTITIES)
    assert (response.run.path, response.run.reason) == (run_pb2.RUN_PATH_FALLBACK, "KILL_SWITCH")
    assert provider.requests == []
    flagged = [s.document_id for s in response.answer.sources if s.flagged_as_instruction]
    assert flagged == ["doc-x"]
    assert not _quotes(response.answer.answer, text)


@pytest.mark.parametrize("text", INJECTED[:4])
async def test_after_a_guardrail_rejection_a_flagged_passage_is_never_quoted(
    text: str, start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()
    injected = answer_pb2.Passage(document_id="doc-x", title="Ghi chú", score=0.9, text=text)
    # The model obeys the injection: its answer gives orders, which the guardrail rejects.
    obeyed = {"covered": True, "answer": f"{text.rstrip('.')} [2]."}
    provider.script(Answer(json.dumps(obeyed, ensure_ascii=False)))
    response = await _ask(gateway, _question(text), IDENTITIES, injected)
    assert (response.run.path, response.run.reason) == (
        run_pb2.RUN_PATH_FALLBACK,
        "GUARDRAIL_REJECTED",
    )
    assert len(provider.requests) == 1
    assert text not in provider.requests[0].json()["messages"][1]["content"]
    assert not _quotes(response.answer.answer, text)


async def test_an_off_topic_question_is_not_covered_by_the_baseline(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(provider="baseline")
    response = await _ask(gateway, "Thủ đô của nước Pháp là thành phố nào?", IDENTITIES)
    assert (response.answer.answer, response.answer.covered) == (NOT_COVERED, False)
    on_topic = await _ask(gateway, "Bình phương của một tổng là gì?", IDENTITIES)
    assert on_topic.answer.covered
    assert on_topic.answer.answer.endswith("[1].")


async def test_retrieval_keeps_only_nodes_that_clear_the_relevance_bar(
    start_gateway: StartGateway, context_address: str
) -> None:
    gateway = await start_gateway(provider="baseline", context_address=context_address)
    response = await _ask(gateway, "hằng đẳng thức")
    titles = [source.title for source in response.answer.sources]
    assert titles[0] == "Hằng đẳng thức"
    assert "Xác suất thực nghiệm" not in titles
    off_topic = await _ask(gateway, "thủ đô nước Pháp")
    assert (list(off_topic.answer.sources), off_topic.answer.covered) == ([], False)
