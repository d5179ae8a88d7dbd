"""A family's export: everything the AI plane holds about one learner, as JSON a parent can
read, with a README saying what each file is.

People outside the learner's circle (family, guardians, mentors, the learner's own account)
are not named: an audit row acting for a staff member says "someone outside the family", an
approval says "an operator" decided. Answer keys of generated items are not included: they
are the curriculum's, not the child's.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from nemo_context.rights.subjects import LearnerTraces
from nemo_context.snapshots.keys import DataKeys, SnapshotSealError, unseal
from nemo_context.snapshots.objects import ObjectNotFoundError, SnapshotObjects
from nemo_core.db import Connection

OUTSIDE: Final = "someone outside the family (platform staff or a service)"

FILES: Final = (
    (
        "snapshots.json",
        "every snapshot kept: exactly what an AI model or an agent was shown about the learner, "
        "when, and whether its stored copy still matches the SHA-256 recorded when it was written",
    ),
    (
        "snapshots/*.json",
        "the snapshots themselves, one file each, named after the `input_ref` that AI results "
        "and audit rows give",
    ),
    (
        "conversations.json",
        "tutoring chats: every message with its status, the chat's notes (state) and summaries",
    ),
    ("items.json", "practice questions written by AI that the learner answered (no answer keys)"),
    (
        "audit.json",
        "every action an agent took about the learner or for the learner's own account: which "
        "agent, which tool, when, for whom, and the decision",
    ),
    (
        "approvals.json",
        "agent actions about the learner that waited for a person's approval, with what the "
        "agent asked to do",
    ),
    (
        "agent_tokens.json",
        "agent credentials bound to the learner's own account (never the credential itself)",
    ),
    ("requests.json", "the export, erasure and restriction requests about the learner, by step"),
    ("manifest.json", "this export's files with their SHA-256, to check that nothing changed"),
)
"""The files of an export and what each holds, as the README tells a parent."""


def readme(generated_at: str, request_id: str, snapshot_period: str) -> str:
    rows = "\n".join(f"| `{name}` | {what} |" for name, what in FILES)
    return (
        "# What the Nemo AI plane holds about this learner\n\n"
        f"Exported {generated_at} for request {request_id}. Every file is JSON (UTF-8).\n\n"
        f"| file | what it is |\n| --- | --- |\n{rows}\n\n"
        f'People outside the learner\'s family, guardians and mentors are not named: "{OUTSIDE}" '
        "stands for them. The learner's learning records (mastery, answers, goals) belong to "
        "the learning platform, which exports them itself. Snapshots are kept "
        f"{snapshot_period}; the other periods are in the AI plane's retention table.\n"
    )


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _dump(value: Any) -> bytes:
    return json.dumps(_plain(value), ensure_ascii=False, indent=2, sort_keys=True).encode("utf-8")


async def circle(conn: Connection, traces: LearnerTraces) -> dict[str, str]:
    """The people around the learner, user id -> how they relate to it."""
    rows = await conn.fetch(
        "SELECT m.user_id, m.relation FROM learning.family_members m"
        " JOIN learning.learners l ON l.family_id = m.family_id WHERE l.id = $1"
        " UNION ALL SELECT user_id, 'guardian' FROM learning.guardians WHERE learner_id = $1"
        " UNION ALL SELECT mentor_user_id, 'mentor' FROM learning.mentor_assignments"
        "  WHERE learner_id = $1",
        traces.learner_id,
    )
    people = {row["user_id"]: row["relation"] for row in rows}
    return people | dict.fromkeys(traces.user_ids, "the learner")


def _person(user_id: str | None, people: Mapping[str, str]) -> Any:
    if user_id is None:
        return None
    relation = people.get(user_id)
    return {"user_id": user_id, "relation": relation} if relation else OUTSIDE


async def _snapshots(
    conn: Connection,
    objects: SnapshotObjects,
    keys: DataKeys,
    traces: LearnerTraces,
    bodies: dict[str, bytes],
) -> list[dict[str, Any]]:
    rows = await conn.fetch(
        "SELECT s.input_ref, s.kind, s.created_at, s.sha256, s.key_id"
        " FROM learning.context_snapshots s LEFT JOIN learning.snapshot_keys k ON k.id = s.key_id"
        " WHERE k.subject = $1 OR s.learner_ref = ANY($2::text[]) ORDER BY s.created_at",
        traces.subject,
        [traces.ref, traces.ref_prefix],
    )
    index = []
    for row in rows:
        entry: dict[str, Any] = {
            "input_ref": row["input_ref"],
            "kind": row["kind"],
            "written_at": row["created_at"],
            "sha256": row["sha256"],
        }
        try:
            stored = await objects.get(row["input_ref"])
            key = await keys.by_id(row["key_id"]) if row["key_id"] else None
            body = unseal(key, row["input_ref"], stored) if key else stored
        except (ObjectNotFoundError, SnapshotSealError):
            entry["verified"] = False
            entry["note"] = "the stored copy is gone or no longer matches"
        else:
            entry["verified"] = hashlib.sha256(body).hexdigest() == row["sha256"]
            entry["file"] = f"snapshots/{row['input_ref'].replace('/', '_')}"
            bodies[entry["file"]] = body
        index.append(entry)
    return index


async def _conversations(conn: Connection, learner_id: str) -> list[dict[str, Any]]:
    sessions = await conn.fetch(
        "SELECT id, status, created_at, updated_at FROM learning.chat_sessions"
        " WHERE learner_id = $1 ORDER BY created_at",
        learner_id,
    )
    found = []
    for session in sessions:
        messages = await conn.fetch(
            "SELECT turn_id, seq, role, type, status, content, tool_summary, created_at"
            " FROM learning.chat_messages WHERE session_id = $1 ORDER BY seq",
            session["id"],
        )
        state = await conn.fetchrow(
            "SELECT extracted_info, agent_state, updated_at FROM learning.conversation_state"
            " WHERE session_id = $1",
            session["id"],
        )
        summaries = await conn.fetch(
            "SELECT version, summary, covered_turns, created_at"
            " FROM learning.conversation_summaries WHERE session_id = $1 ORDER BY version",
            session["id"],
        )
        found.append(
            {
                **dict(session),
                "messages": [dict(row) for row in messages],
                "state": dict(state) if state else None,
                "summaries": [dict(row) for row in summaries],
            }
        )
    return found


async def _items(conn: Connection, learner_id: str) -> list[dict[str, Any]]:
    rows = await conn.fetch(
        "SELECT DISTINCT i.id, i.node_id, i.kind, i.stem, i.choices, i.generated_by, i.created_at"
        " FROM knowledge.items i JOIN learning.evidence e ON e.item_id = i.id"
        " WHERE e.learner_id = $1 AND i.origin = 'generated' ORDER BY i.created_at, i.id",
        learner_id,
    )
    return [dict(row) for row in rows]


async def _requests(conn: Connection, subject: str) -> list[dict[str, Any]]:
    rows = await conn.fetch(
        "SELECT id, kind, state, received_at, acknowledge_by, complete_by, acknowledged_at,"
        " completed_at FROM rights.requests WHERE subject = $1 ORDER BY received_at",
        subject,
    )
    found = []
    for row in rows:
        steps = await conn.fetch(
            "SELECT at, step FROM rights.request_events WHERE request_id = $1 ORDER BY id",
            row["id"],
        )
        found.append({**dict(row), "steps": [dict(step) for step in steps]})
    return found


def _with_people(
    rows: Sequence[Mapping[str, Any]], people: Mapping[str, str], fields: Sequence[str]
) -> list[dict[str, Any]]:
    return [
        {
            **dict(row),
            **{name: _person(row.get(name), people) for name in fields if name in row},
        }
        for row in rows
    ]


async def export_context_stores(
    conn: Connection,
    objects: SnapshotObjects,
    keys: DataKeys,
    traces: LearnerTraces,
    toolplane: Mapping[str, Sequence[Mapping[str, Any]]],
    out: Path,
    *,
    now: datetime,
    request_id: str = "",
    snapshot_period: str = "for the snapshot retention period",
) -> dict[str, Any]:
    """Write the export of ``traces``' learner to ``out`` (a new or empty directory), with
    ``toolplane`` (the tool plane's records of it); returns the manifest. ``conn`` is the
    owner's."""
    people = await circle(conn, traces)
    approvals = [
        {**row, "decided_by": "an operator" if row.get("decided_by") else None}
        for row in _with_people(toolplane.get("approvals", []), people, ["user_id"])
    ]
    snapshots: dict[str, bytes] = {}
    documents = {
        "snapshots.json": await _snapshots(conn, objects, keys, traces, snapshots),
        "conversations.json": await _conversations(conn, traces.learner_id),
        "items.json": await _items(conn, traces.learner_id),
        "audit.json": _with_people(toolplane.get("audit", []), people, ["user_id", "subject"]),
        "approvals.json": approvals,
        "agent_tokens.json": _with_people(toolplane.get("agent_tokens", []), people, ["user_id"]),
        "requests.json": await _requests(conn, traces.subject),
    }
    files = {name: _dump(content) for name, content in documents.items()} | snapshots
    listed: dict[str, Any] = {
        name: {"sha256": hashlib.sha256(body).hexdigest()} for name, body in files.items()
    }
    for name, content in documents.items():
        listed[name]["entries"] = len(content)
    manifest = {"request_id": request_id, "generated_at": now.isoformat(), "files": listed}
    files["manifest.json"] = _dump(manifest)
    files["README.md"] = readme(
        now.isoformat(timespec="seconds"), request_id or "-", snapshot_period
    ).encode("utf-8")
    await asyncio.to_thread(_write, out, files)
    return manifest


def _write(out: Path, files: Mapping[str, bytes]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty; an export goes into a new directory")
    (out / "snapshots").mkdir()
    for name, body in files.items():
        (out / name).write_bytes(body)
