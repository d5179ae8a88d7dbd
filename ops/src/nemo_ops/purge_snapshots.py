"""``nemo purge-snapshots``: apply the snapshot retention period.

Reads the context service's snapshot settings (``NEMO_CONTEXT_SNAPSHOT_BACKEND``, ``_DIR``,
``_S3_BUCKET``, ``_S3_ENDPOINT_URL``, ``_S3_REGION``, ``_RETENTION_DAYS``; S3 credentials from the
standard AWS variables and files) and the owner database URL. Deletes the snapshots older than the
retention period from the local directory or the bucket, and their digest rows; with
``--apply-lifecycle-rule`` it first sets the bucket's lifecycle rule to the same period, so S3
keeps expiring objects between runs.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import SecretStr, ValidationError

from nemo_context.settings import ContextSettings
from nemo_context.snapshots.objects import S3Objects
from nemo_context.snapshots.retention import purge_snapshots
from nemo_context.snapshots.store import create_snapshot_objects
from nemo_core.db import connect

HELP = "delete context snapshots older than the retention period"


class PurgeError(Exception):
    """A purge that cannot run as asked."""


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive number of days")
    return value


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Delete context snapshots (objects and digest rows) older than the retention period, "
        "from the backend the NEMO_CONTEXT_SNAPSHOT_* variables configure: the local directory "
        "or an S3-compatible bucket."
    )
    parser.add_argument(
        "--retention-days",
        type=_positive_int,
        metavar="DAYS",
        help="keep this many days (default: NEMO_CONTEXT_SNAPSHOT_RETENTION_DAYS, or 30)",
    )
    parser.add_argument(
        "--apply-lifecycle-rule",
        action="store_true",
        help="also set the S3 bucket's lifecycle rule to expire snapshots after the same period",
    )


def _settings(database_url: str) -> ContextSettings:
    try:
        # The service's database URL is not used: the purge connects as the owner.
        return ContextSettings(database_url=SecretStr(database_url))
    except ValidationError as error:
        first = error.errors()[0]
        location = ".".join(str(part) for part in first["loc"]) or "settings"
        raise PurgeError(f"invalid snapshot settings ({location}): {first['msg']}") from None


async def _purge(args: argparse.Namespace, settings: ContextSettings) -> int:
    retention_days = args.retention_days or settings.snapshot_retention_days
    objects = create_snapshot_objects(settings)

    def progress(message: str) -> None:
        print(f"nemo purge-snapshots: {message}", file=sys.stderr, flush=True)

    try:
        if args.apply_lifecycle_rule:
            if not isinstance(objects, S3Objects):
                raise PurgeError("--apply-lifecycle-rule needs the s3 snapshot backend")
            await objects.apply_retention_rule(retention_days)
            progress(f"bucket {objects.bucket} expires snapshots after {retention_days} day(s)")
        conn = await connect(args.database_url)
        try:
            report = await purge_snapshots(
                objects, conn, retention_days=retention_days, progress=progress
            )
        finally:
            await conn.close()
    finally:
        await objects.aclose()
    print(
        f"purged {report.objects} snapshot(s) of {report.days} day(s) and {report.digests} "
        f"digest row(s) older than {report.cutoff.isoformat()}"
    )
    return 0


def run_command(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_purge(args, _settings(args.database_url)))
    except (PurgeError, BotoCoreError, ClientError) as error:
        print(f"nemo purge-snapshots: error: {error}", file=sys.stderr)
        return 1
