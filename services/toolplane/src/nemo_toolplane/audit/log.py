"""The audit log: one row per tool call and per refused request, written in batches, before the
answer.

Every outcome is recorded (unknown tool, invalid input, each denial, approval required, success,
failure), and so is every request the edges refuse (a refused credential, a malformed body) with
identifiers only: the method, the credential that came (never the token), the resource
(``learner:L-2041-1``) and the error code, never the call's input or output. Rows wait in memory at
most ``flush_seconds`` before their write starts; the rows of calls that end while a write is in
flight go together in the next one (group commit), so a busy replica writes few large batches.

A call answers once its row is stored (:meth:`AuditLog.settle`), so a replica that dies, even
by SIGKILL, loses no row of a call that was answered. That wait is bounded: when the store is
slow or down, a call answers after ``answer_wait_seconds`` at most, and once a wait times out
or a write fails, calls stop waiting until a write succeeds again (a hung store must not slow
every call down).

No row is lost silently, even when the database hangs: every statement has a time limit
(``statement_timeout``, which also bounds waiting for a connection), the rows waiting in memory
are bounded (``max_pending``), and a row that is not stored (the store refused or timed out,
the buffer was full, shutdown came first) is logged in full, so the log holds the record, and
counted.
Closing writes the rows still pending within what is left of the shutdown's grace period (from
the moment shutdown starts, :meth:`AuditLog.watch`), so a graceful shutdown loses none while the
database answers and never waits past the grace period when it does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from opentelemetry import metrics

from nemo_core.db import Pool, untraced
from nemo_toolplane.decisions import Decision
from nemo_toolplane.envelope import ErrorCode

logger = logging.getLogger(__name__)


class CallStatus(StrEnum):
    SUCCESS = "success"
    DENIED = "denied"
    APPROVAL_REQUIRED = "approval_required"
    INVALID = "invalid"
    NOT_FOUND = "not_found"
    ERROR = "error"


@dataclass(frozen=True)
class AuditEntry:
    """One call as the audit log keeps it."""

    request_id: str
    timestamp: datetime
    #: None when no agent was identified (a refused credential).
    agent_id: str | None
    session_id: str
    user_id: str | None
    #: The resolved versioned id, or the name a ``tools/call`` gave; None when the request was
    #: no tool call, or named no tool.
    tool_id: str | None
    resource: str | None
    decision: Decision
    status: CallStatus
    error_code: ErrorCode | None
    duration_ms: float
    environment: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: Made by the server for this call (the agent's request id may repeat).
    call_id: str | None = None
    #: The agent token of the call; None on rows of agents' legacy tokens (before 0019).
    token_id: str | None = None
    #: Where ``user_id`` came from: none, token, caller or asserted.
    user_source: str | None = None
    #: Snapshot of the learner data the call returned (``GetSnapshot`` reads it).
    input_ref: str | None = None
    #: The JSON-RPC or gRPC method; the HTTP method and path when the body named none.
    method: str | None = None
    #: What authenticated the request: none, agent_token or oauth.
    credential_kind: str | None = None
    #: The OAuth client, the token's subject and the scopes it carries (OAuth only).
    client_id: str | None = None
    subject: str | None = None
    scopes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class _Row:
    """A queued entry, and what its call waits on."""

    entry: AuditEntry
    stored: asyncio.Future[bool]


# Scopes travel as one JSON array per row (unnest cannot take an array of arrays of unequal
# lengths) and become text[] here.
_INSERT = """
INSERT INTO toolplane.audit_logs (request_id, "timestamp", agent_id, session_id, user_id,
    tool_id, resource, decision, status, error_code, duration_ms, environment, metadata,
    call_id, token_id, user_source, input_ref, method, credential_kind, client_id, subject,
    scopes)
SELECT r, t, a, s, u, tool, res, d, st, e, ms, env, m::jsonb, c, tk, us, ir, me, ck, cl, sub,
    CASE WHEN sc IS NULL THEN NULL
         ELSE ARRAY(SELECT jsonb_array_elements_text(sc::jsonb)) END
FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[],
            $7::text[], $8::text[], $9::text[], $10::text[], $11::float8[], $12::text[],
            $13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[],
            $19::text[], $20::text[], $21::text[], $22::text[])
    AS x(r, t, a, s, u, tool, res, d, st, e, ms, env, m, c, tk, us, ir, me, ck, cl, sub, sc)
"""


def _columns(batch: Sequence[AuditEntry]) -> list[list[Any]]:
    return [
        [entry.request_id for entry in batch],
        [entry.timestamp for entry in batch],
        [entry.agent_id for entry in batch],
        [entry.session_id for entry in batch],
        [entry.user_id for entry in batch],
        [entry.tool_id for entry in batch],
        [entry.resource for entry in batch],
        [entry.decision.value for entry in batch],
        [entry.status.value for entry in batch],
        [entry.error_code.value if entry.error_code else None for entry in batch],
        [entry.duration_ms for entry in batch],
        [entry.environment for entry in batch],
        [json.dumps(dict(entry.metadata), separators=(",", ":")) for entry in batch],
        [entry.call_id for entry in batch],
        [entry.token_id for entry in batch],
        [entry.user_source for entry in batch],
        [entry.input_ref for entry in batch],
        [entry.method for entry in batch],
        [entry.credential_kind for entry in batch],
        [entry.client_id for entry in batch],
        [entry.subject for entry in batch],
        [None if entry.scopes is None else json.dumps(list(entry.scopes)) for entry in batch],
    ]


class AuditLog:
    """Collects entries and writes them in the background; :meth:`close` flushes the rest."""

    def __init__(
        self,
        pool: Pool,
        *,
        flush_seconds: float,
        batch_size: int,
        max_pending: int = 10_000,
        statement_timeout: float = 5.0,
        grace_seconds: float = 10.0,
        answer_wait_seconds: float = 1.0,
        meter: metrics.Meter | None = None,
    ) -> None:
        self._pool = pool
        self._answer_wait = answer_wait_seconds
        # Calls wait for their rows while the store keeps up; a wait that times out stops the
        # waiting until the next successful write.
        self._keeping_up = True
        self._flush_seconds = flush_seconds
        self._batch_size = batch_size
        self._max_pending = max_pending
        self._statement_timeout = statement_timeout
        self._grace_seconds = grace_seconds
        self._pending: list[_Row] = []
        self._writing: list[_Row] = []
        self._wakeup = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._closing = False
        self._deadline: float | None = None
        self._writer: asyncio.Task[None] | None = None
        meter = meter or metrics.get_meter(__name__)
        self._written = meter.create_counter(
            "nemo.toolplane.audit.rows_written", unit="{row}", description="Audit rows stored."
        )
        self._failed = meter.create_counter(
            "nemo.toolplane.audit.rows_failed",
            unit="{row}",
            description="Audit rows the store refused or did not answer for, or that shutdown "
            "left unwritten; each is in the error log instead.",
        )
        self._dropped = meter.create_counter(
            "nemo.toolplane.audit.rows_dropped",
            unit="{row}",
            description="Audit rows that found the buffer full (the store is slow or down); each "
            "is in the error log instead.",
        )
        self.failed_rows = 0
        """Rows not stored since start, buffer overflow excluded (also an OpenTelemetry counter)."""
        self.dropped_rows = 0
        """Rows that found the buffer full since start (also an OpenTelemetry counter)."""
        self.peak_pending = 0
        """Most rows ever waiting in memory at once (never above ``max_pending``)."""

    @property
    def pending(self) -> int:
        """Rows waiting in memory or being written now."""
        return len(self._pending) + len(self._writing)

    def start(self) -> None:
        """Start the background writer (needs a running event loop)."""
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_until_closed())

    async def watch(self, stopping: asyncio.Event) -> None:
        """Background task: when shutdown starts, the grace period the final flush must end
        in starts too."""
        await stopping.wait()
        self._deadline = time.monotonic() + self._grace_seconds

    def record(self, entry: AuditEntry) -> asyncio.Future[bool] | None:
        """Queue one entry; never blocks and never raises into the call. Returns what
        :meth:`settle` waits on: done once the row is stored (True) or logged instead (False);
        None when it was logged at once (closed, or the buffer is full)."""
        if self._closing and self._writer is None:
            logger.error("audit entry after close", extra={"audit": _loggable(entry)})
            return None
        if len(self._pending) >= self._max_pending:
            self.dropped_rows += 1
            self._dropped.add(1)
            logger.error("audit buffer full; row not stored", extra={"audit": _loggable(entry)})
            return None
        stored: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append(_Row(entry, stored))
        self.peak_pending = max(self.peak_pending, len(self._pending))
        # Wake the writer when a batch starts (it then waits up to flush_seconds) or is full.
        if len(self._pending) == 1 or len(self._pending) >= self._batch_size:
            self._wakeup.set()
        return stored

    async def settle(self, stored: asyncio.Future[bool] | None) -> None:
        """Wait until the row :meth:`record` queued is stored, while the store keeps up; at most
        ``answer_wait_seconds``."""
        if stored is None or stored.done() or not self._keeping_up:
            return
        try:
            await asyncio.wait_for(asyncio.shield(stored), self._answer_wait)
        except TimeoutError:
            if self._keeping_up:
                self._keeping_up = False
                logger.warning("audit store is slow; calls answer before their rows are stored")

    async def close(self) -> None:
        """Stop waiting for batches to fill and write every pending entry, within what is left
        of the grace period (the whole of it when shutdown was not watched); what is still not
        written then is logged and counted."""
        self._closing = True
        self._wakeup.set()
        remaining = (
            self._grace_seconds
            if self._deadline is None
            else max(0.0, self._deadline - time.monotonic())
        )
        try:
            async with asyncio.timeout(remaining):
                if self._writer is not None:
                    await self._writer
                await self._flush()
        except TimeoutError:
            if self._writer is not None:
                self._writer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._writer
            left = self._pending + self._writing
            self._pending, self._writing = [], []
            self._not_stored(left, "audit rows not written before the end of the grace period")
        finally:
            self._writer = None

    async def _write_until_closed(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            if self._flush_seconds and not self._closing and len(self._pending) < self._batch_size:
                # Until the batch is full, closing starts, or flush_seconds pass.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), self._flush_seconds)
                self._wakeup.clear()
            await self._flush()
            if self._closing:
                return

    async def flush(self) -> None:
        """Write every entry recorded so far, including a batch already being written."""
        await self._flush()

    async def _flush(self) -> None:
        # One writer at a time, so flush() returns only after earlier batches are stored too.
        async with self._write_lock:
            while self._pending:
                self._writing = self._pending[: self._batch_size]
                del self._pending[: self._batch_size]
                await self._write(self._writing)
                self._writing = []

    async def _write(self, batch: list[_Row]) -> None:
        try:
            # Bounded twice: a pool whose connections all hang, and a statement that never ends.
            # Untraced: one batch holds the rows of many calls, so its span would belong to no
            # call's trace (failures are logged and counted instead).
            async with self._pool.acquire(timeout=self._statement_timeout) as conn:
                columns = _columns([row.entry for row in batch])
                with untraced():
                    await conn.execute(_INSERT, *columns, timeout=self._statement_timeout)
        except Exception:
            logger.exception("audit store failed; the rows follow in the log")
            self._keeping_up = False
            self._not_stored(batch, "audit row not stored")
            return
        self._written.add(len(batch))
        self._keeping_up = True
        for row in batch:
            if not row.stored.done():
                row.stored.set_result(True)

    def _not_stored(self, rows: list[_Row], message: str) -> None:
        if not rows:
            return
        self.failed_rows += len(rows)
        self._failed.add(len(rows))
        for row in rows:
            logger.error(message, extra={"audit": _loggable(row.entry)})
            if not row.stored.done():
                row.stored.set_result(False)


def _loggable(entry: AuditEntry) -> dict[str, Any]:
    row = asdict(entry)
    row["timestamp"] = entry.timestamp.isoformat()
    return row
