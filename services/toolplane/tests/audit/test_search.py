"""The audit search finds exactly the rows its filters name, newest first, page after page; its
time range included, whose id bounds rest on rows being stored within an hour of their call's
arrival (never before it): the rows here arrived in the last hour, in any order."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_core.db import Pool, connect, create_pool, dsn_with
from nemo_ops.migrate import migrate
from nemo_toolplane.audit.query import MAX_ROW_DELAY, AuditFilter, StoredAuditEntry, list_entries

#: The most seconds before its storage a generated call arrived: within the bound.
_AGO = int(MAX_ROW_DELAY.total_seconds()) - 30
_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
async def log_dsn(make_empty_database: Callable[[], Any]) -> str:
    """A database of this module's own, whose audit log holds only the rows each example
    stores: another test's rows would decide the time bounds as much as the example's."""
    dsn = await make_empty_database()
    await migrate(dsn)
    return str(dsn)


@pytest.fixture(scope="module")
async def log_owner(log_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await connect(log_dsn)
    yield conn
    await conn.close()


@pytest.fixture(scope="module")
async def pool(log_dsn: str) -> AsyncIterator[Pool]:
    password = os.environ.get("NEMO_DB_TOOLPLANE_PASSWORD") or None
    role_dsn = dsn_with(log_dsn, user="nemo_toolplane", password=password)
    pool = await create_pool(role_dsn, min_size=1, max_size=2, reads_learner_rows=False)
    yield pool
    await pool.close()


#: Calls, in the order they are stored: how many seconds before now each arrived, its decision
#: and user.
_CALLS = st.lists(
    st.tuples(
        st.integers(0, _AGO),
        st.sampled_from(["allow", "deny", "require_approval"]),
        st.sampled_from(["U-range-1", "U-range-2", "U-range-3"]),
    ),
    min_size=1,
    max_size=60,
)


async def _store(
    owner: asyncpg.Connection, agent: str, calls: list[tuple[int, str, str]], now: datetime
) -> None:
    await owner.executemany(
        'INSERT INTO toolplane.audit_logs (request_id, "timestamp", agent_id, user_id, tool_id,'
        " decision, status, environment) VALUES ($1, $2, $3, $4, 'docs.search_docs:v1', $5,"
        " 'success', 'development')",
        [
            (f"REQ-{agent}-{n}", now - timedelta(seconds=ago), agent, user, decision)
            for n, (ago, decision, user) in enumerate(calls)
        ],
    )


async def _all_pages(pool: Pool, search: AuditFilter, page: int) -> list[StoredAuditEntry]:
    found: list[StoredAuditEntry] = []
    before = None
    while True:
        entries, before = await list_entries(pool, search, before_id=before, limit=page)
        found += entries
        if before is None:
            return found


@_SETTINGS
@given(
    calls=_CALLS,
    window=st.tuples(st.integers(-60, _AGO + 60), st.integers(0, _AGO)),
    decision=st.sampled_from([None, "allow", "deny", "require_approval"]),
    user=st.sampled_from([None, "U-range-1", "U-range-2"]),
    bounds=st.sampled_from(["both", "since", "until"]),
    page=st.integers(1, 7),
)
async def test_a_search_finds_exactly_its_rows_newest_first(
    pool: Pool,
    log_owner: asyncpg.Connection,
    calls: list[tuple[int, str, str]],
    window: tuple[int, int],
    decision: str | None,
    user: str | None,
    bounds: str,
    page: int,
) -> None:
    agent = f"tests-range-{secrets.token_hex(4)}"
    owner = log_owner
    await owner.execute("TRUNCATE toolplane.audit_logs")
    now = await owner.fetchval("SELECT now()")
    await _store(owner, agent, calls, now)
    start = now - timedelta(seconds=window[0])
    since = start if bounds != "until" else None
    until = start + timedelta(seconds=window[1]) if bounds != "since" else None
    search = AuditFilter(agent_id=agent, since=since, until=until, decision=decision, user_id=user)
    found = await _all_pages(pool, search, page)
    rows = await owner.fetch(
        'SELECT id, "timestamp", decision, user_id FROM toolplane.audit_logs WHERE agent_id = $1',
        agent,
    )
    expected = sorted(
        (
            row["id"]
            for row in rows
            if (since is None or row["timestamp"] >= since)
            and (until is None or row["timestamp"] < until)
            and (decision is None or row["decision"] == decision)
            and (user is None or row["user_id"] == user)
        ),
        reverse=True,
    )
    assert [entry.audit_id for entry in found] == expected
