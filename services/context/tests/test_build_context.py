"""BuildContext and ListPurposes through a real context server on loopback: callers, purposes,
errors, and snapshots that hold exactly what was returned (local directory and S3 API)."""

from __future__ import annotations

import hashlib

import grpc
import grpc.aio
import pytest

from nemo_context.purposes import POLICY_VERSION, PURPOSES
from nemo_context.snapshots.store import canonical_json
from nemo_core.errors import error_details
from nemo_protos.context.v1 import context_service_pb2 as pb
from nemo_protos.context.v1 import learner_context_pb2
from nemo_protos.type.v1 import locale_pb2
from nemo_testing.ports import free_port
from nemo_testing.s3 import S3Endpoint

from .conftest import PARENT, CounterTotal, RunningContextServer, StartContextServer

TIMEOUT = 10.0


async def _build(
    server: RunningContextServer, caller: str, purpose: str, *, persist: bool = False
) -> pb.BuildContextResponse:
    request = pb.BuildContextRequest(learner_id="L-2041-1", purpose=purpose, persist=persist)
    if caller == "toolplane":
        request.agent_access.CopyFrom(PARENT)
    response: pb.BuildContextResponse = await server.stub(caller).BuildContext(
        request, timeout=TIMEOUT
    )
    return response


async def _error(
    server: RunningContextServer, caller: str, request: pb.BuildContextRequest
) -> tuple[grpc.StatusCode, str | None]:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await server.stub(caller).BuildContext(request, timeout=TIMEOUT)
    details = error_details(raised.value)
    assert details.domain == "context"
    return details.code, details.reason


def _without_snapshot_ref(bundle: learner_context_pb2.ContextBundle) -> bytes:
    copy = learner_context_pb2.ContextBundle()
    copy.CopyFrom(bundle)
    copy.input_ref = ""
    copy.snapshot_sha256 = ""
    return canonical_json(copy)


async def test_the_gateway_builds_a_prompt_purpose(context_server: RunningContextServer) -> None:
    response = await _build(context_server, "gateway", "tutor_hint")
    bundle = response.bundle
    assert bundle.purpose == "tutor_hint"
    assert bundle.learner_ref.startswith("nemo_")
    assert len(bundle.mastery) == 5
    assert bundle.recent_evidence.correct_count == 6
    assert bundle.rendered_text.startswith(f"Học sinh {bundle.learner_ref}, lớp 8.")
    assert bundle.input_ref == ""  # not persisted


async def test_the_tool_plane_builds_the_composite_agent_view(
    context_server: RunningContextServer,
) -> None:
    bundle = (await _build(context_server, "toolplane", "learning_state")).bundle
    assert list(bundle.slices) == [
        "profile",
        "age",
        "context",
        "learning_progress",
        "readiness",
        "next_experience",
    ]
    assert bundle.profile.age_years > 0
    assert bundle.next_experience.reason
    assert not bundle.mastery


@pytest.mark.parametrize(
    ("caller", "purpose", "code", "reason"),
    [
        ("gateway", "no_such_purpose", grpc.StatusCode.INVALID_ARGUMENT, "UNKNOWN_PURPOSE"),
        ("toolplane", "", grpc.StatusCode.INVALID_ARGUMENT, "UNKNOWN_PURPOSE"),
        ("toolplane", "tutor_hint", grpc.StatusCode.PERMISSION_DENIED, "PURPOSE_NOT_ALLOWED"),
        ("gateway", "learning_state", grpc.StatusCode.PERMISSION_DENIED, "PURPOSE_NOT_ALLOWED"),
        ("gateway", "tutor_chat", grpc.StatusCode.INVALID_ARGUMENT, "WRONG_PURPOSE_KIND"),
        ("toolplane", "tutor_chat", grpc.StatusCode.PERMISSION_DENIED, "PURPOSE_NOT_ALLOWED"),
        ("audit", "tutor_hint", grpc.StatusCode.PERMISSION_DENIED, "CALLER_NOT_ALLOWED"),
    ],
)
async def test_purposes_and_callers_are_checked_before_anything_is_read(
    context_server: RunningContextServer,
    caller: str,
    purpose: str,
    code: grpc.StatusCode,
    reason: str,
) -> None:
    request = pb.BuildContextRequest(learner_id="L-2041-1", purpose=purpose)
    assert await _error(context_server, caller, request) == (code, reason)


@pytest.mark.parametrize(
    ("learner_id", "code", "reason"),
    [
        ("L-2041-404", grpc.StatusCode.NOT_FOUND, "LEARNER_NOT_FOUND"),
        ("", grpc.StatusCode.INVALID_ARGUMENT, "INVALID_LEARNER_ID"),
        ("L-2041-1,L-2041-2", grpc.StatusCode.INVALID_ARGUMENT, "INVALID_LEARNER_ID"),
    ],
)
async def test_bad_learner_ids_are_precise_errors(
    context_server: RunningContextServer, learner_id: str, code: grpc.StatusCode, reason: str
) -> None:
    request = pb.BuildContextRequest(learner_id=learner_id, purpose="tutor_hint", persist=True)
    assert await _error(context_server, "gateway", request) == (code, reason)


async def test_an_undefined_locale_is_an_invalid_argument(
    context_server: RunningContextServer,
) -> None:
    request = pb.BuildContextRequest(
        learner_id="L-2041-1",
        purpose="tutor_hint",
        persist=True,
        locale=locale_pb2.Locale.ValueType(99),
    )
    assert await _error(context_server, "gateway", request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_LOCALE",
    )


async def test_list_purposes_serves_the_table(context_server: RunningContextServer) -> None:
    for caller in ("gateway", "toolplane", "audit"):
        response = await context_server.stub(caller).ListPurposes(
            pb.ListPurposesRequest(), timeout=TIMEOUT
        )
        assert response.policy_version == POLICY_VERSION
        assert [p.name for p in response.purposes] == list(PURPOSES)
    hint = next(p for p in response.purposes if p.name == "tutor_hint")
    assert (hint.mastery_limit, hint.evidence_limit) == (5, 10)
    assert list(hint.slices) == ["profile", "mastery", "recent_evidence"]
    assert hint.reason
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await context_server.stub("operator").ListPurposes(
            pb.ListPurposesRequest(), timeout=TIMEOUT
        )
    assert error_details(raised.value).reason == "CALLER_NOT_ALLOWED"


async def _assert_snapshot_is_what_was_returned(
    server: RunningContextServer, bundle: learner_context_pb2.ContextBundle
) -> bytes:
    assert bundle.input_ref.startswith("ai-context/")
    assert f"/{bundle.learner_ref}/" in bundle.input_ref
    snapshot = await server.stub("audit").GetSnapshot(
        pb.GetSnapshotRequest(input_ref=bundle.input_ref), timeout=TIMEOUT
    )
    assert snapshot.canonical_json == _without_snapshot_ref(bundle)
    assert hashlib.sha256(snapshot.canonical_json).hexdigest() == bundle.snapshot_sha256
    returned = learner_context_pb2.ContextBundle()
    returned.CopyFrom(bundle)
    returned.ClearField("input_ref")
    returned.ClearField("snapshot_sha256")
    assert snapshot.bundle == returned
    stored: bytes = snapshot.canonical_json
    return stored


async def test_a_persisted_bundle_is_stored_in_the_local_directory_exactly_as_returned(
    context_server: RunningContextServer,
) -> None:
    bundle = (await _build(context_server, "gateway", "tutor_hint", persist=True)).bundle
    stored = await _assert_snapshot_is_what_was_returned(context_server, bundle)
    on_disk = (context_server.settings.snapshot_dir / bundle.input_ref).read_bytes()
    # Sealed under the learner's data key: nothing of the bundle is on disk in the clear.
    assert stored not in on_disk
    assert bundle.learner_ref.encode() not in on_disk
    assert b"L-2041-1" not in on_disk


async def test_a_persisted_bundle_is_stored_on_the_s3_api_exactly_as_returned(
    start_context_server: StartContextServer,
    s3_endpoint: S3Endpoint,
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
    request = pb.BuildContextRequest(
        learner_id="L-2041-1",
        purpose="learning_state",
        persist=True,
        locale=locale_pb2.LOCALE_EN,
        agent_access=PARENT,
    )
    bundle = (await server.stub("toolplane").BuildContext(request, timeout=TIMEOUT)).bundle
    await _assert_snapshot_is_what_was_returned(server, bundle)


async def test_a_failed_snapshot_write_returns_the_bundle_with_an_empty_input_ref(
    start_context_server: StartContextServer,
    s3_endpoint: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
    counter_total: CounterTotal,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_endpoint.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_endpoint.secret_access_key)
    before = counter_total("nemo.context.snapshot.failures", {})
    server = await start_context_server(
        snapshot_backend="s3",
        snapshot_s3_bucket="unreachable",
        snapshot_s3_endpoint_url=f"http://127.0.0.1:{free_port()}",  # nothing listens there
        snapshot_s3_region=s3_endpoint.region,
        snapshot_write_timeout_seconds=1.0,
    )
    bundle = (await _build(server, "gateway", "tutor_hint", persist=True)).bundle
    assert bundle.input_ref == ""
    assert bundle.snapshot_sha256 == ""
    assert len(bundle.mastery) == 5
    assert counter_total("nemo.context.snapshot.failures", {}) == before + 1


async def test_learner_ref_is_stable_across_servers_with_one_key_and_differs_with_another(
    context_server: RunningContextServer, start_context_server: StartContextServer
) -> None:
    first = (await _build(context_server, "gateway", "item_generation")).bundle.learner_ref
    restarted = await start_context_server()  # another process lifetime, same key
    assert (await _build(restarted, "gateway", "item_generation")).bundle.learner_ref == first
    rekeyed = await start_context_server(pseudonym_key="another-key-" + "9" * 32)
    other = (await _build(rekeyed, "gateway", "item_generation")).bundle.learner_ref
    assert other != first
    assert other.startswith("nemo_")
