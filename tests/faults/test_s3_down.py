"""The snapshot store (S3 API) going away: bundles are still built, without an input_ref, and each
failed write is counted."""

from __future__ import annotations

from nemo_protos.context.v1 import context_service_pb2 as context_pb
from nemo_testing.otlp import OtlpReceiver
from nemo_testing.s3 import moto_s3_server
from tests.stack import StackFactory

from .support import stack_clients

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
