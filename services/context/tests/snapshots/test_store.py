"""Snapshots: canonical JSON, both backends, digest verification, and writes that never block."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import secrets
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import aioboto3
import grpc
import pytest
from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp

from nemo_context.snapshots.keys import SnapshotKeyRefusedError, unseal
from nemo_context.snapshots.objects import (
    LIFECYCLE_RULE_ID,
    LocalDirectoryObjects,
    S3Objects,
    SnapshotObjects,
    check_key,
)
from nemo_context.snapshots.reads import read_snapshot
from nemo_context.snapshots.store import (
    CONVERSATION_KIND,
    DigestedSnapshotStore,
    SnapshotDigestMismatchError,
    SnapshotNotFoundError,
    StoredSnapshot,
    canonical_json,
    persist_snapshot,
)
from nemo_core.db import Pool, connect, create_pool
from nemo_core.deadlines import set_time_remaining
from nemo_core.errors import ServiceError
from nemo_protos.context.v1 import conversation_pb2 as cv
from nemo_protos.context.v1 import learner_context_pb2 as lc
from nemo_testing.ports import free_port
from nemo_testing.s3 import S3Endpoint
from services.context.tests.conftest import keys_for, owner_of

KEY = re.compile(r"^ai-context/(\d{4}-\d{2}-\d{2})/(nemo_[0-9a-f]{24})/[0-9a-f-]{36}\.json$")


def new_learner_ref() -> str:
    return f"nemo_{secrets.token_hex(12)}"


def sample_bundle(learner_ref: str) -> lc.ContextBundle:
    return lc.ContextBundle(
        learner_ref=learner_ref,
        purpose="tutor_hint",
        slices=["profile", "mastery", "recent_evidence"],
        policy_version="2026-11-1",
        build_version="1.0.0",
        build_time=Timestamp(seconds=1_795_000_000),
        profile=lc.LearnerProfile(grade=8),
        mastery=[
            lc.MasteryEntry(
                node_id="math-08-algebraic-identities",
                node_title="Hằng đẳng thức",
                mastery=0.35,
                confidence=0.6,
                evidence_count=7,
                state=lc.KNOWLEDGE_STATE_GAP,
            ),
            lc.MasteryEntry(node_id="math-08-slope", node_title="Hệ số góc", evidence_count=0),
        ],
        rendered_text="Học sinh lớp 8. Đang yếu nhất: Hằng đẳng thức (35%).",
    )


def test_canonical_json_is_sorted_compact_utf8_with_proto_field_names() -> None:
    bundle = sample_bundle("nemo_0123456789ab")
    body = canonical_json(bundle)
    text = body.decode("utf-8")
    assert "Hằng đẳng thức" in text  # UTF-8, not \\u escapes
    assert '"learner_ref":"nemo_0123456789ab"' in text  # proto names, no whitespace
    assert "learnerRef" not in text
    assert text.startswith(
        '{"build_time":"2026-11-18T11:06:40Z","build_version":"1.0.0","learner_ref":"nemo_'
    )
    assert "\n" not in text
    document = json.loads(body)
    assert list(document) == sorted(document)
    assert list(document["mastery"][0]) == sorted(document["mastery"][0])
    # Unset optional measures stay missing rather than becoming 0.
    assert "mastery" not in document["mastery"][1]
    assert json_format.Parse(body, lc.ContextBundle()) == bundle


def test_canonical_json_is_stable_across_field_order() -> None:
    forward = sample_bundle("nemo_0123456789ab")
    backward = lc.ContextBundle()
    # Set fields in the opposite order: the bytes must not depend on construction order.
    backward.rendered_text = forward.rendered_text
    backward.mastery.extend(forward.mastery)
    backward.profile.CopyFrom(forward.profile)
    backward.build_time.CopyFrom(forward.build_time)
    backward.build_version = forward.build_version
    backward.policy_version = forward.policy_version
    backward.slices.extend(forward.slices)
    backward.purpose = forward.purpose
    backward.learner_ref = forward.learner_ref
    assert canonical_json(backward) == canonical_json(forward)


@pytest.fixture(params=["local", "s3"])
async def objects(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    s3_endpoint: S3Endpoint,
    s3_session: aioboto3.Session,
    s3_bucket: str,
) -> AsyncIterator[SnapshotObjects]:
    if request.param == "local":
        backend: SnapshotObjects = LocalDirectoryObjects(tmp_path / "snapshots")
    else:
        backend = S3Objects(s3_bucket, endpoint_url=s3_endpoint.url, session=s3_session)
    yield backend
    await backend.aclose()


@pytest.fixture
def store(objects: SnapshotObjects, context_pool: Pool) -> DigestedSnapshotStore:
    return DigestedSnapshotStore(
        objects, context_pool, keys=keys_for(context_pool), write_timeout_seconds=10
    )


async def overwrite(objects: SnapshotObjects, key: str, body: bytes) -> None:
    """Change a stored object behind the service's back, as an attacker or a bad restore would."""
    await objects.put(key, body)


async def test_persisted_snapshot_holds_exactly_the_bundle_and_its_digest(
    store: DigestedSnapshotStore, context_pool: Pool
) -> None:
    learner_ref = new_learner_ref()
    bundle = sample_bundle(learner_ref)
    stored = await persist_snapshot(store, owner_of(learner_ref), bundle)

    assert stored is not None
    match = KEY.match(stored.input_ref)
    assert match is not None
    assert match.group(1) == datetime.now(UTC).date().isoformat()
    assert match.group(2) == learner_ref
    body = canonical_json(bundle)
    key = await store.keys.for_learner(owner_of(learner_ref).learner_id)
    assert unseal(key.key, stored.input_ref, await store.objects.get(stored.input_ref)) == body
    assert stored.sha256 == hashlib.sha256(body).hexdigest()
    async with context_pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT learner_ref, sha256, size_bytes, key_id FROM learning.context_snapshots"
            " WHERE input_ref = $1",
            stored.input_ref,
        )
    assert row is not None
    assert dict(row) == {
        "learner_ref": learner_ref,
        "sha256": stored.sha256,
        "size_bytes": len(body),
        "key_id": key.key_id,
    }

    verified = await store.get(stored.input_ref)
    assert verified.canonical_json == body
    assert verified.sha256 == stored.sha256


async def test_tampered_object_is_detected(store: DigestedSnapshotStore) -> None:
    learner_ref = new_learner_ref()
    stored = await persist_snapshot(store, owner_of(learner_ref), sample_bundle(learner_ref))
    assert stored is not None
    forged = sample_bundle(learner_ref)
    forged.mastery[0].mastery = 0.95
    await overwrite(store.objects, stored.input_ref, canonical_json(forged))
    with pytest.raises(SnapshotDigestMismatchError):
        await store.get(stored.input_ref)


async def test_unknown_and_expired_snapshots_are_not_found(store: DigestedSnapshotStore) -> None:
    learner_ref = new_learner_ref()
    never_written = f"ai-context/2026-01-02/{learner_ref}/00000000-0000-4000-8000-000000000000.json"
    with pytest.raises(SnapshotNotFoundError):
        await store.get(never_written)

    stored = await persist_snapshot(store, owner_of(learner_ref), sample_bundle(learner_ref))
    assert stored is not None
    day = datetime.now(UTC).date()
    assert await store.objects.delete_day(day) >= 1  # what a lifecycle expiry does
    with pytest.raises(SnapshotNotFoundError):
        await store.get(stored.input_ref)


async def test_keys_of_another_shape_never_reach_the_backend(store: DigestedSnapshotStore) -> None:
    for key in ("../../etc/passwd", "ai-context/2026-01-02/L-2041-1/x.json", ""):
        with pytest.raises(ValueError, match="not a snapshot key"):
            await store.get(key)
        with pytest.raises(ValueError, match="not a snapshot key"):
            await store.objects.put(key, b"{}")


async def test_a_failed_digest_write_returns_none_and_is_counted(
    objects: SnapshotObjects,
    context_dsn: str,
    counter_total: Callable[[str, Mapping[str, str]], int],
) -> None:
    # The object can be written but the database is gone: no input_ref may point at it.
    closed_pool = await create_pool(context_dsn, min_size=0, max_size=1)
    await closed_pool.close()
    store = DigestedSnapshotStore(
        objects, closed_pool, keys=keys_for(closed_pool), write_timeout_seconds=10
    )
    learner_ref = new_learner_ref()
    before = counter_total("nemo.context.snapshot.failures", {"reason": "error"})
    assert await persist_snapshot(store, owner_of(learner_ref), sample_bundle(learner_ref)) is None
    assert counter_total("nemo.context.snapshot.failures", {"reason": "error"}) == before + 1


async def test_unreachable_s3_endpoint_gives_none_counted_and_logged_without_learner_data(
    context_pool: Pool,
    s3_session: aioboto3.Session,
    counter_total: Callable[[str, Mapping[str, str]], int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    nobody_listens = f"http://127.0.0.1:{free_port()}"
    objects = S3Objects(
        "snapshots", endpoint_url=nobody_listens, session=s3_session, timeout_seconds=1
    )
    store = DigestedSnapshotStore(
        objects, context_pool, keys=keys_for(context_pool), write_timeout_seconds=5
    )
    learner_ref = new_learner_ref()
    before = counter_total("nemo.context.snapshot.failures", {})
    try:
        with caplog.at_level(logging.WARNING, logger="nemo_context.snapshots.store"):
            result = await persist_snapshot(
                store, owner_of(learner_ref), sample_bundle(learner_ref)
            )
    finally:
        await objects.aclose()
    assert result is None
    assert counter_total("nemo.context.snapshot.failures", {}) == before + 1
    (record,) = [r for r in caplog.records if r.name == "nemo_context.snapshots.store"]
    assert "snapshot write failed" in record.getMessage()
    logged = json.dumps({k: str(v) for k, v in vars(record).items()})
    assert learner_ref not in logged
    assert "Hằng đẳng thức" not in logged


@pytest.fixture
async def black_holed_objects(s3_session: aioboto3.Session) -> AsyncIterator[S3Objects]:
    """An S3 client whose endpoint accepts connections and never answers, like a black-holed
    load balancer."""
    connections: list[asyncio.StreamWriter] = []

    async def hold(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    objects = S3Objects(
        "snapshots", endpoint_url=f"http://127.0.0.1:{port}", session=s3_session, timeout_seconds=30
    )
    try:
        yield objects
    finally:
        await objects.aclose()
        for writer in connections:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_a_hanging_endpoint_is_abandoned_at_the_write_timeout(
    context_pool: Pool,
    black_holed_objects: S3Objects,
    counter_total: Callable[[str, Mapping[str, str]], int],
) -> None:
    store = DigestedSnapshotStore(
        black_holed_objects, context_pool, keys=keys_for(context_pool), write_timeout_seconds=0.3
    )
    learner_ref = new_learner_ref()
    before = counter_total("nemo.context.snapshot.failures", {"reason": "timeout"})
    result = await persist_snapshot(store, owner_of(learner_ref), sample_bundle(learner_ref))
    assert result is None
    assert counter_total("nemo.context.snapshot.failures", {"reason": "timeout"}) == before + 1


async def test_retention_rule_is_put_once_and_keeps_other_rules(
    s3_endpoint: S3Endpoint, s3_session: aioboto3.Session, s3_bucket: str
) -> None:
    other_rule = {
        "ID": "expire-tmp",
        "Filter": {"Prefix": "tmp/"},
        "Status": "Enabled",
        "Expiration": {"Days": 1},
    }
    async with s3_session.client("s3", endpoint_url=s3_endpoint.url) as s3:
        await s3.put_bucket_lifecycle_configuration(
            Bucket=s3_bucket, LifecycleConfiguration={"Rules": [other_rule]}
        )
    objects = S3Objects(s3_bucket, endpoint_url=s3_endpoint.url, session=s3_session)
    try:
        await objects.apply_retention_rule(30)
        await objects.apply_retention_rule(14)
    finally:
        await objects.aclose()
    async with s3_session.client("s3", endpoint_url=s3_endpoint.url) as s3:
        rules = (await s3.get_bucket_lifecycle_configuration(Bucket=s3_bucket))["Rules"]
    by_id = {rule["ID"]: rule for rule in rules}
    assert set(by_id) == {"expire-tmp", LIFECYCLE_RULE_ID}
    ours = by_id[LIFECYCLE_RULE_ID]
    assert ours["Expiration"] == {"Days": 14}
    assert ours["Status"] == "Enabled"
    assert ours["Filter"] == {"Prefix": "ai-context/"}
    assert ours["NoncurrentVersionExpiration"] == {"NoncurrentDays": 1}


async def test_purging_a_day_of_a_versioned_bucket_leaves_no_version_behind(
    s3_endpoint: S3Endpoint, s3_session: aioboto3.Session, s3_bucket: str
) -> None:
    key = f"ai-context/2026-01-02/{new_learner_ref()}/00000000-0000-4000-8000-000000000001.json"
    kept = f"ai-context/2026-01-03/{new_learner_ref()}/00000000-0000-4000-8000-000000000002.json"
    async with s3_session.client("s3", endpoint_url=s3_endpoint.url) as s3:
        await s3.put_bucket_versioning(
            Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"}
        )
        for body in (b"first", b"second"):  # a replaced version, then the current one
            await s3.put_object(Bucket=s3_bucket, Key=key, Body=body)
        await s3.put_object(Bucket=s3_bucket, Key=kept, Body=b"kept")
    objects = S3Objects(s3_bucket, endpoint_url=s3_endpoint.url, session=s3_session)
    try:
        assert await objects.delete_day(date(2026, 1, 2)) == 1
    finally:
        await objects.aclose()
    async with s3_session.client("s3", endpoint_url=s3_endpoint.url) as s3:
        listed = await s3.list_object_versions(Bucket=s3_bucket, Prefix="ai-context/")
    left = [item["Key"] for item in (*listed.get("Versions", []), *listed.get("DeleteMarkers", []))]
    assert left == [kept]


async def _key_id(pool: Pool, input_ref: str) -> uuid.UUID:
    key_id: uuid.UUID = await pool.fetchval(
        "SELECT key_id FROM learning.context_snapshots WHERE input_ref = $1", input_ref
    )
    return key_id


async def test_local_snapshots_are_private_files(tmp_path: Path, context_pool: Pool) -> None:
    store = DigestedSnapshotStore(
        LocalDirectoryObjects(tmp_path),
        context_pool,
        keys=keys_for(context_pool),
        write_timeout_seconds=10,
    )
    learner_ref = new_learner_ref()
    stored = await persist_snapshot(store, owner_of(learner_ref), sample_bundle(learner_ref))
    assert isinstance(stored, StoredSnapshot)
    path = tmp_path / stored.input_ref
    # Sealed under the learner's data key: the file holds none of the bundle in the clear.
    data_key = await store.keys.by_id(await _key_id(context_pool, stored.input_ref))
    assert data_key is not None
    assert learner_ref.encode() not in path.read_bytes()
    assert unseal(data_key, stored.input_ref, path.read_bytes()) == canonical_json(
        sample_bundle(learner_ref)
    )
    assert path.stat().st_mode & 0o077 == 0
    assert path.parent.stat().st_mode & 0o077 == 0
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".tmp-")]


async def test_unreadable_storage_is_unavailable_not_internal(
    tmp_path: Path, context_pool: Pool, s3_session: aioboto3.Session
) -> None:
    learner_ref = new_learner_ref()
    written = DigestedSnapshotStore(
        LocalDirectoryObjects(tmp_path),
        context_pool,
        keys=keys_for(context_pool),
        write_timeout_seconds=10,
    )
    stored = await persist_snapshot(written, owner_of(learner_ref), sample_bundle(learner_ref))
    assert stored is not None
    # The digest is recorded, but the storage the reader points at does not answer.
    dead = S3Objects(
        "snapshots",
        endpoint_url=f"http://127.0.0.1:{free_port()}",
        session=s3_session,
        timeout_seconds=1,
    )
    try:
        with pytest.raises(ServiceError) as caught:
            await read_snapshot(
                DigestedSnapshotStore(
                    dead, context_pool, keys=keys_for(context_pool), write_timeout_seconds=10
                ),
                stored.input_ref,
            )
    finally:
        await dead.aclose()
    assert (caught.value.code, caught.value.reason) == (
        grpc.StatusCode.UNAVAILABLE,
        "SNAPSHOT_STORE_UNAVAILABLE",
    )


async def test_a_hanging_write_gives_up_at_the_callers_deadline(
    context_pool: Pool, black_holed_objects: S3Objects
) -> None:
    # The store would wait 30 s; the RPC being served has 0.5 s left.
    store = DigestedSnapshotStore(
        black_holed_objects, context_pool, keys=keys_for(context_pool), write_timeout_seconds=30
    )
    learner_ref = new_learner_ref()

    async def within_an_rpc() -> StoredSnapshot | None:
        set_time_remaining(0.5)
        return await persist_snapshot(store, owner_of(learner_ref), sample_bundle(learner_ref))

    # A bound on correctness, not speed: the caller's deadline must be respected.
    async with asyncio.timeout(5):
        result = await asyncio.create_task(within_an_rpc())
    assert result is None


@pytest.mark.parametrize("digits", [24, 12])
def test_keys_of_wide_refs_and_of_refs_written_before_they_widened_are_snapshot_keys(
    digits: int,
) -> None:
    key = f"ai-context/2026-12-01/nemo_{'a' * digits}/{uuid.uuid4()}.json"
    assert check_key(key) == key


@pytest.mark.parametrize("digits", [11, 13, 23, 25])
def test_refs_of_other_widths_are_not(digits: int) -> None:
    with pytest.raises(ValueError, match="not a snapshot key"):
        check_key(f"ai-context/2026-12-01/nemo_{'a' * digits}/{uuid.uuid4()}.json")


def _at(seconds: int) -> Timestamp:
    return Timestamp(seconds=1_795_000_000 + seconds)


def bundle_with_every_timestamp(learner_ref: str) -> lc.ContextBundle:
    bundle = sample_bundle(learner_ref)
    bundle.recent_evidence.items.add(node_id="math-08-slope", correct=True, observe_time=_at(1))
    bundle.recent_evidence.items.add(node_id="math-08-slope", correct=False, observe_time=_at(2))
    bundle.goal.CopyFrom(lc.Goal(title="Hệ số góc", target="80%", due_time=_at(3)))
    bundle.retention.add(node_id="math-08-slope", node_title="Hệ số góc", due_time=_at(4))
    bundle.learning_progress.last_activity_time.CopyFrom(_at(5))
    bundle.learning_progress.provenance.CopyFrom(lc.ModelProvenance(version=3, compute_time=_at(6)))
    bundle.readiness.provenance.CopyFrom(lc.ModelProvenance(version=4, compute_time=_at(7)))
    return bundle


# The timestamp names a bundle had before the v1 tidy, as the snapshots of that time hold them;
# spelt out here (message path, old key), not taken from the module under test.
WRITTEN_BEFORE_THE_TIDY = (
    ((), "build_time", "built_at"),
    (("recent_evidence", "items"), "observe_time", "observed_at"),
    (("goal",), "due_time", "due_at"),
    (("retention",), "due_time", "due_at"),
    (("learning_progress",), "last_activity_time", "last_activity_at"),
    (("learning_progress", "provenance"), "compute_time", "computed_at"),
    (("readiness", "provenance"), "compute_time", "computed_at"),
)


def _nodes(document: Any, path: tuple[str, ...]) -> list[dict[str, Any]]:
    if not path:
        return document if isinstance(document, list) else [document]
    value = document[path[0]]
    return [
        n
        for item in (value if isinstance(value, list) else [value])
        for n in _nodes(item, path[1:])
    ]


def written_before_the_tidy(bundle: lc.ContextBundle) -> bytes:
    document = json.loads(canonical_json(bundle))
    for path, current, old in WRITTEN_BEFORE_THE_TIDY:
        for node in _nodes(document, path):
            node[old] = node.pop(current)
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


async def test_a_snapshot_stored_under_the_old_timestamp_names_reads_back_whole(
    store: DigestedSnapshotStore,
) -> None:
    learner_ref = new_learner_ref()
    bundle = bundle_with_every_timestamp(learner_ref)
    body = written_before_the_tidy(bundle)
    assert b"_time" not in body
    stored = await store.put(owner_of(learner_ref), body)

    snapshot = (await read_snapshot(store, stored.input_ref)).message
    assert snapshot.canonical_json == body  # the stored bytes, as hashed, never rewritten
    assert snapshot.sha256 == hashlib.sha256(body).hexdigest()
    assert snapshot.bundle == bundle


async def test_a_snapshot_of_the_current_names_reads_back_unchanged(
    store: DigestedSnapshotStore,
) -> None:
    learner_ref = new_learner_ref()
    bundle = bundle_with_every_timestamp(learner_ref)
    stored = await persist_snapshot(store, owner_of(learner_ref), bundle)
    assert stored is not None
    assert (await read_snapshot(store, stored.input_ref)).message.bundle == bundle


async def test_struct_keys_that_look_like_old_names_are_data_and_stay(
    store: DigestedSnapshotStore,
) -> None:
    learner_ref = new_learner_ref()
    bundle = cv.ConversationBundle(session_id="S-1", turn_id="T-1", learner_ref=learner_ref)
    json_format.ParseDict({"built_at": "hôm qua", "due_at": {"built_at": 1}},
                          bundle.state.extracted_info)  # fmt: skip
    stored = await store.put(owner_of(learner_ref), canonical_json(bundle), kind=CONVERSATION_KIND)
    snapshot = (await read_snapshot(store, stored.input_ref)).message
    assert snapshot.conversation_bundle == bundle


async def test_a_key_destroyed_under_a_cached_copy_fails_one_snapshot_and_is_read_again(
    objects: SnapshotObjects, context_pool: Pool, owner_dsn: str
) -> None:
    store = DigestedSnapshotStore(
        objects, context_pool, keys=keys_for(context_pool), write_timeout_seconds=10
    )
    learner_ref = new_learner_ref()
    owner = owner_of(learner_ref)
    first = await persist_snapshot(store, owner, sample_bundle(learner_ref))
    assert first is not None
    conn = await connect(owner_dsn)
    try:
        # What an erasure or a purge of the key does, while this store still holds it.
        await conn.execute(
            "DELETE FROM learning.snapshot_keys WHERE subject = $1",
            store.keys.master.subject(owner.learner_id),
        )
    finally:
        await conn.close()
    assert await persist_snapshot(store, owner, sample_bundle(learner_ref)) is None
    # The object sealed under the destroyed key, which nothing can open, is not left behind.
    assert await objects.learner_keys([learner_ref]) == [first.input_ref]
    third = await persist_snapshot(store, owner, sample_bundle(learner_ref))
    assert third is not None
    assert (await store.get(third.input_ref)).sha256 == third.sha256
    with pytest.raises(SnapshotNotFoundError):
        await store.get(first.input_ref)  # its digest went with its key
    assert sorted(await objects.learner_keys([learner_ref])) == sorted(
        [first.input_ref, third.input_ref]
    )


@pytest.mark.parametrize("kind", ["restricted", "erased"])
async def test_no_snapshot_key_is_created_or_read_for_a_blocked_learner(
    objects: SnapshotObjects, context_pool: Pool, owner_dsn: str, kind: str
) -> None:
    learner_ref = new_learner_ref()
    owner = owner_of(learner_ref)
    store = DigestedSnapshotStore(
        objects, context_pool, keys=keys_for(context_pool), write_timeout_seconds=10
    )
    first = await persist_snapshot(store, owner, sample_bundle(learner_ref))
    assert first is not None
    subject = store.keys.master.subject(owner.learner_id)
    conn = await connect(owner_dsn)
    try:
        await conn.execute(
            "INSERT INTO rights.blocks (subject, kind, request_id) VALUES ($1, $2, 'KEY-TEST')",
            subject, kind,
        )  # fmt: skip
        if kind == "erased":
            await conn.execute("DELETE FROM learning.snapshot_keys WHERE subject = $1", subject)
        # A replica that holds no copy of the key, with a build under way for the learner.
        replica = DigestedSnapshotStore(
            objects, context_pool, keys=keys_for(context_pool), write_timeout_seconds=10
        )
        with pytest.raises(SnapshotKeyRefusedError):
            await replica.keys.for_learner(owner.learner_id)
        assert await persist_snapshot(replica, owner, sample_bundle(learner_ref)) is None
        assert await conn.fetchval(
            "SELECT count(*) FROM learning.snapshot_keys WHERE subject = $1", subject
        ) == (1 if kind == "restricted" else 0)  # fmt: skip
        assert await objects.learner_keys([learner_ref]) == [first.input_ref]
        # Other learners are not concerned.
        other_ref = new_learner_ref()
        assert await persist_snapshot(replica, owner_of(other_ref), sample_bundle(other_ref))
    finally:
        await conn.execute("DELETE FROM rights.blocks WHERE subject = $1", subject)
        await conn.close()
