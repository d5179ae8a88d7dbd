"""The seed's three end-to-end tests, through the MCP edge with the official MCP client, against
real PostgreSQL and a real context service."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from .conftest import AgentTokens, RunningToolPlane, counter, rules_change
from .mcp_http import error_envelope, result_text


def _envelope_code(result: Any) -> str:
    assert result.is_error, result
    return str(error_envelope(result)["error"]["code"])


async def test_a_parent_reads_their_childs_learning_state(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    async with toolplane.mcp(tokens.learning_parent, {"X-Request-Id": "REQ-e2e-state"}) as client:
        result = await client.call_tool(
            "nemo12.get_learner_learning_state", {"learner_id": "L-2041-1"}
        )
    assert not result.is_error, result.structured_content
    state = result.structured_content
    assert state["view"] == "learning_state"
    assert state["learner_ref"].startswith("nemo_")
    assert state["profile"]["grade"] == 8
    text = json.dumps(state, ensure_ascii=False)
    assert "L-2041-1" not in text.replace("L-2041-10", "")
    assert "birth" not in text
    assert "Nguyễn" not in text
    assert json.loads(result_text(result)) == state
    [row] = await audit_rows(request_id="REQ-e2e-state")
    assert (row["decision"], row["status"], row["resource"]) == (
        "allow",
        "success",
        "learner:L-2041-1",
    )
    assert (row["agent_id"], row["user_id"], row["tool_id"]) == (
        "learning-agent",
        "U-2041-P1",
        "nemo12.get_learner_learning_state:v1",
    )
    assert row["error_code"] is None


@pytest.mark.parametrize(
    "learner_id", ["L-2041-2", "L-2041-404"], ids=["other family", "nonexistent"]
)
async def test_a_learner_out_of_reach_or_missing_is_the_same_authorization_error(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any, learner_id: str
) -> None:
    request_id = f"REQ-e2e-reach-{learner_id}"
    async with toolplane.mcp(tokens.learning_parent, {"X-Request-Id": request_id}) as client:
        result = await client.call_tool(
            "nemo12.get_learner_learning_state", {"learner_id": learner_id}
        )
    assert _envelope_code(result) == "AUTHORIZATION_ERROR"
    assert (
        error_envelope(result)["error"]["message"] == "the learner is not within this call's reach"
    )
    [row] = await audit_rows(request_id=request_id)
    assert (row["decision"], row["status"], row["error_code"], row["resource"]) == (
        "deny",
        "denied",
        "AUTHORIZATION_ERROR",
        f"learner:{learner_id}",
    )
    # The same rule refused both: not even the operator's record tells them apart.
    assert row["metadata"]["rule"] == "access:no_relation"


async def test_quadratic_equations_finds_structured_knowledge_nodes(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    async with toolplane.mcp(tokens.research) as client:
        result = await client.call_tool("coral.search_knowledge", {"query": "quadratic equations"})
    assert not result.is_error, result.structured_content
    nodes = result.structured_content["nodes"]
    assert nodes[0]["node_id"] == "math-09-quadratic-equations"
    assert nodes[0]["title"] == "Phương trình bậc hai"
    assert (nodes[0]["subject"], nodes[0]["grade"], nodes[0]["strand"]) == ("math", 9, "algebra")
    assert "quadratic equations" in nodes[0]["aliases"]


UPDATE = "learner.update_profile:v1"


@pytest.fixture
async def learner_write_grant(
    owner: asyncpg.Connection, toolplane: RunningToolPlane
) -> AsyncIterator[None]:
    """The write grant the third test adds: the policy, not a missing grant, must stop the call."""
    async with rules_change(toolplane):
        grant_id = await owner.fetchval(
            "INSERT INTO toolplane.grants (agent_id, tool_pattern, resource_scope, permission) "
            "VALUES ('learning-agent', 'learner.update_profile', 'user', 'write') RETURNING id"
        )
    yield
    async with rules_change(toolplane):
        await owner.execute("DELETE FROM toolplane.grants WHERE id = $1", grant_id)


async def test_update_profile_is_denied_by_policy_and_never_executed(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    audit_rows: Any,
    metric_reader: InMemoryMetricReader,
    owner: asyncpg.Connection,
    learner_write_grant: None,
) -> None:
    executions = "nemo.toolplane.tool.executions"
    updates_before = counter(metric_reader, executions, **{"nemo.tool.id": UPDATE})
    reads_before = counter(metric_reader, executions, **{"nemo.tool.id": "learner.get_profile:v1"})
    grade_before = await owner.fetchval("SELECT grade FROM learning.learners WHERE id = 'L-2041-1'")
    headers = {"X-Request-Id": "REQ-e2e-update"}
    async with toolplane.mcp(tokens.learning_parent, headers) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool(
            "learner.update_profile", {"learner_id": "L-2041-1", "grade": 9}
        )
        control = await client.call_tool("learner.get_profile", {"learner_id": "L-2041-1"})
    assert "learner.update_profile" in listed  # the write grant lets the agent see it
    assert _envelope_code(result) == "POLICY_DENIED"
    assert error_envelope(result)["error"]["details"] == {
        "rule": 4,
        "policy": "deny-learner-writes",
    }
    assert not control.is_error
    assert counter(metric_reader, executions, **{"nemo.tool.id": UPDATE}) == updates_before
    reads = counter(metric_reader, executions, **{"nemo.tool.id": "learner.get_profile:v1"})
    assert reads == reads_before + 1
    assert (
        await owner.fetchval("SELECT grade FROM learning.learners WHERE id = 'L-2041-1'")
        == grade_before
    )
    rows = {row["tool_id"]: row for row in await audit_rows(request_id="REQ-e2e-update")}
    assert set(rows) == {"learner.update_profile:v1", "learner.get_profile:v1"}
    row = rows["learner.update_profile:v1"]
    assert (row["decision"], row["status"], row["error_code"]) == (
        "deny",
        "denied",
        "POLICY_DENIED",
    )
    assert row["metadata"]["policy"] == "deny-learner-writes@v1"
