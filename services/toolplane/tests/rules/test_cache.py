"""Tokens and rules cached until the database announces a change; never cached without the
announcements."""

from __future__ import annotations

import asyncio

import asyncpg
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from nemo_toolplane.rules.cache import MAX_AGE_SECONDS
from nemo_toolplane.tokens import hash_token, issue_token
from services.toolplane.tests.conftest import (
    AgentTokens,
    RunningToolPlane,
    StartToolPlane,
    eventually,
    rules_change,
)
from services.toolplane.tests.mcp_http import error_envelope


def rule_loads(spans: InMemorySpanExporter) -> int:
    return sum(
        "WITH identity AS" in str((span.attributes or {}).get("db.statement", ""))
        for span in spans.get_finished_spans()
    )


async def test_a_cached_token_is_not_looked_up_again_until_the_rules_change(
    start_toolplane: StartToolPlane,
    tokens: AgentTokens,
    owner: asyncpg.Connection,
    spans: InMemorySpanExporter,
) -> None:
    plane = await start_toolplane()
    await eventually(lambda: plane.plane.rules.listening)
    async with plane.mcp(tokens.research) as client:
        await client.call_tool("docs.search_docs", {"query": "audit"})
        first = rule_loads(spans)
        await client.call_tool("docs.search_docs", {"query": "audit"})
        await client.call_tool("docs.get_doc", {"path": "toolplane/audit"})
        assert rule_loads(spans) == first
        async with rules_change(plane):
            await owner.execute(
                # Rewrites nothing, yet it is a change of the table: the trigger notifies.
                "UPDATE toolplane.policies SET description = description "
                "WHERE name = 'deny-learner-writes'"
            )
        await client.call_tool("docs.search_docs", {"query": "audit"})
        assert rule_loads(spans) == first + 1


async def test_a_new_deny_policy_applies_to_the_next_call(
    toolplane: RunningToolPlane, tokens: AgentTokens, owner: asyncpg.Connection
) -> None:
    async with toolplane.mcp(tokens.research) as client:
        assert not (await client.call_tool("docs.search_docs", {"query": "audit"})).is_error
        async with rules_change(toolplane):
            await owner.execute(
                "INSERT INTO toolplane.policies (name, effect, agent_scope, tool_scope) "
                "VALUES ('deny-research-docs', 'deny', 'research-agent', 'docs.*')"
            )
        try:
            denied = await client.call_tool("docs.search_docs", {"query": "audit"})
        finally:
            async with rules_change(toolplane):
                await owner.execute(
                    "DELETE FROM toolplane.policies WHERE name = 'deny-research-docs'"
                )
        allowed = await client.call_tool("docs.search_docs", {"query": "audit"})
    assert error_envelope(denied)["error"]["code"] == "POLICY_DENIED"
    assert not allowed.is_error


async def test_a_dropped_listener_reconnects_and_calls_keep_working(
    start_toolplane: StartToolPlane, tokens: AgentTokens, owner: asyncpg.Connection
) -> None:
    plane = await start_toolplane()
    cache = plane.plane.rules
    await eventually(lambda: cache.listening)
    before = cache.generation
    await owner.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE usename = 'nemo_toolplane' AND query LIKE 'LISTEN%'"
    )
    await eventually(lambda: cache.generation > before and cache.listening)
    async with plane.mcp(tokens.research) as client:
        assert not (await client.call_tool("docs.search_docs", {"query": "audit"})).is_error


async def test_a_cached_token_stops_working_when_it_expires(
    start_toolplane: StartToolPlane, owner: asyncpg.Connection
) -> None:
    plane = await start_toolplane()
    cache = plane.plane.rules
    await eventually(lambda: cache.listening)
    issued = await issue_token(owner, "research-agent", label="tests-expiry")
    try:
        async with rules_change(plane):
            await owner.execute(
                "UPDATE toolplane.agent_tokens SET expires_at = now() + interval '1 second' "
                "WHERE id = $1",
                issued.token_id,
            )
        # Load until the entry is kept (a late notification of the setup may drop the first).
        key = hash_token(issued.token)
        async with asyncio.timeout(10):
            while key not in cache._entries:
                assert await cache.load(issued.token) is not None
        # No change is announced when a token merely runs out: the cache must notice itself.
        await owner.execute("SELECT pg_sleep(1.2)")
        assert await cache.load(issued.token) is None
    finally:
        await owner.execute("DELETE FROM toolplane.agent_tokens WHERE id = $1", issued.token_id)


async def test_cached_entries_are_reloaded_after_their_maximum_age(
    start_toolplane: StartToolPlane, tokens: AgentTokens, spans: InMemorySpanExporter
) -> None:
    plane = await start_toolplane()
    cache = plane.plane.rules
    await eventually(lambda: cache.listening)
    await cache.load(tokens.research)
    before = rule_loads(spans)
    await cache.load(tokens.research)
    assert rule_loads(spans) == before
    # Age the entry as if a notification had been lost long ago.
    key = hash_token(tokens.research)
    entry, cached_at = cache._entries[key]
    cache._entries[key] = (entry, cached_at - MAX_AGE_SECONDS)
    await cache.load(tokens.research)
    assert rule_loads(spans) == before + 1
