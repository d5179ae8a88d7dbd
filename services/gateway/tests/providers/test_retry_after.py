"""A provider's Retry-After: waited as it is when it ends before the deadline, otherwise the run
fails at once with the reason."""

from __future__ import annotations

import email.utils
import json
import time

import pytest

from nemo_gateway.providers.http import retry_after
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_testing.providers import Answer, HttpError, ScriptedProvider
from services.gateway.tests.gateway_testing import StartGateway, variables

REQUEST = pb.RunPromptRequest(
    prompt_id="coral.evaluate_item",
    variables=variables(stem="2 + 2 = ?", kind="short_answer", subject="math", grade=1),
)
VALID = json.dumps({"verdict": "accept", "issues": [], "summary": "Ổn."})


@pytest.mark.parametrize(
    "refusal",
    [
        HttpError(429, retry_after=0.4),
        HttpError(503, retry_after=0.4),
        HttpError(429, headers=(("retry-after-ms", "400"),)),
    ],
    ids=["429-seconds", "503-seconds", "429-ms"],
)
async def test_a_retry_after_that_fits_the_deadline_is_waited_in_full(
    start_gateway: StartGateway, provider: ScriptedProvider, refusal: HttpError
) -> None:
    # The backoff cap is far below the asked wait: the wait is the provider's, not the cap.
    gateway = await start_gateway(provider="openai", retry_backoff_max_seconds=0.05)
    provider.script(refusal, Answer(VALID))
    response = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=10)
    first, second = provider.requests
    assert second.received_at - first.received_at >= 0.4
    assert (response.run.reason, response.run.attempts) == ("", 2)


@pytest.mark.parametrize(
    ("status", "reason"), [(429, "PROVIDER_RATE_LIMITED"), (503, "PROVIDER_UNAVAILABLE")]
)
async def test_a_retry_after_past_the_deadline_fails_at_once_with_its_reason(
    start_gateway: StartGateway, provider: ScriptedProvider, status: int, reason: str
) -> None:
    gateway = await start_gateway(provider="openai", max_retries=3)
    provider.script(HttpError(status, retry_after=30), Answer(VALID))
    response = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=3)
    # No second request, and no waiting until the deadline: the baseline came back with the
    # reason (a run that waited would have hit the deadline instead).
    assert (response.run.reason, len(provider.requests)) == (reason, 1)


async def test_rate_limiting_until_the_retries_run_out_is_its_own_reason(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    gateway = await start_gateway(provider="openai", max_retries=2)
    provider.script(HttpError(429), HttpError(429), HttpError(429), Answer(VALID))
    response = await gateway.stub.RunPrompt(REQUEST, metadata=gateway.metadata, timeout=5)
    assert (response.run.reason, len(provider.requests)) == ("PROVIDER_RATE_LIMITED", 3)


def test_retry_after_reads_seconds_milliseconds_and_http_dates() -> None:
    now = time.time()
    assert retry_after({"retry-after": "7"}) == 7.0
    assert retry_after({"retry-after": "-3"}) == 0.0
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    date = email.utils.formatdate(now + 20, usegmt=True)
    assert retry_after({"retry-after": date}, now=now) == pytest.approx(20, abs=1)
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None
