"""Reading the audit log back, newest first, a page at a time (the people's API).

A search is composed of the filters it has, each bound as a parameter: a statement with every
filter optional (``$1 IS NULL OR ...``) gets a generic plan that can use no index once
PostgreSQL caches it, while each filter here has an index ordered by id (migration 0028), so a
page reads its own rows at any size of the log.

A time range also bounds the ids it walks: a row is stored within :data:`MAX_ROW_DELAY` of its
call's arrival (the audit writer stores a row while its call ends or not at all), so every row
that arrived before ``until`` has a smaller id than the first row that arrived an hour after it,
and every row that arrived after ``since`` a larger id than the last one that arrived an hour
before it. Two probes of the time index find those ids; without them an old, narrow range would
be searched from the newest row down."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from nemo_core import page_tokens
from nemo_core.db import Pool
from nemo_core.page_tokens import InvalidPageToken

_SELECT = """
SELECT id, request_id, "timestamp", agent_id, session_id, user_id, tool_id, resource, decision,
       status, error_code, duration_ms, environment, metadata, call_id, token_id, user_source,
       input_ref, method, credential_kind, client_id, subject, scopes
FROM toolplane.audit_logs
"""

#: Longest a call's audit row is stored after the call arrived (with a wide margin): the bound the
#: time-range filters rest on.
MAX_ROW_DELAY: Final = timedelta(hours=1)
_DELAY: Final = f"interval '{int(MAX_ROW_DELAY.total_seconds())} seconds'"

#: Each filter's condition, with ``{0}`` for its parameter's number.
_FILTERS: Final = {
    "agent_id": "agent_id = ${}",
    "request_id": "request_id = ${}",
    "user_id": "user_id = ${}",
    "resource": "resource = ${}",
    "decision": "decision = ${}",
    "since": '"timestamp" >= ${0} AND id > coalesce((SELECT id FROM toolplane.audit_logs '
    f'WHERE "timestamp" < ${{0}} - {_DELAY} ORDER BY "timestamp" DESC LIMIT 1), 0)',
    "until": '"timestamp" < ${0} AND id < coalesce((SELECT id FROM toolplane.audit_logs '
    f'WHERE "timestamp" >= ${{0}} + {_DELAY} ORDER BY "timestamp" LIMIT 1), '
    "9223372036854775807)",
    "before_id": "id < ${}",
}
# One tool id, or any of several (every version of a tool named without one).
_TOOL_ONE: Final = "tool_id = ${}"
_TOOL_ANY: Final = "tool_id = ANY(${}::text[])"


@dataclass(frozen=True)
class AuditFilter:
    """What a search keeps; None keeps everything."""

    agent_id: str | None = None
    request_id: str | None = None
    user_id: str | None = None
    resource: str | None = None
    tool_ids: tuple[str, ...] | None = None
    decision: str | None = None
    since: datetime | None = None
    until: datetime | None = None


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


def _statement(search: AuditFilter, before_id: int | None, limit: int) -> tuple[str, list[Any]]:
    conditions: list[str] = []
    values: list[Any] = []
    given = {**{name: getattr(search, name) for name in _FILTERS if name != "before_id"},
             "before_id": before_id}  # fmt: skip
    for name, value in given.items():
        if value is not None:
            values.append(value)
            conditions.append(_FILTERS[name].format(len(values)))
    if search.tool_ids is not None:
        one = len(search.tool_ids) == 1
        values.append(search.tool_ids[0] if one else list(search.tool_ids))
        conditions.append((_TOOL_ONE if one else _TOOL_ANY).format(len(values)))
    values.append(limit + 1)
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    return f"{_SELECT} {where} ORDER BY id DESC LIMIT ${len(values)}", values


async def list_entries(
    pool: Pool, search: AuditFilter, *, before_id: int | None, limit: int
) -> tuple[list[StoredAuditEntry], int | None]:
    """Entries matching ``search``, newest first; the second value continues the listing."""
    statement, values = _statement(search, before_id, limit)
    async with pool.acquire() as conn, conn.transaction(readonly=True):
        # A cached generic plan is one for an average user, tool or agent: for one with few rows
        # it walks the whole log by id. Each search is planned for its own values instead.
        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        rows = await conn.fetch(statement, *values)
    entries = [
        StoredAuditEntry(audit_id=values.pop("id"), **values)
        for values in (dict(row) for row in rows[:limit])
    ]
    more = len(rows) > limit
    return entries, (entries[-1].audit_id if more else None)
