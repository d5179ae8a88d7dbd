"""A family's rights, end to end, on real PostgreSQL, the S3 API (versioned bucket) and the
local directory: export holds everything and nobody else's; erasure leaves no trace anywhere
(checked from a pg_dump and every object version, not from the code under test), snapshots
written under an earlier pseudonym key included; other learners are untouched; a copy set aside
opens before and cannot be opened after; a restore from a dump taken before the erasure is
erased again by replay; builds racing an erasure leave nothing behind.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import re
import secrets
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import aioboto3
import grpc.aio
import pgserver._commands
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from nemo_context.app import SERVICE_NAME, build
from nemo_context.rights import requests as rights_requests
from nemo_context.rights.ledger import read_entries
from nemo_context.rights.requests import Kind, RequestError, State
from nemo_context.settings import ContextSettings
from nemo_context.snapshots.keys import DataKeys, SnapshotSealError, unseal
from nemo_context.snapshots.objects import LocalDirectoryObjects, S3Objects, SnapshotObjects
from nemo_core.client import create_channel
from nemo_core.db import Connection, Pool, connect, create_pool, dsn_with
from nemo_core.errors import error_details
from nemo_core.server import Server
from nemo_ops.cli import main
from nemo_ops.learner_rights import RightsWork, erase, export, process, replay, verify
from nemo_ops.migrate import migrate, role_passwords_from_env
from nemo_ops.seed import seed
from nemo_protos.context.v1 import context_service_pb2 as context_pb
from nemo_protos.context.v1 import context_service_pb2_grpc
from nemo_testing.s3 import S3Endpoint
from ops.tests.rights_population import (
    IDENTITIES,
    MASTER_KEY,
    PARENT_USER,
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
    """The learner's id, own account and refs (under the current and the earlier pseudonym key,
    either width) as whole tokens: the oracle the scans below use, written apart from the code
    under test."""
    keys = "|".join(re.escape(key) for key in (learner.learner_id, learner.account_id))
    refs = "|".join(
        re.escape(ref[:17]) + f"(?:{re.escape(ref[17:])})?"
        for ref in (learner.ref, learner.earlier_ref)
    )
    return re.compile(
        rf"(?<![A-Za-z0-9_-])(?:{keys})(?![A-Za-z0-9_-])|(?<![0-9a-f])(?:{refs})(?![0-9a-f])",
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
    """The work of an erasure with no context server running: no replica to wait for."""
    return RightsWork(pool, objects, IDENTITIES, "operator:test-privacy", settle_seconds=0)


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


async def objects_of(
    objects: SnapshotObjects,
    s3_session: aioboto3.Session,
    s3_endpoint: S3Endpoint,
    learner: Learner,
) -> dict[str, str]:
    """Every stored version under the directories of the learner's snapshots, read apart from
    the code under test: its name (key@version on the bucket) and a digest of its content (the
    file's SHA-256, the version's ETag)."""
    directories = {key.rsplit("/", 1)[0] + "/" for key in learner.input_refs}
    if isinstance(objects, LocalDirectoryObjects):
        files = await asyncio.to_thread(files_of, objects)
        return {
            name: hashlib.sha256(body).hexdigest()
            for name, body in files.items()
            if any(name.startswith(directory) for directory in directories)
        }
    assert isinstance(objects, S3Objects)
    found: dict[str, str] = {}
    async with s3_session.client("s3", endpoint_url=s3_endpoint.url) as s3:
        paginator = s3.get_paginator("list_object_versions")
        for directory in sorted(directories):
            async for page in paginator.paginate(Bucket=objects.bucket, Prefix=directory):
                for marker in page.get("DeleteMarkers", []):
                    found[f"{marker['Key']}@{marker['VersionId']}"] = "delete marker"
                for version in page.get("Versions", []):
                    found[f"{version['Key']}@{version['VersionId']}"] = version["ETag"]
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

    # A copy set aside before the erasure: ciphertext, which the learner's key opens through
    # the service's own path (its wrapped key, its data key, unseal), and nothing else.
    aside_ref = learner.input_refs[0]
    aside = await objects.get(aside_ref)
    plaintext = learner.plaintexts[aside_ref]
    assert learner.ref.encode() in plaintext
    assert plaintext not in aside
    assert learner.ref.encode() not in aside
    assert not trace_regex(learner).search(aside.decode("latin-1"))
    key_id = await owner.fetchval(
        "SELECT key_id FROM learning.context_snapshots WHERE input_ref = $1", aside_ref
    )
    data_key = await DataKeys(owner_pool, IDENTITIES.master).by_id(key_id)
    assert data_key is not None
    assert unseal(data_key, aside_ref, aside) == plaintext
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

    # The copy set aside opens no more: its key is gone, and no key the database holds opens it.
    assert await DataKeys(owner_pool, IDENTITIES.master).by_id(key_id) is None
    key_rows = await owner.fetch("SELECT id, wrapped FROM learning.snapshot_keys")
    assert key_rows  # the other learner's key, at least
    for row in key_rows:
        key = IDENTITIES.master.unwrap(row["id"], bytes(row["wrapped"]))
        with pytest.raises(SnapshotSealError):
            unseal(key, aside_ref, aside)

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


def stray_key(ref: str) -> str:
    """A snapshot key under ``ref``, as a build under way or a restored bucket could leave."""
    return f"ai-context/{datetime.now(UTC).date().isoformat()}/{ref}/{uuid.uuid4()}.json"


async def test_snapshots_under_an_earlier_pseudonym_key_are_erased_and_looked_for(
    rights_dsn: str,
    owner: Connection,
    owner_pool: Pool,
    context_pool: Pool,
    objects: SnapshotObjects,
    s3_session: aioboto3.Session,
    s3_endpoint: S3Endpoint,
    tmp_path: Path,
) -> None:
    learner = await seed_learner(
        owner, context_pool, objects, new_learner_id(), earlier_snapshots=2
    )
    assert learner.earlier_ref[:17] != learner.ref[:17]
    under = {ref: [key for key in learner.input_refs if f"/{ref}/" in key]
             for ref in (learner.ref, learner.earlier_ref)}  # fmt: skip
    assert [len(keys) for keys in under.values()] == [2, 2]
    work = work_on(owner_pool, objects)
    request_id = "ROT-" + secrets.token_hex(4)
    receipt = await erase(work, learner.learner_id, request_id, PARENT_USER)
    assert receipt["verified"], receipt
    assert receipt["removed"]["snapshot_objects"] == 4
    assert receipt["removed"]["snapshot_digests"] == 4
    assert await objects_of(objects, s3_session, s3_endpoint, learner) == {}
    scan = functools.partial(
        traces_anywhere, rights_dsn, tmp_path, objects, s3_session, s3_endpoint, learner
    )
    assert await scan() == []
    # The ledger and the tombstone name both refs, by digest only.
    digests = {IDENTITIES.master.ref_digest(ref) for ref in under}
    (entry,) = [entry for entry in await read_entries(objects) if entry.request_id == request_id]
    assert set(entry.ref_digests) == digests
    tombstone = await owner.fetchval(
        "SELECT ref_digests FROM rights.blocks WHERE request_id = $1", request_id
    )
    assert set(tombstone) == digests

    # An object under the earlier ref after the erasure (a build that was under way, a bucket
    # restored from a backup): the verification finds it, and both running the erasure again
    # and replaying the ledger remove it, though the database names that ref no more.
    await objects.put(stray_key(learner.earlier_ref), secrets.token_bytes(64))
    traces = IDENTITIES.traces(learner.learner_id, (learner.account_id,), [learner.earlier_ref])
    async with owner_pool.acquire() as conn:
        assert (await verify(work, conn, traces))["snapshot objects"] == 1
    again = await erase(work, learner.learner_id, request_id, PARENT_USER)
    assert again["verified"], again
    assert again["removed"]["snapshot_objects"] == 5
    assert await scan() == []
    await objects.put(stray_key(learner.earlier_ref), secrets.token_bytes(64))
    assert await replay(work, progress=lambda _line: None) == []
    assert await scan() == []


@dataclass
class Stubs:
    """A context server's stubs, as the callers that build and that read snapshots."""

    gateway: context_service_pb2_grpc.ContextServiceAsyncStub
    audit: context_service_pb2_grpc.ContextServiceAsyncStub


@asynccontextmanager
async def context_server(rights_dsn: str, snapshot_dir: Path) -> AsyncIterator[Stubs]:
    """A real context server (``app.build`` as in production) on the rights database, with the
    keys and the snapshot directory the erasure uses; stubs of its gateway and audit callers."""
    tokens = {caller: secrets.token_hex(16) for caller in ("gateway", "audit")}
    settings = ContextSettings(
        database_url=dsn_with(rights_dsn, user="nemo_context"),
        listen_address="127.0.0.1:0",
        caller_tokens=tokens,
        pseudonym_key=PSEUDONYM_KEY,
        snapshot_master_key=MASTER_KEY,
        snapshot_dir=snapshot_dir,
        grace_period_seconds=0.5,
        database_pool_size=4,
    )
    server = Server(SERVICE_NAME, settings, await build(settings))
    address = f"127.0.0.1:{await server.start()}"
    channels = {
        caller: create_channel(address, settings, token=SecretStr(token))
        for caller, token in tokens.items()
    }
    try:
        yield Stubs(*(context_service_pb2_grpc.ContextServiceStub(channels[caller])
                      for caller in ("gateway", "audit")))  # fmt: skip
    finally:
        for channel in channels.values():
            await channel.close()
        await server.shutdown()


def build_request(learner_id: str) -> context_pb.BuildContextRequest:
    return context_pb.BuildContextRequest(learner_id=learner_id, purpose="tutor_hint", persist=True)


async def build_until_erased(stub: context_service_pb2_grpc.ContextServiceAsyncStub,
                             learner_id: str, built: list[str]) -> None:  # fmt: skip
    """Build with snapshots for ``learner_id`` until the server says it was erased, keeping the
    snapshot refs that builds returned. A build refused otherwise (its learner record went
    while it ran) is tried again."""
    request = build_request(learner_id)
    deadline = asyncio.get_running_loop().time() + 60
    while asyncio.get_running_loop().time() < deadline:
        try:
            response = await stub.BuildContext(request, timeout=10)
        except grpc.aio.AioRpcError as error:
            if error_details(error).reason == "LEARNER_ERASED":
                return
            continue
        if response.bundle.input_ref:
            built.append(response.bundle.input_ref)
    raise AssertionError("the server kept building for an erased learner")


async def test_builds_racing_an_erasure_leave_nothing_behind(
    rights_dsn: str,
    owner: Connection,
    owner_pool: Pool,
    context_pool: Pool,
    s3_session: aioboto3.Session,
    s3_endpoint: S3Endpoint,
    tmp_path: Path,
) -> None:
    objects = LocalDirectoryObjects(tmp_path / "snapshots")
    learner = await seed_learner(owner, context_pool, objects, new_learner_id())
    built: list[str] = []
    async with context_server(rights_dsn, tmp_path / "snapshots") as stubs:
        # The server has read the blocks (none) and holds the learner's key when the erasure
        # starts, as a busy replica does; then builds keep coming while it runs.
        first = await stubs.gateway.BuildContext(build_request(learner.learner_id), timeout=10)
        assert first.bundle.input_ref
        builders = [
            asyncio.create_task(build_until_erased(stubs.gateway, learner.learner_id, built))
            for _ in range(6)
        ]
        work = RightsWork(owner_pool, objects, IDENTITIES, "operator:test-privacy")
        receipt = await erase(work, learner.learner_id, "RACE-" + secrets.token_hex(4), "-")
        await asyncio.gather(*builders)
        assert receipt["verified"], receipt
        assert built, "no build raced the erasure"
        # No snapshot a build returned can be read: each says it was erased.
        for input_ref in [first.bundle.input_ref, *built]:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stubs.audit.GetSnapshot(
                    context_pb.GetSnapshotRequest(input_ref=input_ref), timeout=10
                )
            assert error_details(refused.value).reason == "SNAPSHOT_ERASED"
    assert await owner.fetchval(
        "SELECT count(*) FROM learning.snapshot_keys WHERE subject = $1",
        IDENTITIES.master.subject(learner.learner_id),
    ) == 0  # fmt: skip
    assert (
        await traces_anywhere(rights_dsn, tmp_path, objects, s3_session, s3_endpoint, learner) == []
    )
    await objects.aclose()


#: How another learner may resemble the one erased.
OTHER_LEARNERS = {
    "prefix": "its id starts with the erased learner's (L-…-7 and L-…-70)",
    "suffix": "its id ends with the erased learner's",
    "random": "nothing in common",
    "sibling": "in the same family",
    "rotated": "with snapshots under the earlier pseudonym key too",
}


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    others=st.lists(st.sampled_from(sorted(OTHER_LEARNERS)), min_size=1, max_size=4, unique=True),
    calls=st.integers(0, 3),
    target_rotated=st.booleans(),
)
async def test_erasing_one_learner_leaves_every_other_learner_as_it_was(
    owner: Connection,
    owner_pool: Pool,
    context_pool: Pool,
    objects: SnapshotObjects,
    s3_session: aioboto3.Session,
    s3_endpoint: S3Endpoint,
    others: list[str],
    calls: int,
    target_rotated: bool,
) -> None:
    target_id = new_learner_id()
    ids = {
        "prefix": lambda: f"{target_id}{secrets.randbelow(10)}",
        "suffix": lambda: f"X{target_id}",
    }
    target = await seed_learner(
        owner, context_pool, objects, target_id, calls=calls,
        earlier_snapshots=1 if target_rotated else 0,
    )  # fmt: skip
    population = [
        await seed_learner(
            owner,
            context_pool,
            objects,
            ids.get(kind, new_learner_id)(),
            calls=calls,
            family_id=target.family_id if kind == "sibling" else None,
            earlier_snapshots=1 if kind == "rotated" else 0,
        )
        for kind in others
    ]
    before = await table_rows(owner, SCHEMAS[:3])
    stored_before = [
        await objects_of(objects, s3_session, s3_endpoint, other) for other in population
    ]
    receipt = await erase(work_on(owner_pool, objects), target_id, "P-" + secrets.token_hex(4), "-")
    assert receipt["verified"], receipt
    assert await objects_of(objects, s3_session, s3_endpoint, target) == {}
    after = await table_rows(owner, SCHEMAS[:3])
    target_traces = trace_regex(target)
    for other, stored in zip(population, stored_before, strict=True):
        found = trace_regex(other)
        for table, rows in before.items():
            theirs = [row for row in rows if found.search(row) and not target_traces.search(row)]
            assert set(theirs) <= set(after[table]), (table, other.learner_id)
        assert stored
        assert await objects_of(objects, s3_session, s3_endpoint, other) == stored


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
