"""The conversation's reads and writes, always bound to the session's learner.

A session id arrives from the caller; ``learning.chat_session_learner`` (a definer function that
returns only the key) says which learner it belongs to, and every statement after that runs in a
transaction bound to exactly that learner, so row-level security hides every other learner even
if a ``WHERE`` were wrong. Statements name their columns; none reads a descriptive identifier.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from nemo_context.conversation.messages import StoredMessage
from nemo_context.gate.circle import Circle
from nemo_context.purposes import Purpose, Slice
from nemo_context.repository import circle_of, linked_identifiers
from nemo_core.db import Connection, Pool

_MESSAGES_SQL: Final = """
SELECT id, turn_id, seq, role, type, status, content, tool_summary
FROM learning.chat_messages
WHERE session_id = $1 AND learner_id = $2
ORDER BY seq
"""

_STATE_SQL: Final = """
SELECT extracted_info, agent_state
FROM learning.conversation_state
WHERE session_id = $1 AND learner_id = $2
"""

_LATEST_SUMMARY_SQL: Final = """
SELECT version, summary, covers_through_seq
FROM learning.conversation_summaries
WHERE session_id = $1 AND learner_id = $2
ORDER BY version DESC
LIMIT 1
"""

_PROFILE_SQL: Final = "SELECT grade FROM learning.learners WHERE id = $1"
_PROFILE_WITH_AGE_SQL: Final = (
    "SELECT grade, learning.learner_age_years($1) AS age_years FROM learning.learners WHERE id = $1"
)


async def session_learner(pool: Pool, session_id: str) -> str | None:
    """The learner a session belongs to; ``None`` for an unknown session."""
    learner_id: str | None = await pool.fetchval(
        "SELECT learning.chat_session_learner($1)", session_id
    )
    return learner_id


@dataclass(frozen=True)
class StoredSummary:
    """The latest summary of a session."""

    version: int
    text: str
    covers_through_seq: int


@dataclass(frozen=True)
class SessionRecord:
    """Everything the conversation builder reads about one session."""

    grade: int
    age_years: int | None
    messages: tuple[StoredMessage, ...]
    extracted_info: dict[str, Any]
    agent_state: dict[str, Any]
    summary: StoredSummary | None
    linked_ids: frozenset[str]
    circle: Circle


def _object(value: Any) -> dict[str, Any]:
    # jsonb columns decode to Python values; a state that is not an object is treated as empty.
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else {}


async def read_session(
    conn: Connection, session_id: str, learner_id: str, purpose: Purpose, identifier_key: bytes
) -> SessionRecord:
    """Read what ``purpose`` declares of a session, the keys the gate must forbid and the
    fingerprints of the identifiers around the learner; ``conn`` is in a transaction bound to
    ``learner_id``."""
    profile = None
    if purpose.declares(Slice.PROFILE):
        age = purpose.declares(Slice.AGE)
        statement = _PROFILE_WITH_AGE_SQL if age else _PROFILE_SQL
        profile = await conn.fetchrow(statement, learner_id)
    rows = (
        await conn.fetch(_MESSAGES_SQL, session_id, learner_id)
        if purpose.declares(Slice.CONVERSATION_HISTORY)
        else []
    )
    state = (
        await conn.fetchrow(_STATE_SQL, session_id, learner_id)
        if purpose.declares(Slice.CONVERSATION_STATE)
        else None
    )
    summary = (
        await conn.fetchrow(_LATEST_SUMMARY_SQL, session_id, learner_id)
        if purpose.declares(Slice.CONVERSATION_SUMMARY)
        else None
    )
    linked = await linked_identifiers(conn, learner_id)
    return SessionRecord(
        grade=int(profile["grade"]) if profile else 0,
        age_years=profile.get("age_years") if profile else None,
        messages=tuple(
            StoredMessage(
                message_id=row["id"],
                turn_id=row["turn_id"],
                seq=row["seq"],
                role=row["role"],
                type=row["type"],
                status=row["status"],
                content=row["content"],
                tool_summary=row["tool_summary"],
            )
            for row in rows
        ),
        extracted_info=_object(state["extracted_info"]) if state else {},
        agent_state=_object(state["agent_state"]) if state else {},
        summary=(
            StoredSummary(summary["version"], summary["summary"], summary["covers_through_seq"])
            if summary
            else None
        ),
        linked_ids=linked | {learner_id},
        circle=await circle_of(conn, learner_id, identifier_key, linked),
    )


@dataclass(frozen=True)
class NewMessage:
    """A message to store (stored words, validated)."""

    role: str
    type: str
    status: str
    content: str
    tool_summary: str | None


class TurnNotLatestError(Exception):
    """The turn exists but later turns follow it, so it can no longer be replaced."""


class UnknownSummaryTurnError(Exception):
    """The summary names a turn the session does not have."""


async def replace_turn(
    conn: Connection,
    session_id: str,
    learner_id: str,
    turn_id: str,
    messages: Sequence[NewMessage],
) -> None:
    """Replace the messages of ``turn_id`` (the session's latest turn, or a new one).

    Takes the session's row lock first, so two recordings of one session run one after the other.
    """
    await conn.execute(
        "SELECT id FROM learning.chat_sessions WHERE id = $1 AND learner_id = $2 FOR UPDATE",
        session_id,
        learner_id,
    )
    later = await conn.fetchval(
        "SELECT EXISTS (SELECT FROM learning.chat_messages AS later"
        " WHERE later.session_id = $1 AND later.learner_id = $2 AND later.turn_id <> $3"
        " AND later.seq > (SELECT min(seq) FROM learning.chat_messages"
        "  WHERE session_id = $1 AND learner_id = $2 AND turn_id = $3))",
        session_id,
        learner_id,
        turn_id,
    )
    if later:
        raise TurnNotLatestError(turn_id)
    # The role may not delete messages; this definer function removes one turn of a bound learner.
    await conn.execute("SELECT learning.clear_chat_turn($1, $2)", session_id, turn_id)
    next_seq: int = await conn.fetchval(
        "SELECT coalesce(max(seq), 0) + 1 FROM learning.chat_messages"
        " WHERE session_id = $1 AND learner_id = $2",
        session_id,
        learner_id,
    )
    await conn.executemany(
        "INSERT INTO learning.chat_messages"
        " (session_id, learner_id, turn_id, seq, role, type, status, content, tool_summary)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        [
            (
                session_id,
                learner_id,
                turn_id,
                next_seq + offset,
                message.role,
                message.type,
                message.status,
                message.content,
                message.tool_summary,
            )
            for offset, message in enumerate(messages)
        ],
    )
    await conn.execute(
        "UPDATE learning.chat_sessions SET updated_at = now() WHERE id = $1 AND learner_id = $2",
        session_id,
        learner_id,
    )


async def write_state(
    conn: Connection,
    session_id: str,
    learner_id: str,
    extracted_info: dict[str, Any],
    agent_state: dict[str, Any],
) -> None:
    """Replace the session's structured state."""
    await conn.execute(
        "INSERT INTO learning.conversation_state"
        " (session_id, learner_id, extracted_info, agent_state, updated_at)"
        " VALUES ($1, $2, $3, $4, now())"
        " ON CONFLICT (session_id) DO UPDATE SET extracted_info = excluded.extracted_info,"
        " agent_state = excluded.agent_state, updated_at = excluded.updated_at",
        session_id,
        learner_id,
        extracted_info,
        agent_state,
    )


async def add_summary(
    conn: Connection, session_id: str, learner_id: str, text: str, covers_through_turn_id: str
) -> int:
    """Store a new summary version covering every message up to the end of
    ``covers_through_turn_id``; returns its version."""
    covers_through_seq: int | None = await conn.fetchval(
        "SELECT max(seq) FROM learning.chat_messages"
        " WHERE session_id = $1 AND learner_id = $2 AND turn_id = $3",
        session_id,
        learner_id,
        covers_through_turn_id,
    )
    if covers_through_seq is None:
        raise UnknownSummaryTurnError(covers_through_turn_id)
    version: int = await conn.fetchval(
        "INSERT INTO learning.conversation_summaries"
        " (session_id, learner_id, version, summary, covers_through_seq, covered_turns)"
        " SELECT $1, $2,"
        "  (SELECT coalesce(max(version), 0) + 1 FROM learning.conversation_summaries"
        "   WHERE session_id = $1 AND learner_id = $2),"
        "  $3, $4,"
        "  (SELECT count(DISTINCT turn_id) FROM learning.chat_messages"
        "   WHERE session_id = $1 AND learner_id = $2 AND seq <= $4)"
        " RETURNING version",
        session_id,
        learner_id,
        text,
        covers_through_seq,
    )
    return version


async def latest_summary_version(conn: Connection, session_id: str, learner_id: str) -> int:
    """Version of the session's latest summary; 0 when there is none."""
    version: int = await conn.fetchval(
        "SELECT coalesce(max(version), 0) FROM learning.conversation_summaries"
        " WHERE session_id = $1 AND learner_id = $2",
        session_id,
        learner_id,
    )
    return version
