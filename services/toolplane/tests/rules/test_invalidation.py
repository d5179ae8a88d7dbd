"""Rule changes on every replica: a revoked token, a removed grant and a new deny policy are
refused by both of two tool planes on their next call once the change is announced, and a
replica whose listening connection was killed re-reads everything, so a change made while it
could not listen is never served stale (the delay itself is measured by `make bench`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from nemo_toolplane.tokens import issue_token
from services.toolplane.tests.conftest import (
    RunningToolPlane,
    StartToolPlane,
    eventually,
    rules_change,
)
from services.toolplane.tests.mcp_http import modern_call, outcome

SEARCH = modern_call("docs.search_docs", {"query": "audit"})
LIST = modern_call("application.list", {})


@pytest.fixture
async def token(owner: asyncpg.Connection) -> AsyncIterator[tuple[str, str]]:
    """(token, token id) of a research-agent token of this test's own."""
    issued = await issue_token(owner, "research-agent", label="tests-invalidation")
    yield issued.token, issued.token_id
    await owner.execute("DELETE FROM toolplane.agent_tokens WHERE id = $1", issued.token_id)


async def _listeners(owner: asyncpg.Connection) -> list[int]:
    """Backend pids of the tool plane connections listening on this database."""
    rows = await owner.fetch(
        "SELECT pid FROM pg_stat_activity WHERE usename = 'nemo_toolplane' "
        "AND datname = current_database() AND query LIKE 'LISTEN%'"
    )
    return [row["pid"] for row in rows]


async def _on_both(planes: list[RunningToolPlane], body: object, token: str) -> list[str]:
    async with httpx.AsyncClient(timeout=30) as http:
        return [await outcome(http, plane.mcp_url, body, token) for plane in planes]


async def test_changes_reach_both_replicas_on_their_next_call(
    start_toolplane: StartToolPlane, owner: asyncpg.Connection, token: tuple[str, str]
) -> None:
    planes = [await start_toolplane(), await start_toolplane()]
    await eventually(lambda: all(plane.plane.rules.listening for plane in planes))
    secret, token_id = token
    async with rules_change(*planes):
        grant = await owner.fetchval(
            "INSERT INTO toolplane.grants (agent_id, tool_pattern, resource_scope, permission) "
            "VALUES ('research-agent', 'application.list', '*', 'read') RETURNING id"
        )
    try:
        # Both cache the token and its rules...
        assert await _on_both(planes, LIST, secret) == ["ok", "ok"]
        assert await _on_both(planes, LIST, secret) == ["ok", "ok"]
        # ...and drop them when the grant goes,
        async with rules_change(*planes):
            await owner.execute("DELETE FROM toolplane.grants WHERE id = $1", grant)
        # (a tool the agent has no grant for is one it cannot see: an unknown tool, HTTP 400)
        assert await _on_both(planes, LIST, secret) == ["400", "400"]
        assert await _on_both(planes, SEARCH, secret) == ["ok", "ok"]
        # ...when a deny policy comes,
        async with rules_change(*planes):
            await owner.execute(
                "INSERT INTO toolplane.policies (name, effect, agent_scope, tool_scope) "
                "VALUES ('deny-invalidation-docs', 'deny', 'research-agent', 'docs.*')"
            )
        assert await _on_both(planes, SEARCH, secret) == ["POLICY_DENIED"] * 2
    finally:
        async with rules_change(*planes):
            await owner.execute(
                "DELETE FROM toolplane.policies WHERE name = 'deny-invalidation-docs'"
            )
            await owner.execute("DELETE FROM toolplane.grants WHERE id = $1", grant)
    assert await _on_both(planes, SEARCH, secret) == ["ok", "ok"]
    # ...and when the token is revoked.
    async with rules_change(*planes):
        await owner.execute(
            "UPDATE toolplane.agent_tokens SET revoked_at = now() WHERE id = $1", token_id
        )
    assert await _on_both(planes, SEARCH, secret) == ["401", "401"]


async def test_a_change_made_while_the_listener_was_killed_is_seen(
    start_toolplane: StartToolPlane, owner: asyncpg.Connection, token: tuple[str, str]
) -> None:
    others = set(await _listeners(owner))
    plane = await start_toolplane()
    cache = plane.plane.rules
    await eventually(lambda: cache.listening)
    (listener,) = set(await _listeners(owner)) - others
    secret, token_id = token
    assert await _on_both([plane], SEARCH, secret) == ["ok"]
    assert await _on_both([plane], SEARCH, secret) == ["ok"]  # served from the cache
    # The listener cannot come back until the role may log in again; the pool's open
    # connections keep serving.
    await owner.execute("ALTER ROLE nemo_toolplane NOLOGIN")
    try:
        assert await owner.fetchval("SELECT pg_terminate_backend($1)", listener)
        await eventually(lambda: not cache.listening)
        # Nobody hears this change's notification.
        await owner.execute(
            "UPDATE toolplane.agent_tokens SET revoked_at = now() WHERE id = $1", token_id
        )
        assert await _on_both([plane], SEARCH, secret) == ["401"]
    finally:
        await owner.execute("ALTER ROLE nemo_toolplane LOGIN")
    await eventually(lambda: cache.listening)
    assert await _on_both([plane], SEARCH, secret) == ["401"]
