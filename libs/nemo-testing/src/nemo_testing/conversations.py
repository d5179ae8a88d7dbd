"""Chat sessions written straight into the database, as the start of a test, and removed after."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

StoredMessage = tuple[str, str, str, str, str | None]
"""A completed chat message as stored: (turn id, role, type, content, tool summary)."""


@asynccontextmanager
async def stored_session(
    owner_dsn: str,
    learner_id: str,
    messages: Sequence[StoredMessage] = (),
    *,
    summary: tuple[str, int] | None = None,
    state: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None,
) -> AsyncIterator[str]:
    """A new chat session of ``learner_id`` holding ``messages``, completed, in order; maybe a
    stored summary (its text and the last message of the one turn it covers) and a state
    (extracted facts, agent state). ``owner_dsn`` connects as the database's owner. Deleted with
    everything stored for it afterwards, so the seeded sessions stay as they are."""
    session_id = f"CS-TEST-{secrets.token_hex(6)}"
    conn = await asyncpg.connect(owner_dsn)
    try:
        await conn.execute(
            "INSERT INTO learning.chat_sessions (id, learner_id) VALUES ($1, $2)",
            session_id,
            learner_id,
        )
        await conn.executemany(
            "INSERT INTO learning.chat_messages (session_id, learner_id, turn_id, seq, role,"
            " type, status, content, tool_summary)"
            " VALUES ($1, $2, $3, $4, $5, $6, 'completed', $7, $8)",
            [
                (session_id, learner_id, turn, seq, role, kind, content, tool_summary)
                for seq, (turn, role, kind, content, tool_summary) in enumerate(messages, 1)
            ],
        )
        if summary is not None:
            await conn.execute(
                "INSERT INTO learning.conversation_summaries"
                " (session_id, learner_id, version, summary, covers_through_seq, covered_turns)"
                " VALUES ($1, $2, 1, $3, $4, 1)",
                session_id,
                learner_id,
                *summary,
            )
        if state is not None:
            await conn.execute(
                "INSERT INTO learning.conversation_state"
                " (session_id, learner_id, extracted_info, agent_state) VALUES ($1, $2, $3, $4)",
                session_id,
                learner_id,
                *(json.dumps(document, ensure_ascii=False) for document in state),
            )
        yield session_id
    finally:
        await conn.execute("DELETE FROM learning.chat_sessions WHERE id = $1", session_id)
        await conn.close()
