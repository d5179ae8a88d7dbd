"""What the tool plane holds about one learner, for a family's export and erasure, and the
retention of its stores.

A learner appears here as the resource of a call (``learner:<id>``), as the user a call or a
token acted for (the learner's own account), inside an approval's arguments, in the snapshot
ref a call's agent saw (``input_ref``), and in call-limit counters. These functions take the
owner's connection (``nemo rights``, ``nemo purge``): the tool plane's own role may append
audit rows but never rewrite them.

De-linking an audit row keeps its shape (time, agent, tool, decision, status, error code,
duration, environment), so calls stay countable, and removes what ties it to the child: the
resource becomes ``learner:delinked``, and the user, token, session and snapshot ref are
cleared, as is any other text that still names the learner.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from nemo_core.db import Connection
from nemo_core.retention import Progress, change_in_batches

DELINKED_RESOURCE: Final = "learner:delinked"


@dataclass(frozen=True)
class LearnerKeys:
    """How the learner appears in tool plane rows."""

    learner_id: str
    user_ids: tuple[str, ...]
    """The learner's id and its own platform account: users a call or token acted for."""
    refs: tuple[str, ...]
    """Its snapshot refs (exact), as ``input_ref`` names them."""
    patterns: tuple[str, ...]
    """Regular expressions that find a trace of the learner in any text (whole keys and refs
    only: another learner whose id starts the same is not matched)."""

    @property
    def resource(self) -> str:
        return f"learner:{self.learner_id}"

    @property
    def regexes(self) -> list[str]:
        return list(self.patterns)


_AUDIT_MATCH: Final = """
    (resource = $1 OR user_id = ANY($2::text[]) OR subject = ANY($2::text[])
     OR split_part(input_ref, '/', 3) = ANY($3::text[])
     OR concat_ws(' ', request_id, session_id, resource, input_ref, metadata::text)
        ~* ANY($4::text[]))
"""
_APPROVAL_MATCH: Final = """
    (resource = $1 OR user_id = ANY($2::text[])
     OR concat_ws(' ', request_id, resource, arguments_json, decision_note) ~* ANY($3::text[]))
"""


def _args(keys: LearnerKeys) -> tuple[object, ...]:
    return (keys.resource, list(keys.user_ids), list(keys.refs), keys.regexes)


def _approval_args(keys: LearnerKeys) -> tuple[object, ...]:
    return (keys.resource, list(keys.user_ids), keys.regexes)


async def export_records(conn: Connection, keys: LearnerKeys) -> dict[str, list[dict[str, Any]]]:
    """The learner's audit rows, approvals and agent tokens, oldest first (no token hashes)."""
    audit = await conn.fetch(
        'SELECT "timestamp", agent_id, tool_id, resource, decision, status, error_code,'
        " user_id, user_source, input_ref, method, credential_kind, client_id, subject, scopes"
        " FROM toolplane.audit_logs"
        f' WHERE {_AUDIT_MATCH} ORDER BY "timestamp", id',
        *_args(keys),
    )
    approvals = await conn.fetch(
        "SELECT created_at, agent_id, tool_id, resource, user_id, arguments_json, status,"
        " expires_at, decided_at, decided_by FROM toolplane.approvals"
        f" WHERE {_APPROVAL_MATCH} ORDER BY created_at, id",
        *_approval_args(keys),
    )
    tokens = await conn.fetch(
        "SELECT agent_id, user_id, label, created_at, expires_at, revoked_at"
        " FROM toolplane.agent_tokens WHERE user_id = ANY($1::text[]) ORDER BY created_at",
        list(keys.user_ids),
    )
    return {
        "audit": [dict(row) for row in audit],
        "approvals": [dict(row) for row in approvals],
        "agent_tokens": [dict(row) for row in tokens],
    }


async def erase_records(conn: Connection, keys: LearnerKeys) -> dict[str, int]:
    """De-link the learner's audit rows; delete its approvals, the tokens bound to its own
    account and its call-limit counters. Returns how many rows each store lost or changed."""
    audit = await conn.execute(
        "UPDATE toolplane.audit_logs SET"
        " resource = CASE WHEN resource LIKE 'learner:%' THEN $5 ELSE resource END,"
        " user_id = NULL, subject = NULL, token_id = NULL, session_id = NULL, input_ref = NULL,"
        " request_id = CASE WHEN request_id ~* ANY($4::text[]) THEN 'delinked'"
        "  ELSE request_id END,"
        " metadata = CASE WHEN metadata::text ~* ANY($4::text[]) THEN '{}' ELSE metadata END"
        f" WHERE {_AUDIT_MATCH}",
        *_args(keys),
        DELINKED_RESOURCE,
    )
    approvals = await conn.execute(
        f"DELETE FROM toolplane.approvals WHERE {_APPROVAL_MATCH}",
        *_approval_args(keys),
    )
    tokens = await conn.execute(
        "DELETE FROM toolplane.agent_tokens WHERE user_id = ANY($1::text[])", list(keys.user_ids)
    )
    buckets = await conn.execute(
        "DELETE FROM toolplane.rate_buckets WHERE key ~* ANY($1::text[])", keys.regexes
    )
    scopes = {table: await _drop_from_scopes(conn, table, keys) for table in _SCOPED_TABLES}
    return {
        **scopes,
        "toolplane.audit_logs (de-linked)": _affected(audit),
        "toolplane.approvals": _affected(approvals),
        "toolplane.agent_tokens": _affected(tokens),
        "toolplane.rate_buckets": _affected(buckets),
    }


#: Rules whose resource scope may list the learner (``learner:L-1,learner:L-2``).
_SCOPED_TABLES: Final = ("toolplane.grants", "toolplane.policies")

_SCOPE_ENTRIES: Final = "array(SELECT btrim(e) FROM unnest(string_to_array(resource_scope, ',')) e)"


async def _drop_from_scopes(conn: Connection, table: str, keys: LearnerKeys) -> int:
    """Take the learner out of the rules that list it; a rule that listed only the learner
    reaches nobody any more and is deleted."""
    async with conn.transaction():
        changed = await conn.execute(
            f"UPDATE {table} SET resource_scope = array_to_string("
            f"array(SELECT e FROM unnest({_SCOPE_ENTRIES}) e WHERE e <> $1), ',')"
            f" WHERE $1 = ANY({_SCOPE_ENTRIES}) AND {_SCOPE_ENTRIES} <> ARRAY[$1]",
            keys.resource,
        )
        emptied = await conn.execute(
            f"DELETE FROM {table} WHERE {_SCOPE_ENTRIES} = ARRAY[$1]",
            keys.resource,
        )
    return _affected(changed) + _affected(emptied)


def _affected(status: str) -> int:
    return int(status.split()[-1])


# Purges, one per tool plane row of the retention table.


async def purge_audit_rows(conn: Connection, now: datetime, days: int, progress: Progress) -> int:
    """De-link the audit rows older than ``days``."""
    return await change_in_batches(
        conn,
        "toolplane.audit_logs",
        '"timestamp" < $1 AND (user_id IS NOT NULL OR subject IS NOT NULL'
        " OR token_id IS NOT NULL OR session_id IS NOT NULL OR input_ref IS NOT NULL"
        " OR (resource LIKE 'learner:%' AND resource <> $2))",
        now - timedelta(days=days),
        DELINKED_RESOURCE,
        progress=progress,
        label="audit rows",
        set_clause="resource = CASE WHEN resource LIKE 'learner:%' THEN $2 ELSE resource END,"
        " user_id = NULL, subject = NULL, token_id = NULL, session_id = NULL, input_ref = NULL",
    )


async def purge_approvals(conn: Connection, now: datetime, days: int, progress: Progress) -> int:
    """Approvals requested more than ``days`` ago, and pending ones that expired more than
    ``days`` ago: the tool plane marks an approval expired only when someone touches it, so
    one nobody looked at again stays pending past its expiry."""
    return await change_in_batches(
        conn,
        "toolplane.approvals",
        "(status <> 'pending' AND created_at < $1) OR (status = 'pending' AND expires_at < $1)",
        now - timedelta(days=days),
        progress=progress,
        label="approvals",
    )


async def purge_agent_tokens(conn: Connection, now: datetime, days: int, progress: Progress) -> int:
    """Tokens bound to a user that were revoked or expired more than ``days`` ago."""
    return await change_in_batches(
        conn,
        "toolplane.agent_tokens",
        "user_id IS NOT NULL AND least(revoked_at, expires_at) < $1",
        now - timedelta(days=days),
        progress=progress,
        label="agent tokens",
    )


async def purge_rate_buckets(conn: Connection, now: datetime, days: int, progress: Progress) -> int:
    """Buckets full again (a full bucket is the same as none) for longer than ``days``."""
    return await change_in_batches(
        conn,
        "toolplane.rate_buckets",
        "full_at < $1",
        now - timedelta(days=days),
        progress=progress,
        label="rate buckets",
    )
