"""A model provider that fails: 5xx answers are retried within the caller's deadline and then
fall back to the baseline; a provider that hangs never holds a call past its deadline; a stream
cut before its first delta is started again, one cut later ends the call with an error.

"Within the deadline" is a correctness bound here (a call must not outlive its deadline), with a
slack for process scheduling on a busy machine; speed itself is measured by the benchmarks.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator

import grpc
import pytest
from google.protobuf import struct_pb2

from nemo_core.db import connect
from nemo_core.errors import error_details
from nemo_protos.gateway.v1 import gateway_service_pb2 as gateway_pb
from nemo_protos.gateway.v1 import run_pb2
from nemo_testing.providers import Answer, Hang, HttpError, ScriptedProvider, Stream
from tests.stack import Stack

from .support import stack_clients

DEADLINE_SECONDS = 3.0
SLACK_SECONDS = 1.0


def _hint_request() -> gateway_pb.RunPromptRequest:
    # A question of its own, so no earlier result in the gateway's cache answers it.
    variables = struct_pb2.Struct()
    variables.update({"question": f"fault {secrets.token_hex(4)}"})
    return gateway_pb.RunPromptRequest(
        prompt_id="learner.tutor_hint", learner_id="L-2041-1", variables=variables
    )


async def _timed_hint(stack: Stack) -> tuple[gateway_pb.RunPromptResponse, float]:
    async with stack_clients(stack) as clients:
        started = time.monotonic()
        response = await clients.gateway.RunPrompt(
            _hint_request(), metadata=clients.internal_metadata, timeout=DEADLINE_SECONDS
        )
        return response, time.monotonic() - started


async def test_a_5xx_is_retried_and_the_retry_answers(
    stack: Stack, scripted_provider: ScriptedProvider
) -> None:
    scripted_provider.reset()
    scripted_provider.script(HttpError(503), Answer('{"hint": "Look at the middle term."}'))
    response, elapsed = await _timed_hint(stack)
    assert response.run.path == run_pb2.RUN_PATH_MODEL
    assert response.output.tutor_hint.hint == "Look at the middle term."
    assert len(scripted_provider.requests) == 2
    assert elapsed < DEADLINE_SECONDS + SLACK_SECONDS


async def test_persistent_5xx_falls_back_to_the_baseline_within_the_deadline(
    stack: Stack, scripted_provider: ScriptedProvider
) -> None:
    scripted_provider.reset()
    scripted_provider.script(*[HttpError(503)] * 10)
    response, elapsed = await _timed_hint(stack)
    assert (response.run.path, response.run.reason) == (
        run_pb2.RUN_PATH_FALLBACK,
        "PROVIDER_UNAVAILABLE",
    )
    assert response.output.tutor_hint.hint, "the baseline hint is a real answer"
    # The first request and the configured two retries, no more.
    assert len(scripted_provider.requests) == 3
    assert elapsed < DEADLINE_SECONDS + SLACK_SECONDS


async def test_a_hanging_provider_falls_back_before_the_deadline(
    stack: Stack, scripted_provider: ScriptedProvider
) -> None:
    scripted_provider.reset()
    scripted_provider.script(*[Hang(seconds=DEADLINE_SECONDS + 5)] * 5)
    response, elapsed = await _timed_hint(stack)
    assert (response.run.path, response.run.reason) == (
        run_pb2.RUN_PATH_FALLBACK,
        "PROVIDER_TIMEOUT",
    )
    assert response.output.tutor_hint.hint
    assert elapsed < DEADLINE_SECONDS + SLACK_SECONDS


@pytest.fixture
async def chat_session_id(stack: Stack) -> AsyncIterator[str]:
    """A new, empty chat session of L-2041-1, deleted with its messages afterwards."""
    session_id = f"CS-FAULT-{secrets.token_hex(6)}"
    conn = await connect(stack.owner_dsn)
    try:
        await conn.execute(
            "INSERT INTO learning.chat_sessions (id, learner_id) VALUES ($1, 'L-2041-1')",
            session_id,
        )
        yield session_id
    finally:
        await conn.execute("DELETE FROM learning.chat_sessions WHERE id = $1", session_id)
        await conn.close()


async def _timed_stream(
    stack: Stack, session_id: str
) -> tuple[list[gateway_pb.StreamPromptResponse], grpc.aio.AioRpcError | None, float]:
    """The events of one chat turn, the error it ended with (None if clean), and its duration."""
    request = gateway_pb.StreamPromptRequest(
        prompt_id="tutor.chat_reply", session_id=session_id, turn_id="T1", user_message="Hi"
    )
    events: list[gateway_pb.StreamPromptResponse] = []
    error = None
    async with stack_clients(stack) as clients:
        started = time.monotonic()
        try:
            async for event in clients.gateway.StreamPrompt(
                request, metadata=clients.internal_metadata, timeout=DEADLINE_SECONDS
            ):
                events.append(event)
        except grpc.aio.AioRpcError as failed:
            error = failed
        return events, error, time.monotonic() - started


async def test_a_hanging_stream_ends_within_the_deadline(
    stack: Stack, scripted_provider: ScriptedProvider, chat_session_id: str
) -> None:
    scripted_provider.reset()
    scripted_provider.script_stream(*[Hang(seconds=DEADLINE_SECONDS + 5)] * 5)
    events, error, elapsed = await _timed_stream(stack, chat_session_id)
    assert error is None
    completed = events[-1].completed
    assert (completed.run.path, completed.run.reason) == (
        run_pb2.RUN_PATH_FALLBACK,
        "PROVIDER_TIMEOUT",
    )
    assert elapsed < DEADLINE_SECONDS + SLACK_SECONDS


async def test_a_stream_cut_after_deltas_errors_without_a_retry(
    stack: Stack, scripted_provider: ScriptedProvider, chat_session_id: str
) -> None:
    scripted_provider.reset()
    # The first delta ends a sentence, so the learner has seen it when the stream is cut.
    scripted_provider.script_stream(Stream(("One. ", "Two ", "three."), cut_after=1))
    events, error, elapsed = await _timed_stream(stack, chat_session_id)
    assert [e.text_delta for e in events if e.HasField("text_delta")] == ["One. "]
    assert error is not None
    assert error.code() is grpc.StatusCode.UNAVAILABLE
    assert error_details(error).reason == "PROVIDER_STREAM_BROKEN"
    assert len(scripted_provider.requests) == 1
    assert elapsed < DEADLINE_SECONDS + SLACK_SECONDS
