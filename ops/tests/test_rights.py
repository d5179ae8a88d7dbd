"""A family's rights, end to end, on real PostgreSQL, the S3 API (versioned bucket) and the
local directory: export holds everything and nobody else's; erasure leaves no trace anywhere
(checked from a pg_dump and every object version, not from the code under test); other
learners are untouched; a copy set aside cannot be opened; a restore from a dump taken before
the erasure is erased again by replay.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import aioboto3
import pgserver._commands
import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_context.rights import requests as rights_requests
from nemo_context.rights.requests import Kind, RequestError, State
from nemo_context.snapshots.objects import LocalDirectoryObjects, S3Objects, SnapshotObjects
from nemo_core.db import Connection, Pool, connect, create_pool, dsn_with
from nemo_ops.cli import main
from nemo_ops.learner_rights import RightsWork, erase, export, process, replay
from nemo_ops.migrate import migrate, role_passwords_from_env
from nemo_ops.seed import seed
from nemo_testing.s3 import S3Endpoint
from ops.tests.rights_population import (
    IDENTITIES,
    MASTER_KEY,
    PSEUDONYM_KEY,
    STAFF_USER,
    Learner,
    new_learner_id,
    seed_learner,
    table_rows,
)

DatabaseFactory = Callable[[], Awaitable[str]]
PG_BIN = Path(pgserver._commands.POSTGRES_BIN_PATH)
SCHEMAS = ("learning", "knowledge", "toolplane", "rights")


def trace_regex(learner: Learner) -> re.Pattern[str]:
    """The learner's id, own account and ref (either width) as whole tokens: the oracle the
    scans below use, written apart from the code under test."""
    keys = "|".join(re.escape(key) for key in (learner.learner_id, learner.account_id))
    ref = re.escape(learner.ref[:17]) + f"(?:{re.escape(learner.ref[17:])})?"
    return re.compile(
        rf"(?<![A-Za-z0-9_-])(?:{keys})(?![A-Za-z0-9_-])|(?<![0-9a-f]){ref}(?![0-9a-f])",
        re.IGNORECASE,
    )


async def new_database(make_empty_database: DatabaseFactory) -> str:
    dsn = await make_empty_database()
    await migrate(dsn, role_passwords=role_passwords_from_env(os.environ))
    await seed(dsn)
    return dsn


@pytest.fixture(scope="module")
def rights_dsn(make_empty_database: DatabaseFactory) -> str:
    """A database of this module's own: erasure deletes, and replay restores."""
    return asyncio.run(new_database(make_empty_database))


@pytest.fixture
async def owner(rights_dsn: str) -> AsyncIterator[Connection]:
    conn = await connect(rights_dsn)
    yield conn
    await conn.close()


@pytest.fixture
async def owner_pool(rights_dsn: str) -> AsyncIterator[Pool]:
    pool = await create_pool(rights_dsn, max_size=2)
    yield pool
    await pool.close()


@pytest.fixture
async def context_pool(rights_dsn: str) -> AsyncIterator[Pool]:
    pool = await create_pool(dsn_with(rights_dsn, user="nemo_context"), max_size=2)
    yield pool
    await pool.close()


@pytest.fixture
def s3_session(s3_endpoint: S3Endpoint) -> aioboto3.Session:
    return s3_endpoint.session()


@pytest.fixture
async def bucket(s3_endpoint: S3Endpoint, s3_session: aioboto3.Session) -> str:
    """A versioned bucket: an erasure must leave no old version behind."""
    name = f"nemo-rights-{secrets.token_hex(4)}"
    async with s3_session.client("s3", endpoint_url=s3_endpoint.url) as s3:
        await s3.create_bucket(Bucket=name)
        await s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


@pytest.fixture(params=["local", "s3"])
async def objects(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    s3_endpoint: S3Endpoint,
    s3_session: aioboto3.Session,
    bucket: str,
) -> AsyncIterator[SnapshotObjects]:
    backend: SnapshotObjects
    if request.param == "s3":
        backend = S3Objects(bucket, endpoint_url=s3_endpoint.url, session=s3_session)
    else:
        backend = LocalDirectoryObjects(tmp_path / "snapshots")
    yield backend
    await backend.aclose()


def work_on(pool: Pool, objects: SnapshotObjects) -> RightsWork:
    return RightsWork(pool, objects, IDENTITIES, "operator:test-privacy")


def files_of(objects: LocalDirectoryObjects) -> dict[str, bytes]:
    """Every file under the directory of ``objects``, by its path there."""
    root: Path = objects._root  # the test reads the directory it gave
    return {
        str(path.relative_to(root)): path.read_bytes() for path in root.rglob("*") if path.is_file()
    }


async def stored_bytes(
    objects: SnapshotObjects, s3_session: aioboto3.Session, s3_endpoint: S3Endpoint
) -> dict[str, bytes]:
    """Every stored thing of the backend, by name: each object version and delete marker of
    the bucket (versions named key@version), each file of the directory."""
    if isinstance(objects, LocalDirectoryObjects):
        return await asyncio.to_thread(files_of, objects)
    assert isinstance(objects, S3Objects)
    found: dict[str, bytes] = {}
    async with s3_session.client("s3", endpoint_url=s3_endpoint.url) as s3:
        paginator = s3.get_paginator("list_object_versions")
        async for page in paginator.paginate(Bucket=objects.bucket):
            for marker in page.get("DeleteMarkers", []):
                found[f"{marker['Key']}@{marker['VersionId']}"] = b""
            for version in page.get("Versions", []):
                response = await s3.get_object(
                    Bucket=objects.bucket, Key=version["Key"], VersionId=version["VersionId"]
                )
                async with response["Body"] as stream:
                    found[f"{version['Key']}@{version['VersionId']}"] = await stream.read()
    return found


def dump(dsn: str, path: Path, *, custom: bool = False) -> str:
    """pg_dump of the whole database (every schema), as the text a backup holds."""
    args = [str(PG_BIN / "pg_dump"), "--dbname", dsn, "--file", str(path)]
    subprocess.run([*args, "--format", "custom"] if custom else args, check=True, timeout=120)
    return "" if custom else path.read_text()


async def traces_anywhere(
    dsn: str,
    tmp_path: Path,
    objects: SnapshotObjects,
    s3_session: aioboto3.Session,
    s3_endpoint: S3Endpoint,
    learner: Learner,
) -> list[str]:
    found = trace_regex(learner)
    text = await asyncio.to_thread(dump, dsn, tmp_path / f"scan-{secrets.token_hex(4)}.sql")
    hits = [line[:120] for line in text.splitlines() if found.search(line)]
    stored = await stored_bytes(objects, s3_session, s3_endpoint)
    hits += [name for name, body in stored.items() if found.search(name)]
    hits += [name for name, body in stored.items() if found.search(body.decode("latin-1"))]
    return hits


async def test_export_erase_verify_and_replay_after_a_restore(
    rights_dsn: str,
    make_empty_database: DatabaseFactory,
    owner: Connection,
    owner_pool: Pool,
    context_pool: Pool,
    objects: SnapshotObjects,
    s3_session: aioboto3.Session,
    s3_endpoint: S3Endpoint,
    tmp_path: Path,
) -> None:
    learner = await seed_learner(owner, context_pool, objects, new_learner_id(), calls=3)
    other = await seed_learner(owner, context_pool, objects, new_learner_id())
    work = work_on(owner_pool, objects)

    # Export: all of it, nobody else's, nobody outside the circle.
    out = tmp_path / "export"
    manifest = await export(
        work, learner.learner_id, "EXP-1-" + secrets.token_hex(3), "U-2041-P1", out
    )
    snapshots = json.loads((out / "snapshots.json").read_text())
    assert [entry["input_ref"] for entry in snapshots] == learner.input_refs
    assert all(entry["verified"] for entry in snapshots)
    for entry in snapshots:
        assert learner.ref in (out / entry["file"]).read_text()
    assert len(json.loads((out / "audit.json").read_text())) == 3
    assert len(json.loads((out / "approvals.json").read_text())) == 3
    conversations = json.loads((out / "conversations.json").read_text())
    assert [len(chat["messages"]) for chat in conversations] == [4]
    assert len(json.loads((out / "items.json").read_text())) == 1
    assert len(json.loads((out / "agent_tokens.json").read_text())) == 1
    assert "README.md" in {path.name for path in out.iterdir()}
    assert set(manifest["files"]) >= {"audit.json", "snapshots.json", "conversations.json"}
    exported = "\n".join(
        body.decode()
        for body in (await asyncio.to_thread(files_of, LocalDirectoryObjects(out))).values()
    )
    assert not trace_regex(other).search(exported)
    assert STAFF_USER not in exported
    assert "answer_key" not in exported

    # A sealed copy set aside before the erasure, and a backup.
    aside = await objects.get(learner.input_refs[0])
    backup = tmp_path / "before.dump"
    await asyncio.to_thread(dump, rights_dsn, backup, custom=True)
    others_before = await table_rows(owner, SCHEMAS[:3])

    request_id = "ERA-1-" + secrets.token_hex(3)
    receipt = await erase(work, learner.learner_id, request_id, "U-2041-P1")
    assert receipt["verified"], receipt
    assert receipt["removed"]["snapshot_keys"] == 1
    assert receipt["removed"]["snapshot_objects"] >= len(learner.input_refs)
    assert receipt["removed"]["toolplane.approvals"] == 3
    assert receipt["verification"]["scanned"] > 30
    assert (
        await traces_anywhere(rights_dsn, tmp_path, objects, s3_session, s3_endpoint, learner) == []
    )
    # The other learner's rows are all still there, unchanged.
    after = await table_rows(owner, SCHEMAS[:3])
    other_traces = trace_regex(other)
    for table, rows in others_before.items():
        kept = [row for row in rows if other_traces.search(row)]
        assert set(kept) <= set(after[table]), table
    # Re-running is harmless and says the same.
    again = await erase(work, learner.learner_id, request_id, "U-2041-P1")
    assert again["verified"]
    assert again["removed"]["snapshot_keys"] == 1

    # The copy set aside opens under no key the database still holds.
    for row in await owner.fetch("SELECT id, wrapped FROM learning.snapshot_keys"):
        key = IDENTITIES.master.unwrap(row["id"], bytes(row["wrapped"]))
        with pytest.raises(InvalidTag):
            AESGCM(key).decrypt(aside[1:13], aside[13:], learner.input_refs[0].encode())

    # A restore from the backup brings the learner back; replay erases it again.
    restored = await make_empty_database()
    await asyncio.to_thread(
        subprocess.run,
        [str(PG_BIN / "pg_restore"), "--dbname", restored, "--no-owner", str(backup)],
        check=True,
        timeout=120,
    )
    assert await traces_anywhere(restored, tmp_path, objects, s3_session, s3_endpoint, learner)
    restored_pool = await create_pool(restored, max_size=2)
    try:
        replayed = await replay(work_on(restored_pool, objects), progress=lambda _line: None)
    finally:
        await restored_pool.close()
    assert [receipt["request_id"] for receipt in replayed] == [request_id]
    assert (
        await traces_anywhere(restored, tmp_path, objects, s3_session, s3_endpoint, learner) == []
    )


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    others=st.lists(st.sampled_from(["prefix", "suffix", "random"]), min_size=1, max_size=3),
    calls=st.integers(0, 3),
)
async def test_erasing_one_learner_leaves_every_other_learner_as_it_was(
    owner: Connection,
    owner_pool: Pool,
    context_pool: Pool,
    tmp_path: Path,
    others: list[str],
    calls: int,
) -> None:
    objects = LocalDirectoryObjects(tmp_path / f"snapshots-{secrets.token_hex(3)}")
    target_id = new_learner_id()
    ids = {
        "prefix": lambda: f"{target_id}{secrets.randbelow(10)}",  # L-…-7 and L-…-70
        "suffix": lambda: f"X{target_id}",
        "random": new_learner_id,
    }
    target = await seed_learner(owner, context_pool, objects, target_id, calls=calls)
    population = [
        await seed_learner(owner, context_pool, objects, ids[kind](), calls=calls)
        for kind in dict.fromkeys(others)
    ]
    before = await table_rows(owner, SCHEMAS[:3])
    files_before = await asyncio.to_thread(files_of, objects)
    receipt = await erase(work_on(owner_pool, objects), target_id, "P-" + secrets.token_hex(4), "-")
    assert receipt["verified"], receipt
    after = await table_rows(owner, SCHEMAS[:3])
    for other in population:
        found = trace_regex(other)
        for table, rows in before.items():
            theirs = [
                row for row in rows if found.search(row) and not trace_regex(target).search(row)
            ]
            assert set(theirs) <= set(after[table]), (table, other.learner_id)
        files_after = await asyncio.to_thread(files_of, objects)
        for key in other.input_refs:
            assert files_after[key] == files_before[key]
    await objects.aclose()


def test_the_command_needs_an_operator_and_the_keys(
    rights_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("NEMO_CONTEXT_SNAPSHOT_DIR", str(tmp_path))
    args = [
        "rights",
        "erase",
        "--learner",
        "L-2041-3",
        "--request-id",
        "R-1",
        "--database-url",
        rights_dsn,
    ]
    assert main(args) == 1
    assert "NEMO_CONTEXT_SNAPSHOT_MASTER_KEY_FILE" in capsys.readouterr().err
    monkeypatch.setenv("NEMO_CONTEXT_PSEUDONYM_KEY", PSEUDONYM_KEY)
    monkeypatch.setenv("NEMO_CONTEXT_SNAPSHOT_MASTER_KEY", MASTER_KEY)
    monkeypatch.delenv("NEMO_OPERATOR_TOKEN", raising=False)
    assert main(args) == 1
    assert "no valid operator credential" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(
            [
                "rights",
                "erase",
                "--learner",
                "x",
                "--request-id",
                "R-1",
                "--database-url",
                rights_dsn,
            ]
        )


async def test_process_carries_out_the_erasures_the_platform_recorded(
    owner: Connection, owner_pool: Pool, context_pool: Pool, tmp_path: Path
) -> None:
    objects = LocalDirectoryObjects(tmp_path / "snapshots")
    learner = await seed_learner(owner, context_pool, objects, new_learner_id())
    request_id = "RPC-" + secrets.token_hex(4)
    # What SubmitRightsRequest leaves: the request, acknowledged, and the learner blocked.
    await rights_requests.open_request(
        owner, request_id, Kind.ERASURE, IDENTITIES.master.subject(learner.learner_id),
        requested_by="U-2041-P1", requested_via="platform", now=datetime.now(UTC),
    )  # fmt: skip
    receipts = await process(work_on(owner_pool, objects), progress=lambda _line: None)
    assert [receipt["request_id"] for receipt in receipts] == [request_id]
    stored = await rights_requests.get_request(owner, request_id)
    assert stored is not None
    assert stored.state is State.COMPLETED
    assert stored.receipt is not None
    assert stored.receipt["verified"]
    assert await process(work_on(owner_pool, objects), progress=lambda _line: None) == []
    await objects.aclose()


async def test_a_mistyped_learner_gets_no_request_and_no_receipt(
    owner: Connection, owner_pool: Pool, tmp_path: Path
) -> None:
    objects = LocalDirectoryObjects(tmp_path / "snapshots")
    request_id = "TYPO-" + secrets.token_hex(4)
    with pytest.raises(RequestError):
        await erase(work_on(owner_pool, objects), "L-9999-typo-1", request_id, "U-2041-P1")
    assert await rights_requests.get_request(owner, request_id) is None
    assert await objects.ledger() == {}
    await objects.aclose()
