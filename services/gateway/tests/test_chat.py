"""StreamPrompt for tutor.chat_reply against the real context service and a scripted provider:
deltas as they come, retry only before the first delta, a cut stream ends with an error status and
a partial turn, a finished one is completed, a stale summary is rewritten and stored."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from nemo_core.db import connect
from nemo_core.errors import error_details
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_protos.gateway.v1 import run_pb2
from nemo_testing import corpora
from nemo_testing.providers import Answer, HttpError, Reply, ScriptedProvider, Stream

from .gateway_testing import (
    EARLIER_TURNS,
    FIXED_TIME,
    Gateway,
    StartGateway,
    chat_session,
    collect_stream,
    start_context_service,
    stored_messages,
    stored_reasons,
)

QUESTION = "Còn (2x - 1)² thì sao ạ?"
DELTAS = ("Với bình phương một hiệu, ", "(a - b)² = a² - 2ab + b². ", "Em thử với a = 2x nhé.")
# What the learner receives: whole sentences, each checked by the chat guardrail first.
SENTENCES = ("".join(DELTAS[:2]), DELTAS[2])

WIRES = pytest.mark.parametrize("wire", ["openai", "anthropic"])


def _request(session_id: str, turn_id: str = "T2") -> pb.StreamPromptRequest:
    return pb.StreamPromptRequest(
        prompt_id="tutor.chat_reply",
        session_id=session_id,
        turn_id=turn_id,
        user_message=QUESTION,
        evaluate_time=FIXED_TIME,
    )


async def _collect(
    gateway: Gateway, request: pb.StreamPromptRequest
) -> tuple[list[str], list[pb.StreamPromptResponse], grpc.aio.AioRpcError | None]:
    return await collect_stream(gateway, request)


@pytest.fixture
async def session(owner_dsn: str) -> AsyncIterator[str]:
    async with chat_session(owner_dsn) as session_id:
        yield session_id


@WIRES
async def test_a_finished_stream_is_relayed_and_recorded_completed(
    wire: str,
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
    session: str,
    owner_dsn: str,
) -> None:
    gateway = await start_gateway(provider=wire, context_address=context_address)
    provider.script_stream(Stream(DELTAS))
    deltas, events, error = await _collect(gateway, _request(session))
    assert error is None
    assert deltas == list(SENTENCES)
    completed = events[-1].completed
    assert completed.output.chat_reply.text == "".join(DELTAS)
    assert completed.output.chat_reply.disclaimer
    assert (completed.run.path, completed.run.attempts) == (run_pb2.RUN_PATH_MODEL, 1)
    assert completed.run.request_sha256 == provider.requests[0].sha256
    assert await stored_messages(owner_dsn, session, "T2") == [
        ("user", "completed", QUESTION),
        ("assistant", "completed", "".join(DELTAS)),
    ]
    assert await stored_reasons(owner_dsn, session, "T2") == [("completed", None)] * 2
    body = provider.requests[0].json()
    assert body["stream"] is True
    # The earlier, completed turn is history; the current question comes last.
    contents = [m["content"] for m in body["messages"] if m["role"] != "system"]
    assert contents[-1] == QUESTION
    assert "(a + b)² = a² + 2ab + b². Em thử với a = x nhé." in contents


@WIRES
async def test_a_stream_cut_after_two_deltas_ends_with_an_error_and_a_partial_turn(
    wire: str,
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
    session: str,
    owner_dsn: str,
) -> None:
    gateway = await start_gateway(provider=wire, context_address=context_address)
    provider.script_stream(Stream(DELTAS, cut_after=2), Stream(DELTAS))
    deltas, events, error = await _collect(gateway, _request(session))
    assert deltas == [SENTENCES[0]]
    assert not any(e.HasField("completed") for e in events), "a broken stream never ends cleanly"
    assert error is not None
    assert error.code() is grpc.StatusCode.UNAVAILABLE
    assert error_details(error).reason == "PROVIDER_STREAM_BROKEN"
    # No retry after the first delta: one provider request.
    assert len(provider.requests) == 1
    assert await stored_messages(owner_dsn, session, "T2") == [
        ("user", "completed", QUESTION),
        ("assistant", "partial", "".join(DELTAS[:2])),
    ]
    assert await stored_reasons(owner_dsn, session, "T2") == [
        ("completed", None),
        ("partial", "PROVIDER_STREAM_BROKEN"),
    ]


async def test_a_stream_that_breaks_before_its_first_delta_is_started_again(
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
    session: str,
    owner_dsn: str,
) -> None:
    gateway = await start_gateway(context_address=context_address)
    provider.script_stream(Stream(DELTAS, cut_after=0), Stream(DELTAS))
    deltas, events, error = await _collect(gateway, _request(session))
    assert error is None
    assert deltas == list(SENTENCES)
    assert events[-1].completed.run.attempts == 2
    assert len(provider.requests) == 2


async def test_a_reply_stopped_by_the_token_limit_is_stored_partial(
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
    session: str,
    owner_dsn: str,
) -> None:
    gateway = await start_gateway(context_address=context_address)
    provider.script_stream(Stream(DELTAS[:1], truncated=True))
    deltas, _, error = await _collect(gateway, _request(session))
    assert deltas == [DELTAS[0]]
    assert error is not None
    assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_details(error).reason == "REPLY_TRUNCATED"
    assert (await stored_messages(owner_dsn, session, "T2"))[1] == (
        "assistant",
        "partial",
        DELTAS[0],
    )
    assert (await stored_reasons(owner_dsn, session, "T2"))[1] == ("partial", "TRUNCATED")


async def test_a_provider_that_never_starts_falls_back_to_the_baseline_reply(
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
    session: str,
    owner_dsn: str,
) -> None:
    gateway = await start_gateway(context_address=context_address, max_retries=1)
    provider.script_stream(HttpError(503), HttpError(503))
    deltas, events, error = await _collect(gateway, _request(session))
    assert error is None
    completed = events[-1].completed
    assert (completed.run.path, completed.run.reason, completed.run.attempts) == (
        run_pb2.RUN_PATH_FALLBACK,
        "PROVIDER_UNAVAILABLE",
        2,
    )
    assert deltas == [completed.output.chat_reply.text]
    assert (await stored_messages(owner_dsn, session, "T2"))[1][1] == "completed"


async def test_a_stale_summary_is_rewritten_and_stored_with_the_turn(
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_dsn: str,
    owner_dsn: str,
    tmp_path: Path,
) -> None:
    summary = "Học sinh đã học bình phương của một tổng và làm đúng (x + 3)²."
    # With one recent turn kept verbatim, the older of two earlier turns needs a summary.
    async with (
        start_context_service(context_dsn, tmp_path, conversation_recent_turns=1) as address,
        chat_session(owner_dsn, turns=2) as session_id,
    ):
        gateway = await start_gateway(context_address=address)
        provider.script_stream(Stream(DELTAS))
        provider.script(Answer(json.dumps({"summary": summary}, ensure_ascii=False)))
        _, events, error = await _collect(gateway, _request(session_id, turn_id="T3"))
        assert error is None
        assert events[-1].completed.run.path == run_pb2.RUN_PATH_MODEL
        assert len(provider.requests) == 2
        summary_request = next(r for r in provider.requests if not r.json().get("stream"))
        assert summary_request.json()["response_format"]["json_schema"]["name"] == (
            "tutor_summarize_conversation"
        )
        conn = await connect(owner_dsn)
        try:
            stored = await conn.fetch(
                "SELECT summary FROM learning.conversation_summaries WHERE session_id = $1",
                session_id,
            )
        finally:
            await conn.close()
        assert [row["summary"] for row in stored] == [summary]


async def test_a_summary_answer_that_cannot_be_parsed_still_completes_the_turn(
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_dsn: str,
    owner_dsn: str,
    tmp_path: Path,
) -> None:
    async with (
        start_context_service(context_dsn, tmp_path, conversation_recent_turns=1) as address,
        chat_session(owner_dsn, turns=2) as session_id,
    ):
        gateway = await start_gateway(context_address=address, max_answer_attempts=1)
        provider.script_stream(Stream(DELTAS))
        # JSON nested deeper than the parser recurses: a parse failure, so the summary falls
        # back to its baseline instead of failing the turn.
        provider.script(Answer('{"summary": ' + "[" * 5000 + "]" * 5000 + "}"))
        deltas, events, error = await _collect(gateway, _request(session_id, turn_id="T3"))
        assert error is None
        assert deltas == list(SENTENCES)
        assert events[-1].completed.run.path == run_pb2.RUN_PATH_MODEL
        assert [row[1] for row in await stored_messages(owner_dsn, session_id, "T3")] == [
            "completed",
            "completed",
        ]
        conn = await connect(owner_dsn)
        try:
            stored = await conn.fetchval(
                "SELECT summary FROM learning.conversation_summaries WHERE session_id = $1",
                session_id,
            )
        finally:
            await conn.close()
        # The baseline summary quotes the learner's question of the turn it covers.
        assert EARLIER_TURNS[1][0] in stored


async def test_only_the_chat_prompt_is_streamed(start_gateway: StartGateway) -> None:
    gateway = await start_gateway()
    request = pb.StreamPromptRequest(
        prompt_id="coral.evaluate_item", session_id="S", turn_id="T", user_message="x"
    )
    _, _, error = await _collect(gateway, request)
    assert error is not None
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(error).reason == "WRONG_RPC_FOR_PROMPT"


async def test_a_reply_the_caller_cancels_is_stored_cancelled(
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
    session: str,
    owner_dsn: str,
) -> None:
    gateway = await start_gateway(context_address=context_address)
    provider.script_stream(Stream(DELTAS, delta_delay=0.5))
    call = gateway.stub.StreamPrompt(_request(session), metadata=gateway.metadata, timeout=10)
    first = await call.read()
    assert isinstance(first, pb.StreamPromptResponse)
    assert first.text_delta == SENTENCES[0]
    call.cancel()
    # The record is written after the cancellation reached the server: poll for it.
    for _ in range(100):
        if stored := await stored_messages(owner_dsn, session, "T2"):
            break
        await asyncio.sleep(0.05)
    assert stored == [("user", "completed", QUESTION), ("assistant", "cancelled", SENTENCES[0])]


async def test_a_reply_cut_by_the_callers_deadline_is_still_stored_partial(
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
    session: str,
    owner_dsn: str,
) -> None:
    # Hardly any time kept back: the provider stream runs into the caller's deadline itself.
    gateway = await start_gateway(context_address=context_address, fallback_reserve_seconds=0.05)
    provider.script_stream(Stream(DELTAS, delta_delay=0.4))
    seen: list[str] = []
    call = gateway.stub.StreamPrompt(_request(session), metadata=gateway.metadata, timeout=1.0)
    with contextlib.suppress(grpc.aio.AioRpcError):
        async for event in call:
            seen.append(event.text_delta)
    # Cut by the provider deadline just inside the caller's, or by the caller's itself.
    assert await call.code() in {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
    assert seen, "the learner saw part of the reply"
    for _ in range(100):
        if stored := await stored_messages(owner_dsn, session, "T2"):
            break
        await asyncio.sleep(0.05)
    assert stored[0] == ("user", "completed", QUESTION)
    assert stored[1][:2] in {("assistant", "partial"), ("assistant", "cancelled")}
    assert stored[1][2] == "".join(seen)


CLAIMS = [row.text for row in corpora.load("score_claims") if row.label == "claim"][::20]


@pytest.mark.parametrize("claim", CLAIMS)
async def test_a_reply_that_opens_with_a_score_claim_is_replaced_by_the_baseline(
    claim: str,
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
    session: str,
    owner_dsn: str,
) -> None:
    gateway = await start_gateway(context_address=context_address)
    words = tuple(f"{word} " for word in f"{claim} {DELTAS[2]}".split())
    provider.script_stream(Stream(words))
    deltas, events, error = await _collect(gateway, _request(session))
    assert error is None
    completed = events[-1].completed
    assert (completed.run.path, completed.run.reason, completed.run.attempts) == (
        run_pb2.RUN_PATH_FALLBACK,
        "GUARDRAIL_REJECTED",
        1,
    )
    assert deltas == [completed.output.chat_reply.text]
    assert claim not in "".join(deltas)
    stored = await stored_messages(owner_dsn, session, "T2")
    assert stored[1] == ("assistant", "completed", completed.output.chat_reply.text)


@pytest.mark.parametrize("claim", CLAIMS)
async def test_a_score_claim_after_the_first_sentence_stops_the_reply_before_it(
    claim: str,
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
    session: str,
    owner_dsn: str,
) -> None:
    gateway = await start_gateway(context_address=context_address)
    provider.script_stream(Stream((*DELTAS[:2], *(f"{w} " for w in claim.split()), DELTAS[2])))
    deltas, events, error = await _collect(gateway, _request(session))
    assert deltas == [SENTENCES[0]]
    assert not any(e.HasField("completed") for e in events)
    assert error is not None
    assert error.code() is grpc.StatusCode.ABORTED
    assert error_details(error).reason == "REPLY_REJECTED"
    assert len(provider.requests) == 1
    assert await stored_messages(owner_dsn, session, "T2") == [
        ("user", "completed", QUESTION),
        ("assistant", "partial", SENTENCES[0]),
    ]


async def _snapshot_kind(owner_dsn: str, input_ref: str) -> str | None:
    conn = await connect(owner_dsn)
    try:
        kind: str | None = await conn.fetchval(
            "SELECT kind FROM learning.context_snapshots WHERE input_ref = $1", input_ref
        )
    finally:
        await conn.close()
    return kind


@pytest.mark.parametrize(
    ("script", "path", "reason"),
    [
        ((Stream(DELTAS),), run_pb2.RUN_PATH_MODEL, ""),
        ((HttpError(503), HttpError(503)), run_pb2.RUN_PATH_FALLBACK, "PROVIDER_UNAVAILABLE"),
        ((Stream((f"{CLAIMS[0]} ", DELTAS[2])),), run_pb2.RUN_PATH_FALLBACK, "GUARDRAIL_REJECTED"),
    ],
    ids=["model", "provider-unavailable", "guardrail"],
)
async def test_the_run_record_and_the_chat_span_name_the_conversation_snapshot(
    script: tuple[Reply, ...],
    path: run_pb2.RunPath.ValueType,
    reason: str,
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
    session: str,
    owner_dsn: str,
    spans: InMemorySpanExporter,
) -> None:
    gateway = await start_gateway(context_address=context_address, max_retries=1)
    provider.script_stream(*script)
    spans.clear()
    _, events, error = await _collect(gateway, _request(session))
    assert error is None
    run = events[-1].completed.run
    assert (run.path, run.reason) == (path, reason)
    assert await _snapshot_kind(owner_dsn, run.input_ref) == "conversation"
    [chat] = [
        span
        for span in spans.get_finished_spans()
        if (span.attributes or {}).get("gen_ai.prompt.name") == "tutor.chat_reply"
    ]
    assert (chat.attributes or {})["nemo.input_ref"] == run.input_ref


async def test_a_chat_turn_that_asks_no_model_still_names_its_conversation_snapshot(
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
    session: str,
    owner_dsn: str,
) -> None:
    gateway = await start_gateway(context_address=context_address, ai_enrichment_enabled=False)
    _, events, error = await _collect(gateway, _request(session))
    assert error is None
    run = events[-1].completed.run
    assert (run.path, run.reason) == (run_pb2.RUN_PATH_FALLBACK, "KILL_SWITCH")
    assert await _snapshot_kind(owner_dsn, run.input_ref) == "conversation"
    assert provider.requests == []
