"""The audit log: batched, a call answering once its row is stored (while the store keeps up), every
row kept across a graceful shutdown and every answered call's row across SIGKILL, and a failing
store that is logged and counted without failing any call."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from pydantic import BaseModel, ConfigDict

from nemo_core.db import Pool, connect, create_pool, dsn_with
from nemo_ops.migrate import migrate
from nemo_ops.seed import seed
from nemo_toolplane.approvals import CallApprovals
from nemo_toolplane.audit.log import AuditEntry, AuditLog, CallStatus
from nemo_toolplane.decisions import Decision
from nemo_toolplane.docs.library import DocsLibrary
from nemo_toolplane.envelope import ErrorCode
from nemo_toolplane.limits.calls import CallLimiter
from nemo_toolplane.limits.shared import SharedBuckets
from nemo_toolplane.policy import Grant
from nemo_toolplane.principal import Principal
from nemo_toolplane.registry import Registry, ToolDefinition
from nemo_toolplane.router import ToolRouter
from nemo_toolplane.rules.store import AgentRules
from nemo_toolplane.tokens import issue_token
from nemo_toolplane.tool_call import Services, ToolCall
from nemo_toolplane.tool_kinds import Mode, Risk, Scope
from services.toolplane.tests.conftest import (
    AgentTokens,
    RunningToolPlane,
    StartToolPlane,
    counter,
)
from services.toolplane.tests.mcp_http import modern_call, post
from services.toolplane.tests.processes import toolplane_process


def entry(session_id: str, n: int, **changes: Any) -> AuditEntry:
    values: dict[str, Any] = {
        "request_id": f"REQ-audit-{n}",
        "timestamp": datetime.now(UTC),
        "agent_id": "research-agent",
        "session_id": session_id,
        "user_id": None,
        "tool_id": "docs.search_docs:v1",
        "resource": None,
        "decision": Decision.ALLOW,
        "status": CallStatus.SUCCESS,
        "error_code": None,
        "duration_ms": 1.5,
        "environment": "development",
        "metadata": {"transport": "mcp"},
    }
    values.update(changes)
    return AuditEntry(**values)


@pytest.fixture
async def toolplane_pool(toolplane_dsn: str) -> AsyncIterator[Pool]:
    pool = await create_pool(toolplane_dsn, max_size=2)
    yield pool
    await pool.close()


async def test_rows_wait_off_the_request_path_and_close_writes_them_all(
    toolplane_pool: Pool, owner: asyncpg.Connection
) -> None:
    session = f"S-audit-{uuid.uuid4()}"
    audit = AuditLog(toolplane_pool, flush_seconds=60, batch_size=500)
    audit.start()
    for n in range(7):
        audit.record(
            entry(session, n, status=CallStatus.DENIED, error_code=ErrorCode.POLICY_DENIED,
                  decision=Decision.DENY, resource="learner:L-2041-1", metadata={"rule": 4})
        )  # fmt: skip
    await asyncio.sleep(0.1)
    count = "SELECT count(*) FROM toolplane.audit_logs WHERE session_id = $1"
    assert await owner.fetchval(count, session) == 0  # still gathering a batch
    await audit.close()
    rows = await owner.fetch(
        "SELECT * FROM toolplane.audit_logs WHERE session_id = $1 ORDER BY id", session
    )
    assert [row["request_id"] for row in rows] == [f"REQ-audit-{n}" for n in range(7)]
    row = rows[0]
    assert (row["decision"], row["status"], row["error_code"], row["resource"]) == (
        "deny",
        "denied",
        "POLICY_DENIED",
        "learner:L-2041-1",
    )
    assert row["metadata"] == {"rule": 4}


async def test_a_full_batch_is_written_without_waiting(
    toolplane_pool: Pool, owner: asyncpg.Connection
) -> None:
    session = f"S-audit-{uuid.uuid4()}"
    audit = AuditLog(toolplane_pool, flush_seconds=60, batch_size=5)
    audit.start()
    for n in range(5):
        audit.record(entry(session, n))
    count = "SELECT count(*) FROM toolplane.audit_logs WHERE session_id = $1"
    async with asyncio.timeout(10):
        while await owner.fetchval(count, session) < 5:  # noqa: ASYNC110 - polling another process's writes
            await asyncio.sleep(0.02)
    await audit.close()


async def test_a_failing_store_is_logged_and_counted(
    context_dsn: str, metric_reader: InMemoryMetricReader, caplog: pytest.LogCaptureFixture
) -> None:
    # The context role has no privilege on the toolplane schema: every insert fails for real.
    pool = await create_pool(context_dsn, max_size=1)
    try:
        audit = AuditLog(pool, flush_seconds=0.01, batch_size=10)
        before = counter(metric_reader, "nemo.toolplane.audit.rows_failed")
        for n in range(3):
            audit.record(entry("S-failing-store", n))
        await audit.close()
    finally:
        await pool.close()
    assert audit.failed_rows == 3
    assert counter(metric_reader, "nemo.toolplane.audit.rows_failed") - before == 3
    logged = [
        r.__dict__["audit"] for r in caplog.records if r.getMessage() == "audit row not stored"
    ]
    assert [row["request_id"] for row in logged] == ["REQ-audit-0", "REQ-audit-1", "REQ-audit-2"]
    assert logged[0]["session_id"] == "S-failing-store"


@pytest.fixture
async def private_database(make_empty_database: Callable[[], Any]) -> str:
    """A migrated, seeded database of this test's own (its privileges can be changed)."""
    dsn = await make_empty_database()
    await migrate(dsn)
    await seed(dsn)
    return str(dsn)


async def test_calls_succeed_while_the_audit_store_fails(
    private_database: str, start_toolplane: StartToolPlane, caplog: pytest.LogCaptureFixture
) -> None:
    conn = await connect(private_database)
    try:
        token = (await issue_token(conn, "research-agent")).token
        await conn.execute("REVOKE INSERT ON toolplane.audit_logs FROM nemo_toolplane")
    finally:
        await conn.close()
    plane = await start_toolplane(database_url=dsn_with(private_database, user="nemo_toolplane"))
    async with plane.mcp(token) as client:
        result = await client.call_tool("docs.search_docs", {"query": "audit"})
    assert not result.is_error
    await plane.plane.audit.flush()
    assert plane.plane.audit.failed_rows == 1
    assert any(r.getMessage() == "audit row not stored" for r in caplog.records)
    await plane.stop()


# One call of each outcome the log records: success, invalid input, unknown tool, no grant.
_MIXED_CALLS = [
    modern_call("docs.search_docs", {"query": "audit"}),
    modern_call("docs.search_docs", {"query": "audit", "limit": 99}),
    modern_call("docs.nonexistent", {}),
    modern_call("application.list", {}),
] * 5


async def _call_all(url: str, token: str, session: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        statuses = [
            (
                await post(
                    url, call, token=token, headers={"X-Nemo12-Session-Id": session}, client=http
                )
            ).status_code
            for call in _MIXED_CALLS
        ]
    assert set(statuses) <= {200, 400}


async def test_n_calls_then_sigterm_leave_exactly_n_rows(
    toolplane_dsn: str, tokens: AgentTokens, owner: asyncpg.Connection, tmp_path: Any
) -> None:
    log = tmp_path / "toolplane.log"
    # Rows would otherwise wait a minute: only the shutdown can have written them (the calls
    # stop waiting for their rows after the first wait times out).
    async with toolplane_process(
        toolplane_dsn, log, audit_flush_seconds="60", audit_answer_wait_seconds="0.2"
    ) as (process, url):
        session = f"S-sigterm-{uuid.uuid4()}"
        await _call_all(url, tokens.research, session)
        calls = _MIXED_CALLS
        count = "SELECT count(*) FROM toolplane.audit_logs WHERE session_id = $1"
        assert await owner.fetchval(count, session) == 0
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            assert await process.wait() == 0, log.read_text()
        assert await owner.fetchval(count, session) == len(calls)
        by_status = await owner.fetch(
            "SELECT status, count(*) FROM toolplane.audit_logs WHERE session_id = $1 "
            "GROUP BY status ORDER BY status",
            session,
        )
        assert {row["status"]: row["count"] for row in by_status} == {
            "denied": 5,
            "invalid": 5,
            "not_found": 5,
            "success": 5,
        }


async def test_n_answered_calls_then_sigkill_leave_exactly_n_rows(
    toolplane_dsn: str, tokens: AgentTokens, owner: asyncpg.Connection, tmp_path: Any
) -> None:
    log = tmp_path / "toolplane.log"
    # Rows wait a little for company, so a call that answered before its row was stored would
    # leave the row behind in memory, and SIGKILL would lose it.
    async with toolplane_process(
        toolplane_dsn, log, audit_flush_seconds="0.5", audit_answer_wait_seconds="30"
    ) as (process, url):
        session = f"S-sigkill-{uuid.uuid4()}"
        await _call_all(url, tokens.research, session)
        process.kill()
        await process.wait()
    count = "SELECT count(*) FROM toolplane.audit_logs WHERE session_id = $1"
    assert await owner.fetchval(count, session) == len(_MIXED_CALLS)


async def test_a_call_waits_for_its_row_only_while_the_store_keeps_up(
    toolplane_pool: Pool, owner_dsn: str
) -> None:
    session = f"S-settle-{uuid.uuid4()}"
    audit = AuditLog(
        toolplane_pool,
        flush_seconds=0.1,
        batch_size=500,
        statement_timeout=60,
        answer_wait_seconds=3,
    )
    audit.start()
    stored = audit.record(entry(session, 0))
    await audit.settle(stored)
    assert stored is not None
    assert stored.done()
    assert stored.result() is True
    # Another transaction holds the table: the next write waits until it ends.
    locker = await connect(owner_dsn)
    try:
        hold = locker.transaction()
        await hold.start()
        await locker.execute("LOCK TABLE toolplane.audit_logs IN ACCESS EXCLUSIVE MODE")
        slow = audit.record(entry(session, 1))
        await audit.settle(slow)  # gives up after the bound
        assert slow is not None
        assert not slow.done()
        later = audit.record(entry(session, 2))
        await audit.settle(later)  # does not wait at all while the store lags
        assert later is not None
        assert not later.done()
        await hold.rollback()
    finally:
        await locker.close()
    async with asyncio.timeout(30):
        assert list(await asyncio.gather(slow, later)) == [True, True]
    # A write succeeded again: calls wait for their rows again.
    again = audit.record(entry(session, 3))
    await audit.settle(again)
    assert again is not None
    assert again.done()
    await audit.close()


async def test_rows_hold_identifiers_never_input_or_output(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    canary = "zebra canary 4711"
    headers = {"X-Request-Id": "REQ-audit-no-input"}
    async with toolplane.mcp(tokens.learning_parent, headers) as client:
        result = await client.call_tool("docs.search_docs", {"query": canary})
        profile = await client.call_tool("learner.get_profile", {"learner_id": "L-2041-1"})
    assert not result.is_error
    assert not profile.is_error
    rows = await audit_rows(request_id="REQ-audit-no-input")
    assert len(rows) == 2
    # What the agent saw is referenced, not copied: the snapshot key is the one place the
    # output's pseudonym appears (the key names it, by the snapshot layout).
    refs = [row["input_ref"] for row in rows]
    assert refs[0] is None
    assert refs[1].startswith("ai-context/")
    stored = json.dumps(
        [{**dict(row), "input_ref": None} for row in rows], default=str, ensure_ascii=False
    )
    assert "zebra" not in stored
    assert profile.structured_content["learner_ref"] not in stored
    assert "learner:L-2041-1" in stored


class _Nothing(BaseModel):
    model_config = ConfigDict(extra="forbid")


async def _nothing(call: ToolCall, args: _Nothing) -> _Nothing:
    return _Nothing()


async def test_a_hung_audit_database_loses_no_row_silently_and_does_not_hold_shutdown(
    toolplane_dsn: str, owner_dsn: str, caplog: pytest.LogCaptureFixture, tmp_path: Any
) -> None:
    calls, buffer, grace = 10_000, 1_000, 1.0
    pool = await create_pool(toolplane_dsn, max_size=2)
    audit = AuditLog(
        pool,
        flush_seconds=0.01,
        batch_size=100,
        max_pending=buffer,
        statement_timeout=0.3,
        grace_seconds=grace,
    )
    audit.start()
    tool = ToolDefinition(
        name="test.nothing", version=1, description="test", risk=Risk.LOW, mode=Mode.READ,
        input_model=_Nothing, output_model=_Nothing, execute=_nothing, scope=Scope.DOCS_READ,
    )  # fmt: skip
    router = ToolRouter(
        registry=Registry([tool]),
        approvals=CallApprovals(pool, ttl_seconds=60),
        audit=audit,
        services=Services(context_service=None, pool=pool, docs=DocsLibrary(tmp_path, "https://x")),  # type: ignore[arg-type]
        environment="development",
        limiter=CallLimiter([], SharedBuckets(pool, timeout=1)),
    )
    rules = AgentRules(grants=(Grant("test.*", "*", "*", Mode.READ),), policies=())
    session = f"S-hung-{uuid.uuid4()}"
    # Another transaction holds the table: every insert waits, and would wait forever.
    locker = await connect(owner_dsn)
    hold = locker.transaction()
    await hold.start()
    await locker.execute("LOCK TABLE toolplane.audit_logs IN ACCESS EXCLUSIVE MODE")
    stopping = asyncio.Event()
    watcher = asyncio.create_task(audit.watch(stopping))
    try:
        with caplog.at_level(logging.ERROR, logger="nemo_toolplane.audit.log"):
            for n in range(calls):
                principal = Principal("research-agent", session, None, f"REQ-hung-{n}")
                outcome = await router.call(principal, rules, "test.nothing", {}, transport="grpc")
                assert outcome.error is None  # the calls themselves are unaffected
                assert audit.pending <= buffer + 100
            stopping.set()
            await watcher
            # Shutdown ends within the grace period (a margin for a loaded machine), hung or not.
            async with asyncio.timeout(grace + 2.0):
                await audit.close()
    finally:
        await hold.rollback()
        await locker.close()
        await pool.close()
    assert audit.peak_pending <= buffer
    logged = {
        record.audit["request_id"]  # type: ignore[attr-defined]
        for record in caplog.records
        if getattr(record, "audit", {}).get("session_id") == session
    }
    owner = await connect(owner_dsn)
    try:
        stored = {
            row["request_id"]
            for row in await owner.fetch(
                "SELECT request_id FROM toolplane.audit_logs WHERE session_id = $1", session
            )
        }
    finally:
        await owner.close()
    # Every call is either stored or in the log, and counted there.
    assert stored | logged == {f"REQ-hung-{n}" for n in range(calls)}
    assert audit.dropped_rows > 0
    assert audit.dropped_rows + audit.failed_rows == len(logged)
