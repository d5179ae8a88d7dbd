"""Data subject requests (export, erasure, restriction) with the clocks the law sets them.

Vietnam's personal data protection decree gives a controller 2 working days to acknowledge a
data subject's request and 15 days to complete it; COPPA and GDPR (one month) are met by the
same clocks. A request is a row of ``rights.requests`` with its received time, both deadlines
and its state; every step it goes through is a row of ``rights.request_events`` (who, when,
what, with counts but never values). Requests name the learner only by subject.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from enum import StrEnum
from typing import Any, Final
from zoneinfo import ZoneInfo

import asyncpg

from nemo_core.db import Connection

#: Where working days are counted: the law is Vietnamese.
WORKING_TIMEZONE: Final = ZoneInfo("Asia/Ho_Chi_Minh")
ACKNOWLEDGE_WORKING_DAYS: Final = 2
COMPLETE_DAYS: Final = 15

REQUEST_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{2,63}")


class Kind(StrEnum):
    EXPORT = "export"
    ERASURE = "erasure"
    RESTRICTION = "restriction"


class State(StrEnum):
    RECEIVED = "received"
    ACKNOWLEDGED = "acknowledged"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    IN_EFFECT = "in_effect"
    LIFTED = "lifted"
    FAILED = "failed"


#: States in which a request still runs against its clocks.
OPEN_STATES: Final = frozenset(
    {State.RECEIVED, State.ACKNOWLEDGED, State.IN_PROGRESS, State.FAILED}
)


class RequestError(Exception):
    """A request that cannot be made or moved as asked; the message says why."""


def add_working_days(start: datetime, days: int) -> datetime:
    """``start`` plus ``days`` working days (Monday to Friday in Vietnam).

    A request received on a weekend starts counting on the next Monday at midnight.
    """
    local = start.astimezone(WORKING_TIMEZONE)
    if local.weekday() >= 5:
        monday = local.date() + timedelta(days=7 - local.weekday())
        local = datetime.combine(monday, time.min, WORKING_TIMEZONE)
    remaining = days
    while remaining:
        local += timedelta(days=1)
        if local.weekday() < 5:
            remaining -= 1
    return local.astimezone(start.tzinfo)


def deadlines(received_at: datetime) -> tuple[datetime, datetime]:
    """(acknowledge by, complete by) of a request received at ``received_at``."""
    return (
        add_working_days(received_at, ACKNOWLEDGE_WORKING_DAYS),
        received_at + timedelta(days=COMPLETE_DAYS),
    )


def check_request_id(request_id: str) -> str:
    if not REQUEST_ID.fullmatch(request_id):
        raise RequestError(
            "a request id is 3 to 64 letters, digits or . _ : -, starting with a letter or digit"
        )
    return request_id


@dataclass(frozen=True)
class RightsRequest:
    """One request as stored."""

    request_id: str
    kind: Kind
    subject: str
    requested_by: str
    requested_via: str
    state: State
    received_at: datetime
    acknowledge_by: datetime
    complete_by: datetime
    acknowledged_at: datetime | None
    completed_at: datetime | None
    receipt: Mapping[str, Any] | None

    def overdue(self, now: datetime) -> bool:
        """Past a deadline it has not met."""
        if self.state not in OPEN_STATES:
            return False
        late_ack = self.acknowledged_at is None and now > self.acknowledge_by
        return late_ack or now > self.complete_by


_COLUMNS: Final = (
    "id, kind, subject, requested_by, requested_via, state, received_at, acknowledge_by, "
    "complete_by, acknowledged_at, completed_at, receipt"
)


def _request(row: asyncpg.Record) -> RightsRequest:
    receipt = row["receipt"]
    return RightsRequest(
        request_id=row["id"],
        kind=Kind(row["kind"]),
        subject=row["subject"],
        requested_by=row["requested_by"],
        requested_via=row["requested_via"],
        state=State(row["state"]),
        received_at=row["received_at"],
        acknowledge_by=row["acknowledge_by"],
        complete_by=row["complete_by"],
        acknowledged_at=row["acknowledged_at"],
        completed_at=row["completed_at"],
        receipt=json.loads(receipt) if isinstance(receipt, str) else receipt,
    )


async def record_event(
    conn: Connection, request_id: str, step: str, actor: str, detail: Mapping[str, Any]
) -> None:
    """One audited step of a request."""
    await conn.execute(
        "INSERT INTO rights.request_events (request_id, step, actor, detail)"
        " VALUES ($1, $2, $3, $4)",
        request_id,
        step,
        actor,
        dict(detail),
    )


async def get_request(conn: Connection, request_id: str) -> RightsRequest | None:
    row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM rights.requests WHERE id = $1", request_id)
    return None if row is None else _request(row)


async def open_request(
    conn: Connection,
    request_id: str,
    kind: Kind,
    subject: str,
    *,
    requested_by: str,
    requested_via: str,
    now: datetime,
) -> RightsRequest:
    """The request ``request_id``, recorded as received now unless it already exists.

    Asking again with the same id is harmless; the same id for another kind or learner is a
    :class:`RequestError` (ids are the caller's, and one must never stand for two requests).
    """
    check_request_id(request_id)
    existing = await get_request(conn, request_id)
    if existing is not None:
        if existing.kind != kind or existing.subject != subject:
            raise RequestError(f"request {request_id} exists for another kind or learner")
        return existing
    acknowledge_by, complete_by = deadlines(now)
    await conn.execute(
        "INSERT INTO rights.requests (id, kind, subject, requested_by, requested_via,"
        " received_at, acknowledge_by, complete_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        request_id,
        kind.value,
        subject,
        requested_by,
        requested_via,
        now,
        acknowledge_by,
        complete_by,
    )
    await record_event(conn, request_id, "received", requested_via, {"kind": kind.value})
    created = await get_request(conn, request_id)
    assert created is not None  # noqa: S101  inserted just above, in the same transaction
    return created


async def acknowledge(conn: Connection, request_id: str, actor: str, now: datetime) -> None:
    """Record that the family was told the request was received (once)."""
    status = await conn.execute(
        "UPDATE rights.requests SET acknowledged_at = $2,"
        " state = CASE WHEN state = 'received' THEN 'acknowledged' ELSE state END"
        " WHERE id = $1 AND acknowledged_at IS NULL",
        request_id,
        now,
    )
    if status.endswith(" 1"):
        await record_event(conn, request_id, "acknowledged", actor, {})


async def set_state(
    conn: Connection,
    request_id: str,
    state: State,
    actor: str,
    *,
    now: datetime,
    receipt: Mapping[str, Any] | None = None,
    detail: Mapping[str, Any] | None = None,
) -> None:
    """Move a request to ``state`` (recording the receipt when given) and audit the step."""
    finished = state in (State.COMPLETED, State.LIFTED)
    await conn.execute(
        "UPDATE rights.requests SET state = $2,"
        " completed_at = CASE WHEN $3 THEN coalesce(completed_at, $4) ELSE NULL END,"
        " receipt = coalesce($5, receipt)"
        " WHERE id = $1",
        request_id,
        state.value,
        finished,
        now,
        None if receipt is None else dict(receipt),
    )
    await record_event(conn, request_id, state.value, actor, detail or {})


async def list_requests(conn: Connection, now: datetime, limit: int = 100) -> list[RightsRequest]:
    """Requests, overdue ones first (by how late), then open ones by deadline, then the rest
    newest first."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM rights.requests"
        " ORDER BY (state NOT IN ('completed', 'in_effect', 'lifted') AND"
        "  ((acknowledged_at IS NULL AND acknowledge_by < $1) OR complete_by < $1)) DESC,"
        " (state NOT IN ('completed', 'in_effect', 'lifted')) DESC,"
        " CASE WHEN state NOT IN ('completed', 'in_effect', 'lifted') THEN complete_by END,"
        " received_at DESC"
        " LIMIT $2",
        now,
        limit,
    )
    return [_request(row) for row in rows]


async def requests_of(conn: Connection, subject: str, requested_by: str) -> list[RightsRequest]:
    """The requests one person made about one learner (by subject), newest first."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM rights.requests WHERE subject = $1 AND requested_by = $2"
        " ORDER BY received_at DESC",
        subject,
        requested_by,
    )
    return [_request(row) for row in rows]


async def events(conn: Connection, request_id: str) -> list[Mapping[str, Any]]:
    """The audited steps of a request, in order."""
    rows = await conn.fetch(
        "SELECT at, step, actor, detail FROM rights.request_events WHERE request_id = $1"
        " ORDER BY id",
        request_id,
    )
    return [dict(row) for row in rows]
