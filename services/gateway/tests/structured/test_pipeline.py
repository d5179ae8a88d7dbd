"""The structured-output pipeline end to end: gRPC in, a real HTTP provider server speaking the
OpenAI or Anthropic wire format with scripted replies, path + reason + request count out."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from typing import Any

import grpc
import pytest

from nemo_core.errors import error_details
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.coral import evaluate_item
from nemo_gateway.prompts.registry import REGISTRY
from nemo_gateway.prompts.spec import PromptInput
from nemo_gateway.providers.factory import build_provider
from nemo_gateway.reasons import RunPath
from nemo_gateway.settings import GatewaySettings
from nemo_gateway.structured.pipeline import run_model
from nemo_protos.gateway.v1 import answer_pb2, run_pb2
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_testing.providers import Answer, Hang, HttpError, ScriptedProvider
from services.gateway.tests.gateway_testing import (
    FIXED_TIME,
    LLM_KEY,
    Gateway,
    StartGateway,
    variables,
)
from services.gateway.tests.structured import test_latex as latex_corpus

ITEM: dict[str, Any] = {
    "stem": "Khai triển (x + 3)².",
    "kind": "multiple_choice",
    "choices": ["x² + 9", "x² + 6x + 9", "x² + 3x + 9", "2x + 6"],
    "answer_key": "x² + 6x + 9",
    "subject": "math",
    "grade": 8,
}
VALID = {"verdict": "accept", "issues": [], "summary": "Câu hỏi rõ ràng, đáp án duy nhất."}

WIRES = pytest.mark.parametrize("wire", ["openai", "anthropic"])


def _request() -> pb.RunPromptRequest:
    return pb.RunPromptRequest(
        prompt_id="coral.evaluate_item", variables=variables(**ITEM), evaluate_time=FIXED_TIME
    )


async def _run(gateway: Gateway, deadline_seconds: float = 10) -> pb.RunPromptResponse:
    response: pb.RunPromptResponse = await gateway.stub.RunPrompt(
        _request(), metadata=gateway.metadata, timeout=deadline_seconds
    )
    return response


def _baseline_bytes() -> bytes:
    prompt = PromptInput(
        evaluate_item.EvaluateItemVariables.model_validate(ITEM), Lang.VI, FIXED_TIME.ToDatetime()
    )
    return evaluate_item.SPEC.to_proto(evaluate_item.baseline(prompt)).SerializeToString(
        deterministic=True
    )


def _assert_run(
    response: pb.RunPromptResponse,
    provider: ScriptedProvider,
    *,
    path: run_pb2.RunPath.ValueType,
    reason: str,
    requests: int,
) -> None:
    assert (response.run.path, response.run.reason) == (path, reason)
    assert len(provider.requests) == requests
    assert response.run.attempts == requests
    # The run names the exact body of the last request the provider received.
    assert response.run.request_sha256 == provider.requests[-1].sha256


@WIRES
async def test_valid_json_is_the_model_path(
    wire: str, start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider=wire)
    provider.script(Answer(json.dumps(VALID, ensure_ascii=False)))
    response = await _run(gateway)
    _assert_run(response, provider, path=run_pb2.RUN_PATH_MODEL, reason="", requests=1)
    assert response.output.item_evaluation.summary == VALID["summary"]
    assert response.run.provider == wire
    assert response.run.model == gateway.settings.model_fast
    assert (response.run.usage.input_tokens, response.run.usage.output_tokens) == (40, 12)
    assert response.run.evaluate_time == FIXED_TIME
    assert not response.run.evaluate_time_from_server


@WIRES
async def test_fenced_json_with_prose_around_is_still_the_model_path(
    wire: str, start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider=wire)
    fenced = f"Đây là đánh giá:\n```json\n{json.dumps(VALID, ensure_ascii=False)}\n```\nHết."
    provider.script(Answer(fenced))
    response = await _run(gateway)
    _assert_run(response, provider, path=run_pb2.RUN_PATH_MODEL, reason="", requests=1)
    assert response.output.item_evaluation.verdict == "accept"


async def test_json_inside_prose_without_fence_needs_the_brace_slice(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()
    provider.script(Answer(f"Kết quả: {json.dumps(VALID, ensure_ascii=False)} — xong."))
    response = await _run(gateway)
    _assert_run(
        response, provider, path=run_pb2.RUN_PATH_REPAIRED, reason="BRACE_SLICE", requests=1
    )


@WIRES
async def test_latex_backslashes_are_repaired_and_kept_as_written(
    wire: str, start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider=wire)
    # \Theta and \log start no JSON escape: strict parsing fails, the repair doubles them.
    raw = (
        '{"verdict": "revise", "issues": ["Nên viết \\Theta(n \\log n) bằng chữ"], '
        '"summary": "Ký hiệu \\Theta khó với lớp 8."}'
    )
    provider.script(Answer(raw))
    response = await _run(gateway)
    _assert_run(
        response, provider, path=run_pb2.RUN_PATH_REPAIRED, reason="BACKSLASH_REPAIR", requests=1
    )
    assert list(response.output.item_evaluation.issues) == ["Nên viết \\Theta(n \\log n) bằng chữ"]


async def test_invalid_json_then_valid_on_reask_is_repaired(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()
    provider.script(
        Answer('{"verdict": "accept", "issues": [], "summary": '), Answer(json.dumps(VALID))
    )
    response = await _run(gateway)
    _assert_run(response, provider, path=run_pb2.RUN_PATH_REPAIRED, reason="REASKED", requests=2)
    # The re-ask carries the broken answer and says what was wrong with it.
    reask = provider.requests[1].json()["messages"]
    assert reask[-2] == {
        "role": "assistant",
        "content": '{"verdict": "accept", "issues": [], "summary": ',
    }
    assert "could not be used" in reask[-1]["content"]


@WIRES
async def test_extra_fields_then_valid_on_reask_is_repaired(
    wire: str, start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider=wire)
    # A score is server-authoritative: the model may not add one.
    provider.script(Answer(json.dumps({**VALID, "score": 9})), Answer(json.dumps(VALID)))
    response = await _run(gateway)
    _assert_run(response, provider, path=run_pb2.RUN_PATH_REPAIRED, reason="REASKED", requests=2)
    assert "score" in provider.requests[1].json()["messages"][-1]["content"]


@WIRES
async def test_guardrail_rejection_falls_back_without_a_reask(
    wire: str, start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider=wire)
    # Valid JSON and schema, but an accepted item may not list issues: the guardrail rejects.
    provider.script(
        Answer(json.dumps({"verdict": "accept", "issues": ["mơ hồ"], "summary": "Ổn."})),
        Answer(json.dumps(VALID)),
    )
    response = await _run(gateway)
    _assert_run(
        response, provider, path=run_pb2.RUN_PATH_FALLBACK, reason="GUARDRAIL_REJECTED", requests=1
    )
    # The whole baseline, never a patched model answer.
    assert response.output.SerializeToString(deterministic=True) == _baseline_bytes()


@WIRES
async def test_truncated_answer_falls_back_as_truncated(
    wire: str, start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider=wire)
    provider.script(Answer('{"verdict": "accept", "iss', truncated=True))
    response = await _run(gateway)
    _assert_run(response, provider, path=run_pb2.RUN_PATH_FALLBACK, reason="TRUNCATED", requests=1)
    assert response.output.SerializeToString(deterministic=True) == _baseline_bytes()


@WIRES
async def test_429_then_success_is_the_model_path(
    wire: str, start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider=wire)
    provider.script(HttpError(429, retry_after=0.01), Answer(json.dumps(VALID)))
    response = await _run(gateway)
    _assert_run(response, provider, path=run_pb2.RUN_PATH_MODEL, reason="", requests=2)
    # A retry sends the very same body.
    assert provider.requests[0].body == provider.requests[1].body


async def test_5xx_until_the_retries_run_out_falls_back(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(max_retries=2)
    provider.script(HttpError(503), HttpError(502), HttpError(500), Answer(json.dumps(VALID)))
    response = await _run(gateway)
    _assert_run(
        response,
        provider,
        path=run_pb2.RUN_PATH_FALLBACK,
        reason="PROVIDER_UNAVAILABLE",
        requests=3,
    )


async def test_a_refused_request_is_not_retried(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()
    provider.script(HttpError(401), Answer(json.dumps(VALID)))
    response = await _run(gateway)
    _assert_run(
        response, provider, path=run_pb2.RUN_PATH_FALLBACK, reason="PROVIDER_REJECTED", requests=1
    )


@WIRES
async def test_a_provider_timeout_falls_back_within_the_callers_deadline(
    wire: str, start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider=wire)
    provider.script(Hang(60))
    # The provider never answers; the caller's 1.5 s deadline still gets the baseline, not
    # DEADLINE_EXCEEDED.
    response = await _run(gateway, deadline_seconds=1.5)
    _assert_run(
        response, provider, path=run_pb2.RUN_PATH_FALLBACK, reason="PROVIDER_TIMEOUT", requests=1
    )
    assert response.output.SerializeToString(deterministic=True) == _baseline_bytes()


async def test_latex_that_json_reads_as_control_characters_is_reasked(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()
    # "\frac" parses as form feed + "rac": valid JSON, destroyed formula. It is re-asked.
    bad = '{"verdict": "revise", "issues": ["Viết \\frac{1}{2} rõ hơn"], "summary": "Cần sửa."}'
    good = '{"verdict": "revise", "issues": ["Viết \\\\frac{1}{2} rõ hơn"], "summary": "Cần sửa."}'
    provider.script(Answer(bad), Answer(good))
    response = await _run(gateway)
    _assert_run(response, provider, path=run_pb2.RUN_PATH_REPAIRED, reason="REASKED", requests=2)
    assert list(response.output.item_evaluation.issues) == ["Viết \\frac{1}{2} rõ hơn"]
    assert "\\frac" in provider.requests[1].json()["messages"][-1]["content"]


async def test_answers_that_never_parse_exhaust_the_attempts(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(max_answer_attempts=3)
    provider.script(Answer("không phải JSON"), Answer("[1, 2]"), Answer('{"verdict": "maybe"}'))
    response = await _run(gateway)
    _assert_run(
        response, provider, path=run_pb2.RUN_PATH_FALLBACK, reason="ATTEMPTS_EXHAUSTED", requests=3
    )


async def test_the_request_asks_for_schema_constrained_output(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()
    provider.script(Answer(json.dumps(VALID)))
    await _run(gateway)
    body = provider.requests[0].json()
    assert body["temperature"] == 0
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["additionalProperties"] is False
    assert provider.requests[0].headers["authorization"] == f"Bearer {LLM_KEY}"


async def test_without_evaluate_time_the_server_clock_is_used_and_reported(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()
    provider.script(Answer(json.dumps(VALID)))
    request = pb.RunPromptRequest(prompt_id="coral.evaluate_item", variables=variables(**ITEM))
    response = await gateway.stub.RunPrompt(request, metadata=gateway.metadata, timeout=10)
    assert response.run.evaluate_time_from_server
    assert response.run.evaluate_time.seconds > FIXED_TIME.seconds


async def test_a_deadline_too_short_for_any_answer_still_gets_the_baseline(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(fallback_reserve_seconds=5.0)
    provider.script(Answer(json.dumps(VALID)))
    response = await _run(gateway, deadline_seconds=2)
    # All the time is reserved for the fallback: no request is sent at all.
    assert (response.run.path, response.run.reason, response.run.attempts) == (
        run_pb2.RUN_PATH_FALLBACK,
        "PROVIDER_TIMEOUT",
        0,
    )
    assert provider.requests == []
    assert response.run.request_sha256 == ""


async def test_an_unreachable_provider_falls_back(start_gateway: StartGateway) -> None:
    gateway = await start_gateway(llm_base_url="http://127.0.0.1:9/v1", max_retries=1)
    response = await _run(gateway)
    assert (response.run.path, response.run.reason, response.run.attempts) == (
        run_pb2.RUN_PATH_FALLBACK,
        "PROVIDER_UNAVAILABLE",
        2,
    )


async def test_json_nested_past_the_parsers_limit_is_a_parse_failure_and_reasked(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()
    # Deep enough to pass the parser's recursion limit, short enough for the re-ask to fit.
    nested = '{"verdict": "accept", "issues": ' + "[" * 1500 + "]" * 1500 + ', "summary": "x"}'
    provider.script(Answer(nested), Answer(json.dumps(VALID)))
    response = await _run(gateway)
    _assert_run(response, provider, path=run_pb2.RUN_PATH_REPAIRED, reason="REASKED", requests=2)
    assert "nested too deeply" in provider.requests[1].json()["messages"][-1]["content"]


async def test_a_line_break_before_a_list_item_is_not_taken_for_latex(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()
    # JSON reads "\ne" as a newline and "e": here a list item, not the LaTeX relation \ne.
    issues = ["Các lựa chọn:\nd) 7\ne) 8 — trùng ý với d)\ni) một lựa chọn thừa\ne = 2,7"]
    review = {"verdict": "revise", "issues": issues, "summary": "Cần sửa lựa chọn e."}
    provider.script(Answer(json.dumps(review, ensure_ascii=False)))
    response = await _run(gateway)
    _assert_run(response, provider, path=run_pb2.RUN_PATH_MODEL, reason="", requests=1)
    assert list(response.output.item_evaluation.issues) == issues


def _raises(draft: object, prompt: object) -> str | None:
    raise ValueError("a guardrail bug")


async def test_a_guardrail_that_raises_falls_back_with_its_own_reason(
    provider: ScriptedProvider,
) -> None:
    spec = REGISTRY.get("coral.evaluate_item")
    assert spec is not None
    broken = dataclasses.replace(spec, guardrail=_raises)
    settings = GatewaySettings(
        provider="openai", llm_base_url=provider.openai_base_url, llm_api_key=LLM_KEY
    )
    http = build_provider(settings)
    assert http is not None
    prompt = PromptInput(
        evaluate_item.EvaluateItemVariables.model_validate(ITEM), Lang.VI, FIXED_TIME.ToDatetime()
    )
    provider.script(Answer(json.dumps(VALID)), Answer(json.dumps(VALID)))
    try:
        outcome = await run_model(
            broken, prompt, broken.render(prompt), http,
            model="m", max_output_tokens=broken.max_output_tokens, max_attempts=3,
            deadline=time.monotonic() + 5,
        )  # fmt: skip
    finally:
        await http.aclose()
    assert (outcome.accepted, outcome.path, outcome.reason) == (
        None,
        RunPath.FALLBACK,
        "GUARDRAIL_ERROR",
    )
    assert len(provider.requests) == 1


async def test_every_latex_command_with_one_backslash_is_reasked_never_served_corrupted(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    # Every run asks the same question: the cache would answer all but the first.
    gateway = await start_gateway(cache_max_entries=0)
    for name in latex_corpus.CORPUS:
        provider.reset()
        issue = f"Viết lại \\{name}{{a}} + \\{name} x cho rõ"
        doubled = json.dumps({"verdict": "revise", "issues": [issue], "summary": "Cần sửa."})
        # One backslash each, as a model that forgets JSON escaping writes it.
        single = doubled.replace("\\\\", "\\")
        provider.script(Answer(single), Answer(doubled))
        response = await _run(gateway)
        _assert_run(
            response, provider, path=run_pb2.RUN_PATH_REPAIRED, reason="REASKED", requests=2
        )
        assert list(response.output.item_evaluation.issues) == [issue], name


async def test_multi_line_text_keeps_every_line_break(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(cache_max_entries=0)
    prose, starts = latex_corpus.PROSE, [w for w in latex_corpus.WORDS if w[0] in "bfnrt"]
    for index, start in enumerate(starts):
        provider.reset()
        lines = [prose[(index + k) % len(prose)] for k in range(3)]
        summary = f"{lines[0]}\n{start} {lines[1]}\n{start.capitalize()} {lines[2]}"[:600]
        provider.script(Answer(json.dumps({**VALID, "summary": summary}, ensure_ascii=False)))
        response = await _run(gateway)
        _assert_run(response, provider, path=run_pb2.RUN_PATH_MODEL, reason="", requests=1)
        assert response.output.item_evaluation.summary == summary


# Values of another JSON type that lax validation would coerce: "yes" for true, 8 for "8"...
_CONFUSED: dict[str, list[Any]] = {
    "verdict": [1, True, ["accept"]],
    "issues": ["mơ hồ", {"0": "x"}],
    "summary": [8, 8.5, True, ["Ổn."]],
}


@pytest.mark.parametrize(
    ("field", "value"), [(f, v) for f, values in _CONFUSED.items() for v in values]
)
async def test_a_value_of_the_wrong_json_type_is_reasked_never_coerced(
    field: str, value: Any, start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()
    provider.script(Answer(json.dumps({**VALID, field: value})), Answer(json.dumps(VALID)))
    response = await _run(gateway)
    _assert_run(response, provider, path=run_pb2.RUN_PATH_REPAIRED, reason="REASKED", requests=2)


@pytest.mark.parametrize("covered", ["yes", "true", 1, 0, "false", None])
async def test_covered_must_be_a_json_boolean(
    covered: Any, start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(max_answer_attempts=1)
    provider.script(Answer(json.dumps({"covered": covered, "answer": "Có [1]."})))
    passage = answer_pb2.Passage(document_id="d", title="Hằng đẳng thức", text="(a + b)².")
    response = await gateway.stub.Answer(
        pb.AnswerRequest(question="Hằng đẳng thức?", passages=[passage]),
        metadata=gateway.metadata,
        timeout=10,
    )
    assert (response.run.path, response.run.reason) == (
        run_pb2.RUN_PATH_FALLBACK,
        "ATTEMPTS_EXHAUSTED",
    )


@pytest.mark.parametrize("score", [math.nan, math.inf, -math.inf])
async def test_a_passage_score_that_is_not_finite_is_refused(
    score: float, start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway()
    passage = answer_pb2.Passage(document_id="d", title="T", text="Nội dung.", score=score)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await gateway.stub.Answer(
            pb.AnswerRequest(question="Q?", passages=[passage]),
            metadata=gateway.metadata,
            timeout=10,
        )
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(refused.value).reason == "INVALID_VARIABLES"
    assert provider.requests == []
