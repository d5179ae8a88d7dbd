"""The gateway against a real model: SmolLM2-135M-Instruct on llama-cpp-python's OpenAI-compatible
server (the ``local`` provider, built by ``make local-model``), through a recording proxy that
keeps the exact bytes the server received and what it answered.

A 135M-parameter model answers as it answers; what must hold is the gateway's account of it.
Every prompt completes inside its deadline, and its run record is held to the server's own
answers, checked here independently of the pipeline: MODEL only for a first answer that parses
as strict JSON and validates, REPAIRED only with the repair or re-ask it names, a fallback only
for the reason the answers show (truncated, invalid on every attempt, refused by the guardrail
although valid). Token usage is the server's, the digest names the last body the server received,
and a learner prompt's context is the rendered text of the snapshot the run record names.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from pydantic import ValidationError

from nemo_core.settings import DEFAULT_CALLER_TOKEN_METADATA_KEY
from nemo_gateway.grounding.tags import CONTEXT_TAG, tagged
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.registry import REGISTRY
from nemo_gateway.prompts.spec import Rpc
from nemo_gateway.providers.reasoning import strip_reasoning
from nemo_ops import local_model
from nemo_protos.context.v1 import context_service_pb2, context_service_pb2_grpc
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_protos.gateway.v1 import run_pb2
from nemo_testing.ports import free_port
from nemo_testing.providers import RecordedRequest
from nemo_testing.recording_proxy import RecordingProxy
from nemo_testing.registrations import Table

from .gateway_testing import (
    CONTEXT_CLIENT_TOKEN,
    FIXED_TIME,
    Gateway,
    StartGateway,
    chat_session,
    collect_stream,
    prompt_ids,
    start_context_service,
    stored_messages,
    variables,
)

#: Each RPC's deadline: generous for two shared cores, and every run must end inside it.
DEADLINE_SECONDS = 120.0
#: Output tokens per answer: enough for each prompt's JSON, short enough to bound the run time.
OUTPUT_TOKEN_LIMIT = 160
AUDIT_TOKEN = "audit-caller-token-for-real-model-tests"
#: Server-sent events relayed before the proxy cuts a stream: a few sentences of a reply.
CUT_AFTER_EVENTS = 40
MODEL = local_model.MODEL_NAME
HERE = "services/gateway/tests/test_real_model.py"


@pytest.fixture(scope="session")
async def model_server() -> AsyncIterator[int]:
    """The local model server on a free port, for the whole session."""
    try:
        local_model.server_python()
    except local_model.LocalModelUnavailable as missing:
        pytest.fail(str(missing))
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="nemo-local-model-")) / "local-model.log"
    process = await local_model.spawn_local_model(port, log)
    try:
        await local_model.wait_until_loaded(process, port, log)
        yield port
    finally:
        await local_model.stop_local_model(process)


@pytest.fixture(scope="session")
async def recording_proxy(model_server: int) -> AsyncIterator[RecordingProxy]:
    async with RecordingProxy(f"http://127.0.0.1:{model_server}") as proxy:
        yield proxy


@pytest.fixture
def proxy(recording_proxy: RecordingProxy) -> RecordingProxy:
    """The recording proxy with an empty log."""
    recording_proxy.reset()
    return recording_proxy


@pytest.fixture(scope="session")
async def audited_context(
    context_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """The context service, also open to the audit caller (GetSnapshot); one recent turn kept
    verbatim, so a conversation with two earlier turns needs a new summary."""
    async with start_context_service(
        context_dsn,
        tmp_path_factory.mktemp("real-model-context"),
        caller_tokens={"gateway": CONTEXT_CLIENT_TOKEN, "audit": AUDIT_TOKEN},
        conversation_recent_turns=1,
    ) as address:
        yield address


@pytest.fixture
async def gateway(
    start_gateway: StartGateway, proxy: RecordingProxy, audited_context: str
) -> Gateway:
    return await start_gateway(
        provider="local",
        llm_base_url=proxy.openai_base_url,
        llm_api_key=None,
        context_address=audited_context,
        output_token_limit=OUTPUT_TOKEN_LIMIT,
        request_timeout_seconds=DEADLINE_SECONDS,
        cache_max_entries=0,
    )


def _answer_text(answer: dict[str, Any]) -> str:
    content = answer["choices"][0]["message"]["content"] or ""
    return strip_reasoning(str(content))


def _validates(prompt_id: str, text: str) -> bool:
    """Whether ``text`` is, as it is, strict JSON that the prompt's output model accepts."""
    spec = REGISTRY.get(prompt_id)
    assert spec is not None
    try:
        spec.model_output.model_validate(json.loads(text))
    except (ValueError, ValidationError):
        return False
    return True


def _whole_answers(proxy: RecordingProxy, prompt_id: str) -> list[tuple[RecordedRequest, Any]]:
    """The prompt's requests (told apart by the schema they carry) with the server's answers;
    None for a request the server had not answered when the gateway gave up on it."""
    spec = REGISTRY.get(prompt_id)
    assert spec is not None
    pairs = []
    for request, (status, body) in zip(proxy.requests, proxy.answers, strict=True):
        sent = request.json()
        if (sent.get("response_format") or {}).get("schema") == spec.output_schema:
            assert status in (0, 200), body
            pairs.append((request, json.loads(body) if status == 200 and body else None))
    return pairs


def assert_truthful(run: run_pb2.RunRecord, proxy: RecordingProxy, prompt_id: str) -> None:
    """The run record of a structured prompt against what the server actually answered."""
    exchanges = _whole_answers(proxy, prompt_id)
    assert exchanges, "the model was asked"
    assert (run.provider, run.model) == ("local", MODEL)
    assert run.attempts == len(exchanges)
    last_request, last_answer = exchanges[-1]
    # The digest names the exact bytes the server received last.
    assert run.request_sha256 == last_request.sha256
    for request, _ in exchanges:
        assert request.json()["response_format"]["type"] == "json_object"
        assert request.json()["max_tokens"] <= OUTPUT_TOKEN_LIMIT
    if last_answer is None:
        # The server had not answered when the request timed out: a fallback that says so, and
        # usage that is unknown rather than 0.
        assert (run.path, run.reason) == (run_pb2.RUN_PATH_FALLBACK, "PROVIDER_TIMEOUT")
        assert run.usage.input_tokens_unknown
        return
    assert all(answer is not None for _, answer in exchanges[:-1])
    # Token usage is the server's, summed over the attempts.
    assert run.usage.input_tokens == sum(a["usage"]["prompt_tokens"] for _, a in exchanges)
    assert run.usage.output_tokens == sum(a["usage"]["completion_tokens"] for _, a in exchanges)
    assert not (run.usage.input_tokens_unknown)
    assert not (run.usage.output_tokens_unknown)
    text = _answer_text(last_answer)
    finish = last_answer["choices"][0]["finish_reason"]
    if run.path == run_pb2.RUN_PATH_MODEL:
        assert (run.reason, len(exchanges), finish) == ("", 1, "stop")
        assert _validates(prompt_id, text), "a MODEL result is a first answer that validates"
    elif run.path == run_pb2.RUN_PATH_REPAIRED:
        assert run.reason in ("BRACE_SLICE", "BACKSLASH_REPAIR", "REASKED")
        assert (run.reason == "REASKED") is (len(exchanges) > 1)
        assert finish == "stop"
    else:
        assert run.path == run_pb2.RUN_PATH_FALLBACK
        if run.reason == "TRUNCATED":
            assert finish == "length"
        elif run.reason == "ATTEMPTS_EXHAUSTED":
            assert finish == "stop"
            assert not _validates(prompt_id, text)
        else:
            assert run.reason == "GUARDRAIL_REJECTED", run.reason
            assert finish == "stop"


async def _run(gateway: Gateway, request: pb.RunPromptRequest) -> pb.RunPromptResponse:
    request.evaluate_time.CopyFrom(FIXED_TIME)
    response: pb.RunPromptResponse = await gateway.stub.RunPrompt(
        request, metadata=gateway.metadata, timeout=DEADLINE_SECONDS
    )
    return response


CONTENT_PROMPTS = {
    "coral.generate_items": variables(
        topic="Hằng đẳng thức",
        subject="math",
        grade=8,
        node_id="math-08-algebraic-identities",
        count=1,
    ),
    "coral.evaluate_item": variables(
        stem="Tính (x + 1)².", kind="short_answer", subject="math", grade=8
    ),
}
CONTENT_TABLE = Table(
    f"CONTENT_PROMPTS in {HERE}", "its variables for one run against the real model"
)


@pytest.mark.parametrize("prompt_id", sorted(prompt_ids(Rpc.RUN_PROMPT, learner=False)))
async def test_content_prompts_complete_with_a_truthful_run_record(
    gateway: Gateway, proxy: RecordingProxy, prompt_id: str
) -> None:
    values = CONTENT_TABLE.entry_of(CONTENT_PROMPTS, prompt_id)
    response = await _run(gateway, pb.RunPromptRequest(prompt_id=prompt_id, variables=values))
    assert_truthful(response.run, proxy, prompt_id)


LEARNER_PROMPTS = {
    "learner.tutor_hint": variables(node_id="math-08-algebraic-identities"),
    "learner.plan_explanation": None,
    "learner.portrait_summary": None,
}
LEARNER_TABLE = Table(
    f"LEARNER_PROMPTS in {HERE}", "its variables for L-2041-1 (None when it takes none)"
)


@pytest.mark.parametrize("prompt_id", sorted(prompt_ids(Rpc.RUN_PROMPT, learner=True)))
async def test_learner_prompts_see_exactly_the_snapshot_they_name(
    gateway: Gateway, proxy: RecordingProxy, audited_context: str, prompt_id: str
) -> None:
    request = pb.RunPromptRequest(prompt_id=prompt_id, learner_id="L-2041-1")
    if (values := LEARNER_TABLE.entry_of(LEARNER_PROMPTS, prompt_id)) is not None:
        request.variables.CopyFrom(values)
    response = await _run(gateway, request)
    assert_truthful(response.run, proxy, prompt_id)
    assert response.run.input_ref.startswith("ai-context/")
    async with grpc.aio.insecure_channel(audited_context) as channel:
        snapshot = await context_service_pb2_grpc.ContextServiceStub(channel).GetSnapshot(
            context_service_pb2.GetSnapshotRequest(input_ref=response.run.input_ref),
            metadata=((DEFAULT_CALLER_TOKEN_METADATA_KEY, AUDIT_TOKEN),),
            timeout=10,
        )
    context = tagged(CONTEXT_TAG[Lang.VI], snapshot.bundle.rendered_text)
    for request_sent, _ in _whole_answers(proxy, prompt_id):
        user = [m["content"] for m in request_sent.json()["messages"] if m["role"] == "user"]
        assert user[0].startswith(context)
    sent = "".join(r.body.decode() for r in proxy.requests)
    assert "L-2041-1" not in sent, "the internal learner id never reaches the model"


#: The prompts of the other RPCs, each run by the tests below that name it.
ANSWER_PROMPT = "knowledge.answer"
CHAT_PROMPT = "tutor.chat_reply"
SUMMARY_PROMPT = "tutor.summarize_conversation"


def test_every_registered_prompt_runs_against_the_real_model() -> None:
    gaps = [
        CONTENT_TABLE.gaps(CONTENT_PROMPTS, prompt_ids(Rpc.RUN_PROMPT, learner=False)),
        LEARNER_TABLE.gaps(LEARNER_PROMPTS, prompt_ids(Rpc.RUN_PROMPT, learner=True)),
    ]
    assert not any(gaps), "\n".join(gap for gap in gaps if gap)
    others = {
        Rpc.ANSWER: {ANSWER_PROMPT},
        Rpc.STREAM_PROMPT: {CHAT_PROMPT},
        Rpc.INTERNAL: {SUMMARY_PROMPT},
    }
    for rpc, named in others.items():
        assert prompt_ids(rpc) == named, (
            f"{sorted(prompt_ids(rpc) - named)} ({rpc}) has no real-model test in {HERE}: "
            f"write one like those of {sorted(named)}"
        )


@pytest.mark.parametrize(
    "question", ["Hằng đẳng thức (a + b)² là gì?", "Thủ đô của nước Pháp là gì?"]
)
async def test_grounded_answers_complete_with_a_truthful_run_record(
    gateway: Gateway, proxy: RecordingProxy, question: str
) -> None:
    response = await gateway.stub.Answer(
        pb.AnswerRequest(question=question, evaluate_time=FIXED_TIME),
        metadata=gateway.metadata,
        timeout=DEADLINE_SECONDS,
    )
    if response.run.reason == "NO_SOURCES":
        assert not proxy.requests, "no sources: no model call"
        return
    assert_truthful(response.run, proxy, ANSWER_PROMPT)
    if response.run.path != run_pb2.RUN_PATH_FALLBACK and response.answer.covered:
        # A model answer that is served cites no source that does not exist.
        assert not response.answer.citation_check.invalid_citations


async def test_a_small_output_limit_is_truncated_by_the_real_server(
    start_gateway: StartGateway, proxy: RecordingProxy
) -> None:
    gateway = await start_gateway(
        provider="local", llm_base_url=proxy.openai_base_url, output_token_limit=4
    )
    prompt_id = "coral.evaluate_item"
    response = await _run(
        gateway, pb.RunPromptRequest(prompt_id=prompt_id, variables=CONTENT_PROMPTS[prompt_id])
    )
    assert (response.run.path, response.run.reason) == (run_pb2.RUN_PATH_FALLBACK, "TRUNCATED")
    [(request, answer)] = _whole_answers(proxy, prompt_id)
    assert request.json()["max_tokens"] == 4
    assert answer["choices"][0]["finish_reason"] == "length"
    assert response.run.usage.output_tokens == answer["usage"]["completion_tokens"] == 4


async def test_a_dialect_the_real_server_refuses_is_reported_without_retries(
    start_gateway: StartGateway, proxy: RecordingProxy
) -> None:
    # llama-cpp-python takes no json_schema response_format; it answers 500 naming the
    # validation error. One request, its own reason: not an unavailable provider.
    gateway = await start_gateway(
        provider="local",
        llm_base_url=proxy.openai_base_url,
        structured_output="json_schema",
        max_retries=3,
    )
    prompt_id = "coral.evaluate_item"
    response = await _run(
        gateway, pb.RunPromptRequest(prompt_id=prompt_id, variables=CONTENT_PROMPTS[prompt_id])
    )
    assert (response.run.path, response.run.reason) == (
        run_pb2.RUN_PATH_FALLBACK,
        "PROVIDER_REJECTED",
    )
    assert [status for status, _ in proxy.answers] == [500]
    assert response.run.request_sha256 == proxy.requests[0].sha256


QUESTION = "Còn (2x - 1)² thì sao ạ?"


def _stream_request(session_id: str, turn_id: str) -> pb.StreamPromptRequest:
    return pb.StreamPromptRequest(
        prompt_id=CHAT_PROMPT,
        session_id=session_id,
        turn_id=turn_id,
        user_message=QUESTION,
        evaluate_time=FIXED_TIME,
    )


def _streamed_text(body: bytes) -> str:
    """The content deltas of an SSE body as relayed."""
    text = []
    for line in body.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:]).get("choices", []):
                text.append((choice.get("delta") or {}).get("content") or "")
    return "".join(text)


async def test_a_streamed_reply_is_recorded_as_a_finished_turn_with_its_summary(
    gateway: Gateway, proxy: RecordingProxy, owner_dsn: str
) -> None:
    async with chat_session(owner_dsn, turns=2) as session_id:
        deltas, events, error = await collect_stream(
            gateway, _stream_request(session_id, "T3"), DEADLINE_SECONDS
        )
        assert error is None
        run = events[-1].completed.run
        assert (run.provider, run.model) == ("local", MODEL)
        [stream_request] = [r for r in proxy.requests if r.json().get("stream")]
        stream_index = proxy.requests.index(stream_request)
        relayed = _streamed_text(proxy.answers[stream_index][1])
        stored = await stored_messages(owner_dsn, session_id, "T3")
        if run.path == run_pb2.RUN_PATH_MODEL:
            assert "".join(deltas) == relayed.strip() or "".join(deltas) == relayed
            assert stored == [("user", "completed", QUESTION), ("assistant", "completed", relayed)]
        else:
            assert run.reason in ("EMPTY_REPLY", "TRUNCATED")
            assert [status for _, status, _ in stored] == ["completed", "completed"]
        assert run.request_sha256 == stream_request.sha256
        # The server reports no usage in a stream: the run record says unknown, not 0.
        assert run.usage.input_tokens_unknown
        assert run.usage.output_tokens_unknown
        # The conversation summary ran on the same model alongside the reply.
        summaries = _whole_answers(proxy, SUMMARY_PROMPT)
        assert len(summaries) >= 1


async def test_a_reply_cut_mid_stream_is_stored_as_partial(
    gateway: Gateway, proxy: RecordingProxy, owner_dsn: str
) -> None:
    async with chat_session(owner_dsn, turns=1) as session_id:
        proxy.cut_next_stream(after=CUT_AFTER_EVENTS)
        deltas, events, error = await collect_stream(
            gateway, _stream_request(session_id, "T2"), DEADLINE_SECONDS
        )
        [stream_request] = [r for r in proxy.requests if r.json().get("stream")]
        relayed = proxy.answers[proxy.requests.index(stream_request)][1]
        assert b"[DONE]" not in relayed, "the reply was long enough to be cut"
        stored = await stored_messages(owner_dsn, session_id, "T2")
        if deltas and error is not None:
            # The learner saw part of the reply: the stream ends with an error and the turn
            # is stored partial, exactly as far as it was shown.
            assert [(role, status) for role, status, _ in stored] == [
                ("user", "completed"),
                ("assistant", "partial"),
            ]
            assert stored[1][2] == "".join(deltas)
        else:
            # Cut before a whole sentence was shown: the baseline reply replaces it, recorded
            # as what it is.
            run = events[-1].completed.run
            assert (run.path, run.reason) == (run_pb2.RUN_PATH_FALLBACK, "PROVIDER_STREAM_BROKEN")
            assert [status for _, status, _ in stored] == ["completed", "completed"]
