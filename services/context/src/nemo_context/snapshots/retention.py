"""Retention of context snapshots: snapshots are children's data and are kept a bounded time.

A snapshot written on day D (UTC) is deleted once D is more than ``retention_days`` days before
today. Two mechanisms apply the same period:

- on S3, a bucket lifecycle rule (``S3Objects.apply_retention_rule``, applied by
  ``nemo purge-snapshots --apply-lifecycle-rule``) lets the storage expire objects on its own;
- :func:`purge_snapshots` (``nemo purge-snapshots``) deletes expired days from either backend,
  the local directory included, and removes their digest rows.

The digest rows are deleted by the owner role that runs the command: the service's own role may
record and read digests but not erase them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from nemo_context.snapshots.objects import SnapshotObjects
from nemo_core.db import Connection


@dataclass(frozen=True)
class PurgeReport:
    """What a purge deleted."""

    cutoff: date
    """Snapshots of days before this one were deleted."""
    days: int
    objects: int
    digests: int


def retention_cutoff(today: date, retention_days: int) -> date:
    """The first day whose snapshots are kept."""
    if retention_days <= 0:
        raise ValueError("retention_days must be positive")
    return today - timedelta(days=retention_days)


async def purge_snapshots(
    objects: SnapshotObjects,
    owner_conn: Connection,
    *,
    retention_days: int,
    today: date | None = None,
    progress: Callable[[str], None] = lambda _message: None,
) -> PurgeReport:
    """Delete every snapshot object and digest row older than the retention period.

    Objects go first: if the run stops half-way, the rows left behind point at nothing (a read
    answers NOT_FOUND) and the next run finishes the job.
    """
    cutoff = retention_cutoff(today or datetime.now(UTC).date(), retention_days)
    expired = [day for day in await objects.days() if day < cutoff]
    deleted_objects = 0
    for day in expired:
        count = await objects.delete_day(day)
        deleted_objects += count
        progress(f"deleted {count} snapshot(s) of {day.isoformat()}")
    status = await owner_conn.execute(
        "DELETE FROM learning.context_snapshots WHERE created_at < $1",
        datetime.combine(cutoff, time.min, UTC),
    )
    deleted_digests = int(status.split()[-1])
    progress(f"deleted {deleted_digests} digest row(s) older than {cutoff.isoformat()}")
    return PurgeReport(cutoff, len(expired), deleted_objects, deleted_digests)
