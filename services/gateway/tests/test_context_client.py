"""How a failed context call reaches the gateway's caller: only unavailability is retryable; a
blocked bundle and any other failure of the context service are not, and keep their reason."""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr

from nemo_core.client import create_channel
from nemo_core.db import connect
from nemo_core.errors import ServiceError, error_details
from nemo_core.interceptor import server_busy
from nemo_gateway.context_client import _translate
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_protos.gateway.v1 import gateway_service_pb2_grpc as pb_grpc
from nemo_testing.providers import ScriptedProvider

from .gateway_testing import (
    CONTEXT_CLIENT_TOKEN,
    INTERNAL_TOKEN,
    StartGateway,
    start_context_service,
    variables,
)

AUDIT_TOKEN = "audit-client-token-0123456789"


@asynccontextmanager
async def leaking_learner(owner_dsn: str) -> AsyncIterator[str]:
    """A new learner whose weakest node's title names the learner's raw id: a structured field,
    which the context service's identifier gate refuses to let out (in a goal's title, text a
    person wrote, the id would be masked instead); deleted afterwards with everything stored
    for it."""
    learner_id = f"L-GW1-{secrets.token_hex(4)}"
    node_id = f"gw1-{learner_id.lower()}"
    conn = await connect(owner_dsn)
    try:
        await conn.execute(
            "INSERT INTO learning.learners (id, family_id, grade) VALUES ($1, 'F-2041-3', 8)",
            learner_id,
        )
        await conn.execute(
            "INSERT INTO knowledge.nodes (id, title, subject, grade, strand)"
            " VALUES ($1, $2, 'math', 8, 'algebra')",
            node_id,
            f"Bài riêng của {learner_id}",
        )
        await conn.execute(
            "INSERT INTO learning.mastery (learner_id, node_id, mastery, confidence)"
            " VALUES ($1, $2, 0.1, 0.5)",
            learner_id,
            node_id,
        )
        yield learner_id
    finally:
        await conn.execute("DELETE FROM learning.learners WHERE id = $1", learner_id)
        await conn.execute("DELETE FROM knowledge.nodes WHERE id = $1", node_id)
        await conn.close()


async def test_a_blocked_context_is_reported_once_and_never_retried(
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
    owner_dsn: str,
    spans: InMemorySpanExporter,
) -> None:
    gateway = await start_gateway(context_address=context_address)
    port = gateway.server.port
    # An internal caller on the project's own channel, which retries UNAVAILABLE.
    channel = create_channel(f"127.0.0.1:{port}", gateway.settings, token=SecretStr(INTERNAL_TOKEN))
    async with leaking_learner(owner_dsn) as learner_id:
        spans.clear()
        with pytest.raises(grpc.aio.AioRpcError) as blocked:
            await pb_grpc.GatewayServiceStub(channel).RunPrompt(
                pb.RunPromptRequest(prompt_id="learner.plan_explanation", learner_id=learner_id),
                timeout=10,
            )
    await channel.close()
    details = error_details(blocked.value)
    assert (details.code, details.reason, details.domain) == (
        grpc.StatusCode.INTERNAL,
        "CONTEXT_LEAK_BLOCKED",
        "gateway",
    )
    builds = [
        span
        for span in spans.get_finished_spans()
        if span.name.endswith("ContextService/BuildContext") and span.kind.name == "SERVER"
    ]
    assert len(builds) == 1
    assert provider.requests == []


async def test_a_context_service_that_fails_otherwise_is_not_reported_unavailable(
    start_gateway: StartGateway, provider: ScriptedProvider
) -> None:
    # A gateway standing in for the context service answers every context call UNIMPLEMENTED.
    not_a_context_service = await start_gateway()
    gateway = await start_gateway(context_address=f"127.0.0.1:{not_a_context_service.server.port}")
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await gateway.stub.RunPrompt(
            pb.RunPromptRequest(prompt_id="learner.tutor_hint", learner_id="L-2041-1"),
            metadata=gateway.metadata,
            timeout=10,
        )
    details = error_details(failed.value)
    assert (details.code, details.reason, details.domain) == (
        grpc.StatusCode.INTERNAL,
        "CONTEXT_FAILED",
        "gateway",
    )
    assert details.metadata["context_code"] == "UNIMPLEMENTED"
    assert provider.requests == []


async def _refused_gateway_reaches_caller_as(
    start_gateway: StartGateway,
    context_address: str,
    client_token: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    gateway = await start_gateway(context_address=context_address, client_token=client_token)
    with (
        caplog.at_level(logging.ERROR, logger="nemo_gateway"),
        pytest.raises(grpc.aio.AioRpcError) as failed,
    ):
        await gateway.stub.RunPrompt(
            pb.RunPromptRequest(
                prompt_id="learner.tutor_hint",
                learner_id="L-2041-1",
                variables=variables(node_id="math-08-algebraic-identities"),
            ),
            metadata=gateway.metadata,
            timeout=10,
        )
    details = error_details(failed.value)
    # The caller's own token was fine: the gateway's configuration is at fault.
    assert (details.code, details.reason, details.domain) == (
        grpc.StatusCode.INTERNAL,
        "CONTEXT_FAILED",
        "gateway",
    )
    logged = [r for r in caplog.records if r.name == "nemo_gateway.context_client"]
    assert [r.levelno for r in logged] == [logging.ERROR]
    assert client_token not in caplog.text


async def test_a_gateway_whose_token_the_context_service_rejects_fails_internally(
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await _refused_gateway_reaches_caller_as(
        start_gateway, context_address, "wrong-client-token-0123456789", caplog
    )
    assert provider.requests == []


async def test_a_gateway_the_context_acl_does_not_list_fails_internally(
    start_gateway: StartGateway, context_dsn: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The token is known to the context service, but as a caller that may not build context.
    tokens = {"gateway": CONTEXT_CLIENT_TOKEN, "audit": AUDIT_TOKEN}
    async with start_context_service(context_dsn, tmp_path, caller_tokens=tokens) as address:
        await _refused_gateway_reaches_caller_as(start_gateway, address, AUDIT_TOKEN, caplog)


def test_a_saturated_context_service_is_unavailable_for_now_not_a_refusal() -> None:
    busy = server_busy().to_status("context")
    answer = grpc.aio.AioRpcError(
        busy.code, grpc.aio.Metadata(), grpc.aio.Metadata(*busy.trailing_metadata), busy.details
    )
    translated = _translate(answer)
    assert (translated.code, translated.reason) == (
        grpc.StatusCode.UNAVAILABLE,
        "CONTEXT_UNAVAILABLE",
    )


def _answer(error: ServiceError, domain: str) -> grpc.aio.AioRpcError:
    status = error.to_status(domain)
    return grpc.aio.AioRpcError(
        status.code,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(*status.trailing_metadata),
        status.details,
    )


def test_a_blocked_bundle_is_known_by_the_context_services_domain_and_reason() -> None:
    blocked = ServiceError(grpc.StatusCode.INTERNAL, "CONTEXT_LEAK_BLOCKED", "blocked")
    assert _translate(_answer(blocked, "context")).reason == "CONTEXT_LEAK_BLOCKED"
    # The same reason from another domain (a proxy or sidecar between the two) is not the
    # context service's gate: a failure, reported with the reason it came with.
    elsewhere = _translate(_answer(blocked, "proxy"))
    assert (elsewhere.code, elsewhere.reason) == (grpc.StatusCode.INTERNAL, "CONTEXT_FAILED")
    assert elsewhere.metadata["context_reason"] == "CONTEXT_LEAK_BLOCKED"
