"""GetSnapshot through a real server: audit callers only, verified against the recorded digest."""

from __future__ import annotations

import hashlib

import aioboto3
import grpc
import grpc.aio
import pytest

from nemo_core.errors import error_details
from nemo_protos.context.v1 import context_service_pb2 as pb
from nemo_testing.s3 import S3Endpoint
from services.context.tests.conftest import RunningContextServer, StartContextServer

TIMEOUT = 10.0


async def persisted(server: RunningContextServer) -> pb.BuildContextResponse:
    request = pb.BuildContextRequest(learner_id="L-2041-3", purpose="tutor_hint", persist=True)
    response: pb.BuildContextResponse = await server.stub("gateway").BuildContext(
        request, timeout=TIMEOUT
    )
    assert response.bundle.input_ref
    return response


async def get_error(
    server: RunningContextServer, input_ref: str, caller: str = "audit"
) -> tuple[grpc.StatusCode, str | None]:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await server.stub(caller).GetSnapshot(
            pb.GetSnapshotRequest(input_ref=input_ref), timeout=TIMEOUT
        )
    details = error_details(raised.value)
    return details.code, details.reason


def forged(stored: bytes) -> bytes:
    """The sealed snapshot with one bit of its ciphertext flipped (whoever can write the bucket
    but holds no key can do no more than that, or replace it whole)."""
    middle = len(stored) // 2
    return stored[:middle] + bytes([stored[middle] ^ 0x01]) + stored[middle + 1 :]


async def test_only_the_audit_caller_reads_snapshots(context_server: RunningContextServer) -> None:
    bundle = (await persisted(context_server)).bundle
    for caller in ("gateway", "toolplane"):
        code, reason = await get_error(context_server, bundle.input_ref, caller)
        assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "CALLER_NOT_ALLOWED")
    snapshot = await context_server.stub("audit").GetSnapshot(
        pb.GetSnapshotRequest(input_ref=bundle.input_ref), timeout=TIMEOUT
    )
    assert snapshot.input_ref == bundle.input_ref
    assert snapshot.sha256 == bundle.snapshot_sha256
    assert snapshot.bundle.learner_ref == bundle.learner_ref


async def test_a_tampered_local_file_is_data_loss(context_server: RunningContextServer) -> None:
    bundle = (await persisted(context_server)).bundle
    path = context_server.settings.snapshot_dir / bundle.input_ref
    path.write_bytes(forged(path.read_bytes()))
    assert await get_error(context_server, bundle.input_ref) == (
        grpc.StatusCode.DATA_LOSS,
        "SNAPSHOT_DIGEST_MISMATCH",
    )


async def test_a_tampered_s3_object_is_data_loss(
    start_context_server: StartContextServer,
    s3_endpoint: S3Endpoint,
    s3_session: aioboto3.Session,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_endpoint.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_endpoint.secret_access_key)
    server = await start_context_server(
        snapshot_backend="s3",
        snapshot_s3_bucket=s3_bucket,
        snapshot_s3_endpoint_url=s3_endpoint.url,
        snapshot_s3_region=s3_endpoint.region,
    )
    bundle = (await persisted(server)).bundle
    async with s3_session.client("s3", endpoint_url=s3_endpoint.url) as s3:
        original = await s3.get_object(Bucket=s3_bucket, Key=bundle.input_ref)
        async with original["Body"] as stream:
            stored = await stream.read()
        await s3.put_object(Bucket=s3_bucket, Key=bundle.input_ref, Body=forged(stored))
    assert await get_error(server, bundle.input_ref) == (
        grpc.StatusCode.DATA_LOSS,
        "SNAPSHOT_DIGEST_MISMATCH",
    )
    # Putting the original bytes back makes it readable again: the sealed bytes and the digest
    # of what they hold are what decide.
    async with s3_session.client("s3", endpoint_url=s3_endpoint.url) as s3:
        await s3.put_object(Bucket=s3_bucket, Key=bundle.input_ref, Body=stored)
    snapshot = await server.stub("audit").GetSnapshot(
        pb.GetSnapshotRequest(input_ref=bundle.input_ref), timeout=TIMEOUT
    )
    assert hashlib.sha256(snapshot.canonical_json).hexdigest() == bundle.snapshot_sha256
    assert snapshot.canonical_json not in stored  # the bucket holds it sealed, never in the clear


async def test_unknown_and_malformed_refs(context_server: RunningContextServer) -> None:
    bundle = (await persisted(context_server)).bundle
    unknown = bundle.input_ref.rsplit("/", 1)[0] + "/00000000-0000-4000-8000-000000000000.json"
    assert await get_error(context_server, unknown) == (
        grpc.StatusCode.NOT_FOUND,
        "SNAPSHOT_NOT_FOUND",
    )
    malformed_refs = ("", "ai-context/../../etc/passwd", "L-2041-1", bundle.input_ref + "x")
    for malformed in (*malformed_refs, bundle.input_ref + "\n"):
        assert await get_error(context_server, malformed) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_INPUT_REF",
        )
