"""``nemo purge``: enforce the retention table, every store of it.

Reads the owner database URL and the context service's snapshot settings
(``NEMO_CONTEXT_SNAPSHOT_BACKEND``, ``_DIR``, ``_S3_BUCKET``, ``_S3_ENDPOINT_URL``,
``_S3_REGION``, ``_RETENTION_DAYS``; S3 credentials from the standard AWS variables and files).
Each store is purged on its own, in committed batches, with a progress line per batch: a run
that stops half-way keeps what it did and the next run finishes the rest, and a second run in a
row finds nothing to do. ``--apply-lifecycle-rule`` first sets the snapshot bucket's lifecycle
rule to the same period, so S3 expires objects between runs.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import SecretStr, ValidationError

from nemo_context.rights import learning
from nemo_context.rights.ledger import purge_ledger
from nemo_context.rights.retention import RETENTION, Expiry, RetentionRule, retention_rule
from nemo_context.settings import ContextSettings
from nemo_context.snapshots.objects import S3Objects, SnapshotObjects
from nemo_context.snapshots.retention import purge_snapshots
from nemo_context.snapshots.store import create_snapshot_objects
from nemo_core.db import Connection, connect
from nemo_core.retention import Progress
from nemo_toolplane import learner_records

HELP = "delete or de-link what the retention table says has expired, in every store"


class PurgeError(Exception):
    """A purge that cannot run as asked."""


@dataclass(frozen=True)
class PurgeRun:
    """What one store's purge works with."""

    conn: Connection
    objects: SnapshotObjects
    now: datetime
    snapshot_retention_days: int
    progress: Progress


Purge = Callable[[PurgeRun, RetentionRule], Awaitable[int]]


def _days(rule: RetentionRule) -> int:
    assert rule.days is not None  # noqa: S101  every row purged here has its days
    return rule.days


async def _snapshots(run: PurgeRun, rule: RetentionRule) -> int:
    report = await purge_snapshots(
        run.objects,
        run.conn,
        retention_days=run.snapshot_retention_days,
        today=run.now.date(),
        progress=run.progress,
    )
    return report.objects + report.digests


async def _snapshot_keys(run: PurgeRun, rule: RetentionRule) -> int:
    return await learning.purge_snapshot_keys(
        run.conn, run.now, run.snapshot_retention_days, run.progress
    )


def _by_days(
    purge: Callable[[Connection, datetime, int, Progress], Awaitable[int]],
) -> Purge:
    async def apply(run: PurgeRun, rule: RetentionRule) -> int:
        return await purge(run.conn, run.now, _days(rule), run.progress)

    return apply


async def _ledger(run: PurgeRun, rule: RetentionRule) -> int:
    return await purge_ledger(run.conn, run.objects, run.now, _days(rule), run.progress)


async def _outside_the_database(run: PurgeRun, rule: RetentionRule) -> int:
    """In a service's memory (which evicts it) or the platform's: nothing for this command."""
    run.progress(f"{rule.store}: {rule.on_expiry} ({rule.period})")
    return 0


#: How each row of the retention table is enforced.
PURGES: Mapping[str, Purge] = {
    "snapshots": _snapshots,
    "snapshot_keys": _snapshot_keys,
    "conversations": _by_days(learning.purge_conversations),
    "generated_items": _by_days(learning.purge_generated_items),
    "audit_rows": _by_days(learner_records.purge_audit_rows),
    "approvals": _by_days(learner_records.purge_approvals),
    "agent_tokens": _by_days(learner_records.purge_agent_tokens),
    "rate_buckets": _by_days(learner_records.purge_rate_buckets),
    "result_cache": _outside_the_database,
    "circle_fingerprints": _outside_the_database,
    "rights_requests": _by_days(learning.purge_requests),
    "erasure_ledger": _ledger,
    "learner_record": _outside_the_database,
}


async def purge(run: PurgeRun, stores: list[str] | None = None) -> dict[str, int]:
    """Purge ``stores`` (default: every row of the table); returns what each purge removed."""
    done: dict[str, int] = {}
    for rule in RETENTION:
        if stores is not None and rule.store not in stores:
            continue
        count = await PURGES[rule.store](run, rule)
        verb = "de-linked" if rule.on_expiry is Expiry.DELINK else "removed"
        if rule.on_expiry not in (Expiry.EVICT, Expiry.PLATFORM):
            run.progress(f"{rule.store}: {verb} {count}")
        done[rule.store] = count
    return done


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Apply the retention table (`nemo retention` prints it) to every store: snapshots "
        "(objects in the local directory or the S3 bucket the NEMO_CONTEXT_SNAPSHOT_* "
        "variables configure, and their digests), snapshot keys, conversations, generated "
        "items, audit rows (de-linked), approvals, agent tokens, call-limit counters, rights "
        "requests and the erasure ledger. Safe to run again, and to stop: the next run "
        "finishes the rest."
    )
    parser.add_argument(
        "--store",
        action="append",
        choices=[rule.store for rule in RETENTION],
        help="purge only this store (repeatable; default: all)",
    )
    parser.add_argument(
        "--apply-lifecycle-rule",
        action="store_true",
        help="also set the S3 bucket's lifecycle rule to expire snapshots after their period",
    )


def _settings(database_url: str) -> ContextSettings:
    try:
        # The service's database URL is not used: the purge connects as the owner.
        return ContextSettings(database_url=SecretStr(database_url))
    except ValidationError as error:
        first = error.errors()[0]
        location = ".".join(str(part) for part in first["loc"]) or "settings"
        raise PurgeError(f"invalid snapshot settings ({location}): {first['msg']}") from None


def _progress(message: str) -> None:
    print(f"nemo purge: {message}", file=sys.stderr, flush=True)


async def _purge(args: argparse.Namespace, settings: ContextSettings) -> int:
    objects = create_snapshot_objects(settings)
    try:
        if args.apply_lifecycle_rule:
            if not isinstance(objects, S3Objects):
                raise PurgeError("--apply-lifecycle-rule needs the s3 snapshot backend")
            days = settings.snapshot_retention_days
            await objects.apply_retention_rule(days)
            _progress(f"bucket {objects.bucket} expires snapshots after {days} day(s)")
        conn = await connect(args.database_url)
        try:
            run = PurgeRun(
                conn, objects, datetime.now(UTC), settings.snapshot_retention_days, _progress
            )
            done = await purge(run, args.store)
        finally:
            await conn.close()
    finally:
        await objects.aclose()
    print(f"purged {sum(done.values())} row(s) and object(s) in {len(done)} store(s)")
    return 0


def run_command(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_purge(args, _settings(args.database_url)))
    except (PurgeError, BotoCoreError, ClientError) as error:
        print(f"nemo purge: error: {error}", file=sys.stderr)
        return 1


__all__ = [
    "HELP",
    "PURGES",
    "PurgeRun",
    "configure_parser",
    "purge",
    "retention_rule",
    "run_command",
]
