"""Learner tools: every agent view through the real context service, within the acting user's
reach only, pseudonymous, and never naming the learner's id."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import asyncpg
import pytest
from pydantic import SecretStr

from nemo_core.client import create_channel
from nemo_protos.context.v1 import context_service_pb2 as context_pb
from nemo_protos.context.v1 import context_service_pb2_grpc as context_grpc
from nemo_toolplane.tokens import issue_token, revoke_token
from nemo_toolplane.tools import build_registry
from nemo_toolplane.tools.views import ViewResult, view_result
from services.toolplane.tests.conftest import CONTEXT_AUDIT_TOKEN, AgentTokens, RunningToolPlane
from services.toolplane.tests.mcp_http import error_envelope

REGISTRY = build_registry()
BASE_FIELDS = frozenset(ViewResult.model_fields)
#: Every agent-view tool (latest version): its view and the slices its output keeps, from the
#: registry, so a new view tool is checked here the moment it is registered.
VIEWS = {
    tool.name: (tool.agent_view, sorted(set(tool.output_model.model_fields) - BASE_FIELDS))
    for tool in (REGISTRY.resolve(name) for name in sorted({t.name for t in REGISTRY.versions()}))
    if tool is not None and tool.agent_view is not None
}


async def test_every_learner_tool_returns_its_view(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    results = {}
    async with toolplane.mcp(tokens.learning_parent) as client:
        for tool in VIEWS:
            results[tool] = await client.call_tool(tool, {"learner_id": "L-2041-1"})
    refs = set()
    assert {"learner.get_profile", "nemo12.get_learner_learning_state"} <= set(VIEWS)
    for tool, (view, slices) in VIEWS.items():
        result = results[tool]
        assert not result.is_error, (tool, result.structured_content)
        content = result.structured_content
        assert content["view"] == view, tool
        assert slices, f"{tool} returns no slice of its view"
        for slice_name in slices:  # L-2041-1 has data for every slice
            assert content[slice_name], (tool, slice_name)
        refs.add(content["learner_ref"])
        text = json.dumps(content, ensure_ascii=False)
        assert "L-2041-1" not in text.replace("L-2041-10", ""), tool
    assert len(refs) == 1  # one stable pseudonym across views
    profile = results["learner.get_profile"].structured_content["profile"]
    assert profile["grade"] == 8
    assert 10 <= profile["age_years"] <= 16
    next_experience = results["learning.get_next_learning_experience"].structured_content
    assert next_experience["next_experience"]["reason"]


async def test_view_tools_keep_the_timestamp_keys_they_were_published_with(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    """The contract's fields became ``*_time``; the tools' v1 outputs keep their ``*_at`` keys."""
    async with toolplane.mcp(tokens.learning_parent) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool(
            "nemo12.get_learner_learning_state", {"learner_id": "L-2041-1"}
        )
    assert not result.is_error, result.structured_content
    content = result.structured_content
    progress = content["learning_progress"]
    for stamp in (
        content["built_at"],
        progress["last_activity_at"],
        progress["provenance"]["computed_at"],
    ):
        assert datetime.fromisoformat(stamp).tzinfo is not None
    text = json.dumps(content)
    assert not [name for name in ("build_time", "compute_time", "_activity_time") if name in text]
    schema = json.dumps(listed["nemo12.get_learner_learning_state"].output_schema)
    assert all(f'"{key}"' in schema for key in ("built_at", "last_activity_at", "computed_at"))
    assert "_time" not in schema


async def test_the_audit_row_of_a_learner_read_leads_to_exactly_what_the_agent_saw(
    toolplane: RunningToolPlane, tokens: AgentTokens, context_address: str, audit_rows: Any
) -> None:
    results = {}
    for tool in VIEWS:
        headers = {"X-Request-Id": f"REQ-seen-{tool}"}
        async with toolplane.mcp(tokens.learning_parent, headers) as client:
            results[tool] = await client.call_tool(tool, {"learner_id": "L-2041-3"})
    channel = create_channel(
        context_address, toolplane.settings, token=SecretStr(CONTEXT_AUDIT_TOKEN)
    )
    try:
        audit = context_grpc.ContextServiceStub(channel)
        refs = set()
        for tool, result in results.items():
            assert not result.is_error, result.structured_content
            [row] = await audit_rows(request_id=f"REQ-seen-{tool}")
            assert row["resource"] == "learner:L-2041-3"
            # The auditor needs nothing but the row: its input_ref, read back and verified.
            snapshot = await audit.GetSnapshot(
                context_pb.GetSnapshotRequest(input_ref=row["input_ref"]), timeout=10
            )
            definition = REGISTRY.resolve(tool)
            assert definition is not None
            seen = view_result(snapshot.bundle, definition.output_model)
            assert seen.model_dump(mode="json") == result.structured_content, tool
            refs.add(row["input_ref"])
        assert len(refs) == len(VIEWS)  # one snapshot per read
    finally:
        await channel.close()


@pytest.fixture
async def mentor_token(owner: asyncpg.Connection) -> AsyncIterator[str]:
    issued = await issue_token(owner, "learning-agent", user_id="U-2041-M1", label="tests")
    yield issued.token
    await revoke_token(owner, issued.token_id)


@pytest.mark.parametrize(
    ("learner_id", "allowed"), [("L-2041-1", True), ("L-2041-3", False), ("L-2041-10", False)]
)
async def test_a_mentor_reaches_only_assigned_learners(
    toolplane: RunningToolPlane, mentor_token: str, learner_id: str, allowed: bool
) -> None:
    async with toolplane.mcp(mentor_token) as client:
        result = await client.call_tool("learner.get_profile", {"learner_id": learner_id})
    if allowed:
        assert not result.is_error
    else:
        assert error_envelope(result)["error"]["code"] == "AUTHORIZATION_ERROR"


async def test_without_a_user_no_learner_is_within_reach(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    async with toolplane.mcp(tokens.learning_unbound) as client:
        result = await client.call_tool("learner.get_profile", {"learner_id": "L-2041-1"})
    assert error_envelope(result)["error"]["code"] == "AUTHORIZATION_ERROR"


async def test_knowledge_nodes_come_with_their_edges(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    async with toolplane.mcp(tokens.research) as client:
        node = await client.call_tool(
            "coral.get_knowledge_node", {"node_id": "math-09-quadratic-equations"}
        )
        missing = await client.call_tool("coral.get_knowledge_node", {"node_id": "math-99-none"})
    content = node.structured_content
    assert content["node"]["title"] == "Phương trình bậc hai"
    prerequisites = {e["from_node_id"] for e in content["edges"] if e["kind"] == "prerequisite"}
    assert "math-08-factorization" in prerequisites
    assert error_envelope(missing)["error"]["code"] == "RESOURCE_NOT_FOUND"
