"""The context service's stores of one learner: erase them, find what is left, purge by age.

These run with the owner role (``nemo rights``, ``nemo purge``): the service's own role may
write snapshots, turns and keys but delete none of them, so a compromised service cannot erase
the record of what a model saw (ADR 0007). Statements name the learner by id, subject or exact
refs, never by a pattern another learner could match.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Final

from nemo_context.rights.subjects import LearnerTraces
from nemo_context.snapshots.keys import MasterKey
from nemo_context.snapshots.objects import SnapshotObjects
from nemo_core.db import Connection
from nemo_core.retention import Progress, change_in_batches

#: Tables whose rows belong to the learner record the platform keeps, with their learner key;
#: deleting the learner removes them (foreign keys cascade), counted first for the receipt.
LEARNER_RECORD_TABLES: Final[Mapping[str, str]] = {
    "learning.guardians": "learner_id",
    "learning.mentor_assignments": "learner_id",
    "learning.mastery": "learner_id",
    "learning.evidence": "learner_id",
    "learning.goals": "learner_id",
    "learning.retention": "learner_id",
    "learning.learner_model_versions": "learner_id",
}
CONVERSATION_TABLES: Final = (
    "learning.chat_sessions",
    "learning.chat_messages",
    "learning.conversation_state",
    "learning.conversation_summaries",
)


async def _count(conn: Connection, table: str, column: str, value: object) -> int:
    count: int = await conn.fetchval(f"SELECT count(*) FROM {table} WHERE {column} = $1", value)
    return count


def _deleted(status: str) -> int:
    return int(status.split()[-1])


async def erase_snapshots(
    conn: Connection, objects: SnapshotObjects, traces: LearnerTraces
) -> dict[str, int]:
    """Destroy the learner's data key (every sealed copy becomes unreadable at once), then
    delete its snapshot objects (every version, under each of its refs) and digest rows.

    ``traces`` must name every ref the learner's snapshots were written under: read them
    (:meth:`~nemo_context.rights.subjects.Identities.read_traces`) before the key goes, since
    the digest rows that name them go with it."""
    sealed = await conn.fetchval(
        "SELECT count(*) FROM learning.context_snapshots s JOIN learning.snapshot_keys k"
        " ON k.id = s.key_id WHERE k.subject = $1",
        traces.subject,
    )
    keys = _deleted(
        await conn.execute("DELETE FROM learning.snapshot_keys WHERE subject = $1", traces.subject)
    )
    # The digests of sealed snapshots went with their key; these are the ones written in clear.
    clear = _deleted(
        await conn.execute(
            "DELETE FROM learning.context_snapshots WHERE learner_ref = ANY($1::text[])",
            list(traces.refs),
        )
    )
    versions = await delete_under(objects, traces.ref_groups)
    return {
        "snapshot_keys": keys,
        "snapshot_digests": int(sealed) + clear,
        "snapshot_objects": versions,
    }


async def delete_under(objects: SnapshotObjects, groups: Iterable[Collection[str]]) -> int:
    """Delete every snapshot version under each group of refs (see
    :func:`~nemo_context.rights.subjects.ref_groups`); returns how many."""
    versions = 0
    for refs in groups:
        versions += await objects.delete_learner(refs)
    return versions


async def refs_in_store(
    objects: SnapshotObjects, master: MasterKey, ref_digests: Collection[str]
) -> list[str]:
    """The refs of the snapshot directories whose keyed digest is one of ``ref_digests``: how
    an erasure run again, or replayed after a restore, finds snapshots under refs the database
    no longer names. Lists every directory of the store, so only for digests not otherwise
    accounted for."""
    wanted = set(ref_digests)
    return [ref for ref in await objects.refs() if master.ref_digest(ref) in wanted]


async def erase_learner_record(conn: Connection, traces: LearnerTraces) -> dict[str, int]:
    """Delete the learner's conversations and record (everything keyed to it cascades) and its
    own account, and take its account out of the requests it made itself."""
    counts = {
        table: await _count(conn, table, "learner_id", traces.learner_id)
        for table in CONVERSATION_TABLES
    }
    counts |= {
        table: await _count(conn, table, column, traces.learner_id)
        for table, column in LEARNER_RECORD_TABLES.items()
    }
    accounts = list(traces.account_ids)
    # A session another learner holds may name this account as who chatted: it stays, unnamed.
    await conn.execute(
        "UPDATE learning.chat_sessions SET user_id = NULL"
        " WHERE user_id = ANY($1::text[]) AND learner_id <> $2",
        accounts,
        traces.learner_id,
    )
    counts["learning.learners"] = _deleted(
        await conn.execute("DELETE FROM learning.learners WHERE id = $1", traces.learner_id)
    )
    counts["learning.users"] = _deleted(
        await conn.execute("DELETE FROM learning.users WHERE id = ANY($1::text[])", accounts)
    )
    counts["rights.requests"] = _deleted(
        await conn.execute(
            "UPDATE rights.requests SET requested_by = 'the learner'"
            " WHERE requested_by = ANY($1::text[])",
            list(traces.user_ids),
        )
    )
    return {name: count for name, count in counts.items() if count}


# Purges, one per row of the retention table, each idempotent and committed in batches so a run
# that stops is finished by the next.


async def purge_conversations(
    conn: Connection, now: datetime, days: int, progress: Progress
) -> int:
    """Sessions idle for longer than ``days``, with their turns, state and summaries."""
    return await change_in_batches(
        conn,
        "learning.chat_sessions",
        "updated_at < $1",
        now - timedelta(days=days),
        progress=progress,
        label="conversations",
    )


async def purge_generated_items(
    conn: Connection, now: datetime, days: int, progress: Progress
) -> int:
    """Generated items older than ``days`` that no answer refers to."""
    return await change_in_batches(
        conn,
        "knowledge.items AS i",
        "i.origin = 'generated' AND i.created_at < $1"
        " AND NOT EXISTS (SELECT FROM learning.evidence e WHERE e.item_id = i.id)",
        now - timedelta(days=days),
        progress=progress,
        label="generated items",
    )


async def purge_snapshot_keys(
    conn: Connection, now: datetime, days: int, progress: Progress
) -> int:
    """Keys older than ``days`` that no snapshot is sealed under any more (the next snapshot of
    the learner makes a new one)."""
    return await change_in_batches(
        conn,
        "learning.snapshot_keys AS k",
        "k.created_at < $1"
        " AND NOT EXISTS (SELECT FROM learning.context_snapshots s WHERE s.key_id = k.id)",
        now - timedelta(days=days),
        progress=progress,
        label="snapshot keys",
    )


async def purge_requests(conn: Connection, now: datetime, days: int, progress: Progress) -> int:
    """Requests completed more than ``days`` ago, with their steps."""
    return await change_in_batches(
        conn,
        "rights.requests",
        "completed_at < $1",
        now - timedelta(days=days),
        progress=progress,
        label="rights requests",
    )
