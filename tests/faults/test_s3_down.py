"""The snapshot store (S3 API) going away, refusing, failing, stalling or resetting connections:
bundles are still built, without an input_ref and without a digest row, and each failed write is
counted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from nemo_core.db import connect
from nemo_protos.context.v1 import context_service_pb2 as context_pb
from nemo_testing.otlp import OtlpReceiver
from nemo_testing.s3 import S3Endpoint, moto_s3_server
from nemo_testing.s3_front import S3Front
from tests.stack import StackFactory

from .support import StackClients, stack_clients

SNAPSHOT_FAILURES = "nemo.context.snapshot.failures"
PERSISTED_BUNDLE = context_pb.BuildContextRequest(
    learner_id="L-2041-1", purpose="tutor_hint", persist=True
)


async def test_builds_succeed_without_input_ref_and_count_the_failure_when_s3_is_down(
    # The receiver comes first so it outlives the stack, whose last export goes to it.
    fresh_otlp_receiver: OtlpReceiver,
    start_stack: StackFactory,
) -> None:
    with moto_s3_server() as s3:
        stack = await start_stack(s3=s3, otlp_endpoint=fresh_otlp_receiver.endpoint)
        async with stack_clients(stack) as clients:
            persisted = await clients.context.BuildContext(
                PERSISTED_BUNDLE,
                metadata=clients.context_metadata,
                timeout=10,
            )
            assert persisted.bundle.input_ref
            assert persisted.bundle.snapshot_sha256

    # The S3 API is gone now.
    async with stack_clients(stack) as clients:
        unpersisted = [
            await clients.context.BuildContext(
                PERSISTED_BUNDLE,
                metadata=clients.context_metadata,
                timeout=10,
            )
            for _ in range(2)
        ]
    for response in unpersisted:
        assert response.bundle.rendered_text
        assert response.bundle.learner_ref == persisted.bundle.learner_ref
        assert (response.bundle.input_ref, response.bundle.snapshot_sha256) == ("", "")
    await fresh_otlp_receiver.wait_until(
        lambda: fresh_otlp_receiver.counter("context", SNAPSHOT_FAILURES) >= 2
    )
    assert fresh_otlp_receiver.counter("context", SNAPSHOT_FAILURES) == 2


WRITE_TIMEOUT_SECONDS = 0.5
FAULTS: list[tuple[str, Callable[[S3Front], None], str]] = [
    ("403 AccessDenied", lambda front: front.fail_with(403, "AccessDenied"), "error"),
    ("500 InternalError", lambda front: front.fail_with(500, "InternalError"), "error"),
    ("connections reset", S3Front.reset_connections, "error"),
    (
        "slower than the write timeout",
        lambda front: front.delay(3 * WRITE_TIMEOUT_SECONDS),
        "timeout",
    ),
]
"""What S3 or its network can do to a snapshot PUT, and the failure reason it is counted as."""


async def test_s3_errors_stalls_and_resets_leave_input_ref_empty_and_are_counted(
    fresh_otlp_receiver: OtlpReceiver, start_stack: StackFactory, s3_endpoint: S3Endpoint
) -> None:
    async with S3Front(s3_endpoint.url) as front:
        stack = await start_stack(
            s3=replace(s3_endpoint, url=front.url),
            s3_bucket="nemo-fault-snapshots",
            otlp_endpoint=fresh_otlp_receiver.endpoint,
            extra_env={
                "context": {
                    "NEMO_CONTEXT_SNAPSHOT_WRITE_TIMEOUT_SECONDS": str(WRITE_TIMEOUT_SECONDS)
                }
            },
        )
        async with stack_clients(stack) as clients:
            persisted = await _build(clients)
            assert persisted.bundle.input_ref
            written = await _digest_rows(stack.owner_dsn, persisted.bundle.learner_ref)
            for fault, cause, _reason in FAULTS:
                cause(front)
                response = await _build(clients)
                front.heal()
                assert response.bundle.rendered_text, fault
                assert response.bundle.learner_ref == persisted.bundle.learner_ref, fault
                assert (response.bundle.input_ref, response.bundle.snapshot_sha256) == ("", ""), (
                    fault
                )
            # No digest row names an object that failed; the next write succeeds again.
            assert await _digest_rows(stack.owner_dsn, persisted.bundle.learner_ref) == written
            healed = await _build(clients)
            assert healed.bundle.input_ref
            assert await _digest_rows(stack.owner_dsn, persisted.bundle.learner_ref) == written + 1

    reasons = Counter(reason for _fault, _cause, reason in FAULTS)
    await fresh_otlp_receiver.wait_until(
        lambda: fresh_otlp_receiver.counter("context", SNAPSHOT_FAILURES) >= len(FAULTS)
    )
    for reason, count in reasons.items():
        assert fresh_otlp_receiver.counter("context", SNAPSHOT_FAILURES, reason=reason) == count


async def _build(clients: StackClients) -> context_pb.BuildContextResponse:
    response: context_pb.BuildContextResponse = await clients.context.BuildContext(
        PERSISTED_BUNDLE, metadata=clients.context_metadata, timeout=10
    )
    return response


async def _digest_rows(owner_dsn: str, learner_ref: str) -> int:
    conn = await connect(owner_dsn)
    try:
        count: int = await conn.fetchval(
            "SELECT count(*) FROM learning.context_snapshots WHERE learner_ref = $1", learner_ref
        )
    finally:
        await conn.close()
    return count
