"""Tokens and rules cached until the database announces a change; never cached without the
announcements."""

from __future__ import annotations

import asyncpg
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from .conftest import AgentTokens, RunningToolPlane, StartToolPlane, access_change, eventually


def access_queries(spans: InMemorySpanExporter) -> int:
    return sum(
        "WITH identity AS" in str((span.attributes or {}).get("db.statement", ""))
        for span in spans.get_finished_spans()
    )


async def test_a_cached_token_is_not_looked_up_again_until_access_changes(
    start_toolplane: StartToolPlane,
    tokens: AgentTokens,
    owner: asyncpg.Connection,
    spans: InMemorySpanExporter,
) -> None:
    plane = await start_toolplane()
    await eventually(lambda: plane.plane.access.listening)
    async with plane.mcp(tokens.research) as client:
        await client.call_tool("docs.search_docs", {"query": "audit"})
        first = access_queries(spans)
        await client.call_tool("docs.search_docs", {"query": "audit"})
        await client.call_tool("docs.get_doc", {"path": "toolplane/audit"})
        assert access_queries(spans) == first
        async with access_change(plane):
            await owner.execute(
                # Rewrites nothing, yet it is a change of the table: the trigger notifies.
                "UPDATE toolplane.policies SET description = description "
                "WHERE name = 'deny-learner-writes'"
            )
        await client.call_tool("docs.search_docs", {"query": "audit"})
        assert access_queries(spans) == first + 1


async def test_a_new_deny_policy_applies_to_the_next_call(
    toolplane: RunningToolPlane, tokens: AgentTokens, owner: asyncpg.Connection
) -> None:
    async with toolplane.mcp(tokens.research) as client:
        assert not (await client.call_tool("docs.search_docs", {"query": "audit"})).is_error
        async with access_change(toolplane):
            await owner.execute(
                "INSERT INTO toolplane.policies (name, effect, agent_scope, tool_scope) "
                "VALUES ('deny-research-docs', 'deny', 'research-agent', 'docs.*')"
            )
        try:
            denied = await client.call_tool("docs.search_docs", {"query": "audit"})
        finally:
            async with access_change(toolplane):
                await owner.execute(
                    "DELETE FROM toolplane.policies WHERE name = 'deny-research-docs'"
                )
        allowed = await client.call_tool("docs.search_docs", {"query": "audit"})
    assert denied.structured_content["error"]["code"] == "POLICY_DENIED"
    assert not allowed.is_error


async def test_a_dropped_listener_reconnects_and_calls_keep_working(
    start_toolplane: StartToolPlane, tokens: AgentTokens, owner: asyncpg.Connection
) -> None:
    plane = await start_toolplane()
    access = plane.plane.access
    await eventually(lambda: access.listening)
    before = access.generation
    await owner.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE usename = 'nemo_toolplane' AND query LIKE 'LISTEN%'"
    )
    await eventually(lambda: access.generation > before and access.listening)
    async with plane.mcp(tokens.research) as client:
        assert not (await client.call_tool("docs.search_docs", {"query": "audit"})).is_error
