"""``nemo purge-snapshots`` as an operator runs it: real process, real database, real S3 API."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aioboto3
import pytest

from nemo_context.snapshot_objects import LIFECYCLE_RULE_ID, LocalDirectoryObjects
from nemo_context.snapshots import DigestedSnapshotStore, persist_snapshot
from nemo_core.db import create_pool
from nemo_ops.cli import main
from nemo_protos.context.v1 import learner_context_pb2 as lc
from nemo_testing.s3 import S3Endpoint

NEMO = str(Path(sys.executable).with_name("nemo"))


async def run(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        NEMO,
        "purge-snapshots",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **env},
    )
    stdout, stderr = await process.communicate()
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


async def test_purges_the_local_directory(tmp_path: Path, context_dsn: str, owner_dsn: str) -> None:
    learner_ref = f"nemo_{secrets.token_hex(6)}"
    long_ago = datetime.now(UTC) - timedelta(days=500 + secrets.randbelow(100))
    pool = await create_pool(context_dsn, max_size=1)
    try:
        old = DigestedSnapshotStore(
            LocalDirectoryObjects(tmp_path), pool, write_timeout_seconds=10, clock=lambda: long_ago
        )
        new = DigestedSnapshotStore(LocalDirectoryObjects(tmp_path), pool, write_timeout_seconds=10)
        bundle = lc.ContextBundle(learner_ref=learner_ref, purpose="tutor_hint")
        expired = await persist_snapshot(old, learner_ref, bundle)
        recent = await persist_snapshot(new, learner_ref, bundle)
    finally:
        await pool.close()
    assert expired is not None
    assert recent is not None

    code, out, err = await run(
        "--retention-days",
        "30",
        env={"DATABASE_URL": owner_dsn, "NEMO_CONTEXT_SNAPSHOT_DIR": str(tmp_path)},
    )
    assert code == 0, err
    assert f"nemo purge-snapshots: deleted 1 snapshot(s) of {long_ago.date().isoformat()}" in err
    assert out.startswith("purged 1 snapshot(s) of 1 day(s) and ")
    assert not (tmp_path / expired.input_ref).exists()
    assert (tmp_path / recent.input_ref).exists()


def test_sets_the_bucket_lifecycle_rule(
    s3_endpoint: S3Endpoint,
    owner_dsn: str,
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
    code = main(["purge-snapshots", "--apply-lifecycle-rule", "--database-url", owner_dsn])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"bucket {bucket} expires snapshots after 21 day(s)" in captured.err
    assert captured.out.startswith("purged 0 snapshot(s) of 0 day(s)")
    rules = asyncio.run(lifecycle_rules())
    assert [(rule["ID"], rule["Expiration"]) for rule in rules] == [
        (LIFECYCLE_RULE_ID, {"Days": 21})
    ]


@pytest.mark.parametrize(
    ("args", "env", "code", "message"),
    [
        (["--retention-days", "0"], {}, 2, "must be a positive number of days"),
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
            "nemo purge-snapshots: error: ",
        ),
    ],
)
def test_failures_are_one_line_with_an_exit_code(
    tmp_path: Path,
    owner_dsn: str,
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
        returned = main(["purge-snapshots", *args, "--database-url", owner_dsn])
    except SystemExit as usage_error:  # argparse reports usage errors by exiting
        returned = int(str(usage_error.code))
    captured = capsys.readouterr()
    assert returned == code
    assert message in captured.err
    assert "Traceback" not in captured.err
    assert captured.out == ""
