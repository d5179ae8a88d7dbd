"""Reading the audit log back, newest first, a page at a time (operators' admin RPC)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nemo_core import page_tokens
from nemo_core.db import Pool
from nemo_core.page_tokens import InvalidPageToken

_LIST = """
SELECT id, request_id, "timestamp", agent_id, session_id, user_id, tool_id, resource, decision,
       status, error_code, duration_ms, environment, metadata, call_id, token_id, user_source,
       input_ref, method, credential_kind, client_id, subject, scopes
FROM toolplane.audit_logs
WHERE ($1::text IS NULL OR agent_id = $1)
  AND ($2::text IS NULL OR request_id = $2)
  AND ($3::timestamptz IS NULL OR "timestamp" >= $3)
  AND ($4::bigint IS NULL OR id < $4)
ORDER BY id DESC
LIMIT $5
"""

# A page token carries the id to continue below: a positive bigint.
_MAX_ID = 2**63 - 1
_LISTING = "audit"


def encode_page_token(before_id: int) -> str:
    return page_tokens.encode_page_token(_LISTING, before_id)


def decode_page_token(token: str) -> int:
    """The id a page token continues below; :class:`InvalidPageToken` for anything else."""
    [before_id] = page_tokens.decode_page_token(token, _LISTING, 1)
    if not isinstance(before_id, int) or not 1 <= before_id <= _MAX_ID:
        raise InvalidPageToken
    return before_id


@dataclass(frozen=True)
class StoredAuditEntry:
    audit_id: int
    request_id: str
    timestamp: datetime
    agent_id: str | None
    session_id: str | None
    user_id: str | None
    tool_id: str | None
    resource: str | None
    decision: str
    status: str
    error_code: str | None
    duration_ms: float | None
    environment: str
    metadata: Mapping[str, Any]
    call_id: str | None = None
    token_id: str | None = None
    user_source: str | None = None
    input_ref: str | None = None
    method: str | None = None
    credential_kind: str | None = None
    client_id: str | None = None
    subject: str | None = None
    scopes: list[str] | None = None


async def list_entries(
    pool: Pool,
    *,
    agent_id: str | None,
    request_id: str | None,
    since: datetime | None,
    before_id: int | None,
    limit: int,
) -> tuple[list[StoredAuditEntry], int | None]:
    """Entries matching the filters, newest first; the second value continues the listing."""
    rows = await pool.fetch(_LIST, agent_id, request_id, since, before_id, limit + 1)
    entries = [
        StoredAuditEntry(audit_id=values.pop("id"), **values)
        for values in (dict(row) for row in rows[:limit])
    ]
    more = len(rows) > limit
    return entries, (entries[-1].audit_id if more else None)
