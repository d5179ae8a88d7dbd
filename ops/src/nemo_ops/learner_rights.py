"""A family's requests carried out across every store: export, erasure, restriction, replay.

The work crosses the context service's stores (learning, snapshots, rights) and the tool
plane's, which no single service role may touch, so it runs here with the owner role, calling
each service's own functions for its stores (ADR 0007, ADR 0013).

An erasure, in order, each step committed on its own so a run that stops is resumed by the
next with the same request id:

1. the request is recorded (received, acknowledged, in progress), every step audited;
2. the ledger entry is written to the snapshot store, before anything is deleted, with the
   keyed digests of every ref its snapshots were written under (the current pseudonym key's and
   earlier ones', found through its data key);
3. the learner is blocked: no replica builds or records anything for it any more, once each has
   read the blocks again, which the erasure waits for (:data:`BLOCKS_REFRESH_SECONDS`);
4. its data key is destroyed (every sealed copy is unreadable from here on), then its snapshot
   objects (every version, under every ref) and digests, its tool plane rows, its conversations
   and its record;
5. a verification pass scans every text column of every schema and every object version under
   its refs; when it finds anything (a build that was under way when the learner was blocked),
   the snapshot step and the verification run once more. The counts become the receipt, stored
   on the request and in the ledger entry.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from nemo_context.rights import requests as rights_requests
from nemo_context.rights.blocks import BLOCKS_REFRESH_SECONDS, ERASED, RESTRICTED
from nemo_context.rights.export import export_context_stores
from nemo_context.rights.learning import (
    delete_under,
    erase_learner_record,
    erase_snapshots,
    refs_in_store,
)
from nemo_context.rights.ledger import LedgerEntry, read_entries, write_entry
from nemo_context.rights.requests import Kind, RequestError, State
from nemo_context.rights.subjects import Identities, LearnerTraces, ref_groups
from nemo_context.snapshots.keys import DataKeys
from nemo_context.snapshots.objects import SnapshotObjects
from nemo_core.db import Connection, Pool
from nemo_core.retention import count_traces
from nemo_toolplane.learner_records import LearnerKeys, erase_records, export_records

#: Every schema the verification pass scans.
SCANNED_SCHEMAS: Final = ("learning", "knowledge", "rights", "toolplane")


@dataclass(frozen=True)
class RightsWork:
    """What a rights command works with: the owner's pool, the snapshot store, the keys that
    name learners, who is acting, the clock, and how long an erasure waits after blocking a
    learner before it destroys anything (until every replica refuses to build for it)."""

    pool: Pool
    objects: SnapshotObjects
    identities: Identities
    actor: str
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    settle_seconds: float = BLOCKS_REFRESH_SECONDS

    @property
    def data_keys(self) -> DataKeys:
        return DataKeys(self.pool, self.identities.master)


def toolplane_keys(traces: LearnerTraces) -> LearnerKeys:
    return LearnerKeys(
        learner_id=traces.learner_id,
        user_ids=traces.user_ids,
        refs=traces.refs,
        patterns=traces.patterns,
    )


async def _traces(work: RightsWork, conn: Connection, learner_id: str) -> LearnerTraces:
    return await work.identities.read_traces(conn, learner_id)


async def open_request(
    work: RightsWork, learner_id: str, request_id: str, kind: Kind, requested_by: str
) -> rights_requests.RightsRequest:
    """Record the request (harmless when it exists) and acknowledge it: the command answering
    is the acknowledgement. A new request must name a learner the database holds, so a mistyped
    id never gets a receipt that proves nothing; an existing one runs again even when its
    learner is gone (an erasure resumed or repeated)."""
    async with work.pool.acquire() as conn, conn.transaction():
        subject = work.identities.master.subject(learner_id)
        known = await conn.fetchval("SELECT 1 FROM learning.learners WHERE id = $1", learner_id)
        if not known and await rights_requests.get_request(conn, request_id) is None:
            raise RequestError(f"no learner {learner_id} in the database; check the id")
        request = await rights_requests.open_request(
            conn,
            request_id,
            kind,
            subject,
            requested_by=requested_by,
            requested_via=work.actor,
            now=work.clock(),
        )
        await rights_requests.acknowledge(conn, request_id, work.actor, work.clock())
    return request


async def _block(
    conn: Connection, subject: str, request_id: str, kind: str, ref_digests: tuple[str, ...]
) -> float:
    """Block the learner; returns for how many seconds it had been blocked already (0 when it
    was not)."""
    blocked_for = await conn.fetchval(
        "SELECT extract(epoch FROM clock_timestamp() - since)::float8 FROM rights.blocks"
        " WHERE subject = $1",
        subject,
    )
    await conn.execute(
        "INSERT INTO rights.blocks (subject, kind, request_id, ref_digests) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT (subject) DO UPDATE SET kind = excluded.kind,"
        " request_id = excluded.request_id, ref_digests = excluded.ref_digests,"
        " since = now()",
        subject,
        kind,
        request_id,
        list(ref_digests),
    )
    return max(0.0, blocked_for or 0.0)


async def verify(work: RightsWork, conn: Connection, traces: LearnerTraces) -> dict[str, int]:
    """Traces of the learner left anywhere: per table of every schema, and snapshot object
    versions under each of its refs."""
    found = await count_traces(conn, SCANNED_SCHEMAS, traces.patterns)
    found["snapshot objects"] = sum(
        [len(await work.objects.learner_keys(refs)) for refs in traces.ref_groups]
    )
    return found


def _added(before: Mapping[str, Any], counts: Mapping[str, int]) -> dict[str, int]:
    total = {name: int(value) for name, value in before.items()}
    for name, count in counts.items():
        total[name] = total.get(name, 0) + count
    return total


async def erase(
    work: RightsWork, learner_id: str, request_id: str, requested_by: str
) -> dict[str, Any]:
    """Erase everything the AI plane holds about ``learner_id``; returns the receipt."""
    request = await open_request(work, learner_id, request_id, Kind.ERASURE, requested_by)
    async with work.pool.acquire() as conn:
        traces = await _traces(work, conn, learner_id)
        await rights_requests.set_state(
            conn, request_id, State.IN_PROGRESS, work.actor, now=work.clock()
        )
        earlier = [e for e in await read_entries(work.objects) if e.request_id == request_id]
        entry = earlier[0] if earlier else LedgerEntry(request_id, traces.subject, (), work.clock())
        # Written before the key goes: the rows that name the learner's earlier refs go with it.
        digests = tuple(dict.fromkeys((*entry.ref_digests, *traces.ref_digests)))
        entry = dataclasses.replace(entry, ref_digests=digests)
        await write_entry(work.objects, entry)
        await rights_requests.record_event(conn, request_id, "ledgered", work.actor, {})
        return await _erase_ledgered(work, conn, traces, entry, request.receipt or {})


async def _erase_ledgered(
    work: RightsWork,
    conn: Connection,
    traces: LearnerTraces,
    entry: LedgerEntry,
    earlier: Mapping[str, Any],
) -> dict[str, Any]:
    request_id = entry.request_id
    blocked_for = await _block(conn, traces.subject, request_id, ERASED, entry.ref_digests)
    # A replica that read the blocks just before still builds for the learner until it reads
    # them again: nothing is destroyed before every replica refuses.
    await asyncio.sleep(max(0.0, work.settle_seconds - blocked_for))
    traces = await _with_stored_refs(work, traces, entry.ref_digests)
    counts = await erase_snapshots(conn, work.objects, traces)
    counts |= await erase_records(conn, toolplane_keys(traces))
    counts |= await erase_learner_record(conn, traces)
    await rights_requests.record_event(conn, request_id, "erased", work.actor, counts)
    found = await verify(work, conn, traces)
    if any(found.values()):
        # A build checked just before the block applied may have written its snapshot since.
        counts = _added(counts, await erase_snapshots(conn, work.objects, traces))
        found = await verify(work, conn, traces)
    left = {name: count for name, count in found.items() if count}
    receipt = {
        "request_id": request_id,
        "erased_at": work.clock().isoformat(),
        "removed": _added(earlier.get("removed", {}), counts),
        "verification": {"scanned": len(found), "traces_left": left},
        "verified": not left,
    }
    state = State.COMPLETED if not left else State.FAILED
    await rights_requests.set_state(
        conn, request_id, state, work.actor, now=work.clock(), receipt=receipt,
        detail={"traces_left": sum(left.values())},
    )  # fmt: skip
    completed = dataclasses.replace(entry, completed_at=work.clock(), receipt=receipt)
    await write_entry(work.objects, completed)
    return receipt


async def _with_stored_refs(
    work: RightsWork, traces: LearnerTraces, ref_digests: tuple[str, ...]
) -> LearnerTraces:
    """``traces`` with the refs in the snapshot store whose digests the ledger entry holds and
    the database no longer names (an erasure run again, a replay after a restore)."""
    unknown = set(ref_digests) - set(traces.ref_digests)
    if not unknown:
        return traces
    found = await refs_in_store(work.objects, work.identities.master, unknown)
    return work.identities.with_refs(traces, found)


async def replay(work: RightsWork, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """Erase again, after a restore, every learner the ledger says was erased: learners whose
    subject matches an entry, and key rows and digests left under its subject or refs."""
    entries = await read_entries(work.objects)
    receipts = []
    async with work.pool.acquire() as conn:
        learner_ids = [row["id"] for row in await conn.fetch("SELECT id FROM learning.learners")]
        by_subject = {
            work.identities.master.subject(learner_id): learner_id for learner_id in learner_ids
        }
        for entry in entries:
            await _restore_request(work, conn, entry)
            learner_id = by_subject.get(entry.subject)
            if learner_id is not None:
                progress(f"request {entry.request_id}: the learner is back; erasing it again")
                traces = await _traces(work, conn, learner_id)
                receipts.append(await _erase_ledgered(work, conn, traces, entry, entry.receipt))
                continue
            # The learner record is gone, but a restore may have brought back its key or block,
            # and one of the bucket its snapshots.
            keys = await conn.execute(
                "DELETE FROM learning.snapshot_keys WHERE subject = $1", entry.subject
            )
            await conn.execute(
                "INSERT INTO rights.blocks (subject, kind, request_id, ref_digests)"
                " VALUES ($1, 'erased', $2, $3) ON CONFLICT (subject) DO NOTHING",
                entry.subject,
                entry.request_id,
                list(entry.ref_digests),
            )
            refs = await refs_in_store(work.objects, work.identities.master, entry.ref_digests)
            versions = await delete_under(work.objects, ref_groups(refs))
            progress(
                f"request {entry.request_id}: the learner is not back ({keys.split()[-1]} key(s)"
                f" and {versions} snapshot object version(s) deleted)"
            )
    return receipts


async def process(work: RightsWork, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """Carry out the erasures recorded through RightsService (the learner is already blocked):
    each open erasure request whose subject matches a learner is erased, its receipt stored."""
    receipts = []
    async with work.pool.acquire() as conn:
        pending = await conn.fetch(
            "SELECT id, subject, requested_by FROM rights.requests WHERE kind = 'erasure'"
            " AND state IN ('received', 'acknowledged', 'in_progress', 'failed')"
            " ORDER BY complete_by"
        )
        if not pending:
            return []
        learner_ids = [row["id"] for row in await conn.fetch("SELECT id FROM learning.learners")]
    master = work.identities.master
    by_subject = {master.subject(learner_id): learner_id for learner_id in learner_ids}
    for row in pending:
        learner_id = by_subject.get(row["subject"])
        if learner_id is None:
            progress(f"request {row['id']}: no such learner any more; erase it by hand")
            continue
        receipt = await erase(work, learner_id, row["id"], row["requested_by"])
        progress(f"request {row['id']}: erased, verified={receipt['verified']}")
        receipts.append(receipt)
    return receipts


async def _restore_request(work: RightsWork, conn: Connection, entry: LedgerEntry) -> None:
    """The request row of a ledger entry, back after a restore that lost it."""
    if await rights_requests.get_request(conn, entry.request_id) is not None:
        return
    await rights_requests.open_request(
        conn,
        entry.request_id,
        Kind.ERASURE,
        entry.subject,
        requested_by="(restored from the erasure ledger)",
        requested_via=work.actor,
        now=entry.ledgered_at,
    )
    await rights_requests.record_event(conn, entry.request_id, "restored", work.actor, {})


async def restrict(
    work: RightsWork, learner_id: str, request_id: str, requested_by: str
) -> rights_requests.RightsRequest:
    """Stop all processing of the learner until the restriction is lifted."""
    await open_request(work, learner_id, request_id, Kind.RESTRICTION, requested_by)
    async with work.pool.acquire() as conn, conn.transaction():
        traces = await _traces(work, conn, learner_id)
        blocked = await conn.fetchval(
            "SELECT kind FROM rights.blocks WHERE subject = $1", traces.subject
        )
        if blocked == ERASED:
            raise RequestError("this learner was erased; there is nothing left to restrict")
        await _block(conn, traces.subject, request_id, RESTRICTED, traces.ref_digests)
        await rights_requests.set_state(
            conn, request_id, State.IN_EFFECT, work.actor, now=work.clock()
        )
        request = await rights_requests.get_request(conn, request_id)
    assert request is not None  # noqa: S101  opened above
    return request


async def lift(work: RightsWork, request_id: str) -> rights_requests.RightsRequest:
    """End a restriction: the learner's data may be processed again."""
    async with work.pool.acquire() as conn, conn.transaction():
        request = await rights_requests.get_request(conn, request_id)
        if request is None or request.kind is not Kind.RESTRICTION:
            raise RequestError(f"no restriction request {request_id}")
        await conn.execute(
            "DELETE FROM rights.blocks WHERE request_id = $1 AND kind = $2",
            request_id,
            RESTRICTED,
        )
        await rights_requests.set_state(
            conn, request_id, State.LIFTED, work.actor, now=work.clock()
        )
        lifted = await rights_requests.get_request(conn, request_id)
    assert lifted is not None  # noqa: S101  read above
    return lifted


async def export(
    work: RightsWork, learner_id: str, request_id: str, requested_by: str, out: Path
) -> dict[str, Any]:
    """Write everything the AI plane holds about the learner to ``out`` (a new or empty
    directory); returns the manifest."""
    await open_request(work, learner_id, request_id, Kind.EXPORT, requested_by)
    async with work.pool.acquire() as conn:
        await rights_requests.set_state(
            conn, request_id, State.IN_PROGRESS, work.actor, now=work.clock()
        )
        traces = await _traces(work, conn, learner_id)
        records = await export_records(conn, toolplane_keys(traces))
        manifest = await export_context_stores(
            conn,
            work.objects,
            work.data_keys,
            traces,
            records,
            out,
            now=work.clock(),
            request_id=request_id,
        )
        # Counts only: the manifest's file names carry the learner's snapshot refs.
        counts = {
            name: listed["entries"]
            for name, listed in manifest["files"].items()
            if "entries" in listed
        }
        await rights_requests.set_state(
            conn, request_id, State.COMPLETED, work.actor, now=work.clock(), receipt=counts
        )
    return manifest


def receipt_text(receipt: Mapping[str, Any]) -> str:
    """The receipt as privacy staff read it (and keep it)."""
    return json.dumps(receipt, indent=2, sort_keys=True, ensure_ascii=False)
