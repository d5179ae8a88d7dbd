"""``nemo purge`` as an operator runs it: real process, real database, real S3 API.

It runs on a database of its own: a purge removes whatever has expired, the demo data's too.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aioboto3
import pytest

from nemo_context.snapshots.objects import LIFECYCLE_RULE_ID, LocalDirectoryObjects
from nemo_context.snapshots.store import DigestedSnapshotStore, persist_snapshot
from nemo_core.db import create_pool, dsn_with
from nemo_ops.cli import main
from nemo_ops.migrate import migrate, role_passwords_from_env
from nemo_ops.seed import seed
from nemo_protos.context.v1 import learner_context_pb2 as lc
from nemo_testing.s3 import S3Endpoint
from services.context.tests.conftest import keys_for, owner_of

NEMO = str(Path(sys.executable).with_name("nemo"))
DatabaseFactory = Callable[[], Awaitable[str]]


async def run(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        NEMO,
        "purge",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **env},
    )
    stdout, stderr = await process.communicate()
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


@pytest.fixture(scope="module")
def purge_dsn(make_empty_database: DatabaseFactory) -> str:
    """Owner DSN of a migrated, seeded database that only this module purges."""

    async def prepare() -> str:
        dsn = await make_empty_database()
        await migrate(dsn, role_passwords=role_passwords_from_env(os.environ))
        await seed(dsn)
        return dsn

    return asyncio.run(prepare())


async def test_purges_the_local_directory(tmp_path: Path, purge_dsn: str) -> None:
    learner_ref = f"nemo_{secrets.token_hex(12)}"
    long_ago = datetime.now(UTC) - timedelta(days=500 + secrets.randbelow(100))
    pool = await create_pool(dsn_with(purge_dsn, user="nemo_context"), max_size=1)
    try:
        objects = LocalDirectoryObjects(tmp_path)
        old = DigestedSnapshotStore(
            objects, pool, keys=keys_for(pool), write_timeout_seconds=10, clock=lambda: long_ago
        )
        new = DigestedSnapshotStore(objects, pool, keys=keys_for(pool), write_timeout_seconds=10)
        bundle = lc.ContextBundle(learner_ref=learner_ref, purpose="tutor_hint")
        expired = await persist_snapshot(old, owner_of(learner_ref), bundle)
        recent = await persist_snapshot(new, owner_of(learner_ref), bundle)
    finally:
        await pool.close()
    assert expired is not None
    assert recent is not None

    code, out, err = await run(
        env={
            "DATABASE_URL": purge_dsn,
            "NEMO_CONTEXT_SNAPSHOT_DIR": str(tmp_path),
            "NEMO_CONTEXT_SNAPSHOT_RETENTION_DAYS": "30",
        },
    )
    assert code == 0, err
    assert f"nemo purge: deleted 1 snapshot(s) of {long_ago.date().isoformat()}" in err
    assert "nemo purge: snapshots: removed 2" in err  # the object and its digest
    assert out.startswith("purged ")
    assert not (tmp_path / expired.input_ref).exists()
    assert (tmp_path / recent.input_ref).exists()


def test_sets_the_bucket_lifecycle_rule(
    s3_endpoint: S3Endpoint,
    purge_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bucket = f"nemo-purge-{secrets.token_hex(4)}"
    session = aioboto3.Session(
        aws_access_key_id=s3_endpoint.access_key_id,
        aws_secret_access_key=s3_endpoint.secret_access_key,
        region_name=s3_endpoint.region,
    )

    async def create_bucket() -> None:
        async with session.client("s3", endpoint_url=s3_endpoint.url) as s3:
            await s3.create_bucket(Bucket=bucket)

    async def lifecycle_rules() -> list[dict[str, Any]]:
        async with session.client("s3", endpoint_url=s3_endpoint.url) as s3:
            rules: list[dict[str, Any]] = (
                await s3.get_bucket_lifecycle_configuration(Bucket=bucket)
            )["Rules"]
        return rules

    asyncio.run(create_bucket())
    for name, value in {
        "NEMO_CONTEXT_SNAPSHOT_BACKEND": "s3",
        "NEMO_CONTEXT_SNAPSHOT_S3_BUCKET": bucket,
        "NEMO_CONTEXT_SNAPSHOT_S3_ENDPOINT_URL": s3_endpoint.url,
        "NEMO_CONTEXT_SNAPSHOT_S3_REGION": s3_endpoint.region,
        "NEMO_CONTEXT_SNAPSHOT_RETENTION_DAYS": "21",
        "AWS_ACCESS_KEY_ID": s3_endpoint.access_key_id,
        "AWS_SECRET_ACCESS_KEY": s3_endpoint.secret_access_key,
    }.items():
        monkeypatch.setenv(name, value)
    code = main(["purge", "--apply-lifecycle-rule", "--database-url", purge_dsn])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"bucket {bucket} expires snapshots after 21 day(s)" in captured.err
    assert "nemo purge: snapshots: removed 0" in captured.err
    rules = asyncio.run(lifecycle_rules())
    assert [(rule["ID"], rule["Expiration"]) for rule in rules] == [
        (LIFECYCLE_RULE_ID, {"Days": 21})
    ]


@pytest.mark.parametrize(
    ("args", "env", "code", "message"),
    [
        (["--store", "nothing"], {}, 2, "invalid choice"),
        (["--apply-lifecycle-rule"], {}, 1, "--apply-lifecycle-rule needs the s3 snapshot backend"),
        ([], {"NEMO_CONTEXT_SNAPSHOT_BACKEND": "ftp"}, 1, "invalid snapshot settings"),
        (
            [],
            {
                "NEMO_CONTEXT_SNAPSHOT_BACKEND": "s3",
                "NEMO_CONTEXT_SNAPSHOT_S3_BUCKET": "nope",
                "NEMO_CONTEXT_SNAPSHOT_S3_ENDPOINT_URL": "http://127.0.0.1:9",
                "AWS_ACCESS_KEY_ID": "x",
                "AWS_SECRET_ACCESS_KEY": "y",
            },
            1,
            "nemo purge: error: ",
        ),
    ],
)
def test_failures_are_one_line_with_an_exit_code(
    tmp_path: Path,
    purge_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    env: dict[str, str],
    code: int,
    message: str,
) -> None:
    monkeypatch.setenv("NEMO_CONTEXT_SNAPSHOT_DIR", str(tmp_path))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    try:
        returned = main(["purge", *args, "--database-url", purge_dsn])
    except SystemExit as usage_error:  # argparse reports usage errors by exiting
        returned = int(str(usage_error.code))
    captured = capsys.readouterr()
    assert returned == code
    assert message in captured.err
    assert "Traceback" not in captured.err
    assert captured.out == ""
