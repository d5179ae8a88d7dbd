"""Retention: expired snapshot days and their digests are deleted, recent ones kept."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import aioboto3
import pytest

from nemo_context.snapshots.objects import LocalDirectoryObjects, S3Objects, SnapshotObjects
from nemo_context.snapshots.retention import purge_snapshots, retention_cutoff
from nemo_context.snapshots.store import (
    DigestedSnapshotStore,
    SnapshotNotFoundError,
    StoredSnapshot,
    persist_snapshot,
)
from nemo_core.db import Pool, connect
from nemo_protos.context.v1 import learner_context_pb2 as lc
from nemo_testing.s3 import S3Endpoint
from services.context.tests.conftest import keys_for, owner_of

TODAY = datetime.now(UTC).date()


@pytest.fixture(params=["local", "s3"])
async def objects(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    s3_endpoint: S3Endpoint,
    s3_session: aioboto3.Session,
    s3_bucket: str,
) -> AsyncIterator[SnapshotObjects]:
    backend: SnapshotObjects = (
        LocalDirectoryObjects(tmp_path)
        if request.param == "local"
        else S3Objects(s3_bucket, endpoint_url=s3_endpoint.url, session=s3_session)
    )
    yield backend
    await backend.aclose()


async def write_on(
    objects: SnapshotObjects, pool: Pool, day: date, learner_ref: str
) -> StoredSnapshot:
    written_at = datetime.combine(day, datetime.min.time(), UTC) + timedelta(hours=13)
    store = DigestedSnapshotStore(
        objects, pool, keys=keys_for(pool), write_timeout_seconds=10, clock=lambda: written_at
    )
    stored = await persist_snapshot(
        store,
        owner_of(learner_ref),
        lc.ContextBundle(learner_ref=learner_ref, purpose="tutor_hint"),
    )
    assert stored is not None
    return stored


async def digest_rows(owner_dsn: str, refs: list[str]) -> set[str]:
    conn = await connect(owner_dsn)
    try:
        rows = await conn.fetch(
            "SELECT input_ref FROM learning.context_snapshots WHERE input_ref = ANY($1)", refs
        )
    finally:
        await conn.close()
    return {row["input_ref"] for row in rows}


def test_the_cutoff_keeps_exactly_the_retention_period() -> None:
    assert retention_cutoff(date(2026, 3, 31), 30) == date(2026, 3, 1)
    with pytest.raises(ValueError, match="positive"):
        retention_cutoff(date(2026, 3, 31), 0)


async def test_purge_deletes_expired_days_and_their_digests_only(
    objects: SnapshotObjects, context_pool: Pool, owner_dsn: str
) -> None:
    learner_ref = f"nemo_{secrets.token_hex(6)}"
    # Far enough in the past that no other test's snapshots share these days.
    expired_day = TODAY - timedelta(days=400 + secrets.randbelow(200))
    boundary_day = TODAY - timedelta(days=30)  # the first day that is kept
    expired = [await write_on(objects, context_pool, expired_day, learner_ref) for _ in range(3)]
    expired.append(
        await write_on(objects, context_pool, boundary_day - timedelta(days=1), learner_ref)
    )
    kept = [
        await write_on(objects, context_pool, boundary_day, learner_ref),
        await write_on(objects, context_pool, TODAY, learner_ref),
    ]
    lines: list[str] = []
    conn = await connect(owner_dsn)
    try:
        report = await purge_snapshots(
            objects, conn, retention_days=30, today=TODAY, progress=lines.append
        )
    finally:
        await conn.close()

    assert report.cutoff == boundary_day
    assert (report.days, report.objects) == (2, 4)
    assert report.digests >= 4
    assert f"deleted 3 snapshot(s) of {expired_day.isoformat()}" in lines
    assert lines[-1].startswith(f"deleted {report.digests} digest row(s) older than ")
    refs = [stored.input_ref for stored in expired + kept]
    assert await digest_rows(owner_dsn, refs) == {stored.input_ref for stored in kept}
    assert await objects.days() == sorted({boundary_day, TODAY})
    store = DigestedSnapshotStore(
        objects, context_pool, keys=keys_for(context_pool), write_timeout_seconds=10
    )
    for stored in kept:
        assert (await store.get(stored.input_ref)).sha256 == stored.sha256
    for stored in expired:
        with pytest.raises(SnapshotNotFoundError):
            await store.get(stored.input_ref)


async def test_purging_nothing_is_fine(tmp_path: Path, owner_dsn: str) -> None:
    conn = await connect(owner_dsn)
    try:
        report = await purge_snapshots(
            LocalDirectoryObjects(tmp_path / "never-written"), conn, retention_days=3650
        )
    finally:
        await conn.close()
    assert (report.days, report.objects) == (0, 0)
