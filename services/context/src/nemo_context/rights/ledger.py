"""The erasure ledger: one entry per erasure, written before the first delete.

An entry lives beside the snapshots (``rights-ledger/<request_id>.json`` in the snapshot
store), not in PostgreSQL: restoring a database backup older than the erasure brings the
learner's rows back but cannot take the entry away, and ``nemo rights replay`` erases them
again. An entry names the learner only by subject and ref digests, so the ledger keeps no
trace of the child; its receipt holds counts, never values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from nemo_context.snapshots.objects import SnapshotObjects
from nemo_core.db import Connection
from nemo_core.retention import Progress, change_in_batches


@dataclass(frozen=True)
class LedgerEntry:
    """What an erasure was about, when, and what it removed."""

    request_id: str
    subject: str
    ref_digests: tuple[str, ...]
    ledgered_at: datetime
    completed_at: datetime | None = None
    receipt: Mapping[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        return json.dumps(
            {
                "request_id": self.request_id,
                "subject": self.subject,
                "ref_digests": list(self.ref_digests),
                "ledgered_at": self.ledgered_at.isoformat(),
                "completed_at": self.completed_at.isoformat() if self.completed_at else None,
                "receipt": dict(self.receipt),
            },
            sort_keys=True,
            indent=2,
        ).encode()

    @classmethod
    def decode(cls, body: bytes) -> LedgerEntry:
        document = json.loads(body)
        completed = document.get("completed_at")
        return cls(
            request_id=document["request_id"],
            subject=document["subject"],
            ref_digests=tuple(document["ref_digests"]),
            ledgered_at=datetime.fromisoformat(document["ledgered_at"]),
            completed_at=datetime.fromisoformat(completed) if completed else None,
            receipt=document.get("receipt") or {},
        )


async def write_entry(objects: SnapshotObjects, entry: LedgerEntry) -> None:
    await objects.put_ledger(entry.request_id, entry.encode())


async def read_entries(objects: SnapshotObjects) -> list[LedgerEntry]:
    """Every entry, oldest first."""
    entries = [LedgerEntry.decode(body) for body in (await objects.ledger()).values()]
    return sorted(entries, key=lambda entry: entry.ledgered_at)


async def purge_ledger(
    conn: Connection, objects: SnapshotObjects, now: datetime, days: int, progress: Progress
) -> int:
    """Entries and erasure tombstones older than ``days``: no backup that old is kept, so no
    restore can bring the learner back any more."""
    cutoff = now - timedelta(days=days)
    expired = [entry for entry in await read_entries(objects) if entry.ledgered_at < cutoff]
    for entry in expired:
        await objects.delete_ledger(entry.request_id)
    if expired:
        progress(f"erasure ledger: deleted {len(expired)} entr(y/ies)")
    tombstones = await change_in_batches(
        conn,
        "rights.blocks",
        "kind = 'erased' AND since < $1",
        cutoff,
        progress=progress,
        label="erasure tombstones",
    )
    return len(expired) + tombstones
