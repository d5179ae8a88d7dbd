"""Application tools on the tool plane's own registry of the platform's systems."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb
from services.toolplane.tests.conftest import (
    AgentTokens,
    OperatorTokens,
    RunningToolPlane,
    as_operator,
)
from services.toolplane.tests.mcp_http import error_envelope


async def test_engineering_reads_the_application_registry(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    async with toolplane.mcp(tokens.engineering) as client:
        everything = await client.call_tool("application.list", {})
        knowledge = await client.call_tool("application.list", {"domain": "knowledge"})
        api = await client.call_tool("application.get", {"application_id": "nemo12-api"})
        repository = await client.call_tool(
            "application.get_repository", {"application_id": "nemo12-tool-plane"}
        )
        environment = await client.call_tool(
            "application.get_environment", {"application_id": "nemo12-foundry"}
        )
        missing = await client.call_tool("application.get", {"application_id": "nemo12-nothing"})
        invalid = await client.call_tool("application.get", {"application_id": "Not An Id"})
    assert [a["application_id"] for a in everything.structured_content["applications"]] == [
        "nemo12-api",
        "nemo12-coral",
        "nemo12-foundry",
        "nemo12-learn",
        "nemo12-tool-plane",
        "nemo12-web",
    ]
    assert [a["application_id"] for a in knowledge.structured_content["applications"]] == [
        "nemo12-coral"
    ]
    assert api.structured_content["owner"] == "team-platform"
    assert api.structured_content["metadata"]["url"] == "https://api.nemo12.com"
    assert repository.structured_content == {
        "application_id": "nemo12-tool-plane",
        "repository": "nemo12/ai-plane",
        "repository_path": "services/toolplane",
        "architecture_reference": "docs/architecture/tool-plane.md",
    }
    assert environment.structured_content["deployment_target"] == "cloudflare-workers"
    assert error_envelope(missing)["error"]["code"] == "RESOURCE_NOT_FOUND"
    assert error_envelope(invalid)["error"]["code"] == "VALIDATION_ERROR"


SET_WEB_STATUS = "UPDATE toolplane.applications SET status = $1 WHERE id = 'nemo12-web'"


@pytest.fixture
async def retired_web(owner: asyncpg.Connection) -> AsyncIterator[None]:
    await owner.execute(
        "UPDATE toolplane.applications SET status = 'retired' WHERE id = 'nemo12-web'"
    )
    yield
    await owner.execute(
        "UPDATE toolplane.applications SET status = 'active' WHERE id = 'nemo12-web'"
    )
    await owner.execute(
        "DELETE FROM toolplane.approvals WHERE tool_id = 'application.set_status:v1'"
    )


async def test_an_approved_change_of_a_retired_application_is_a_conflict(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    audit_rows: Any,
    owner: asyncpg.Connection,
    retired_web: None,
    operators: OperatorTokens,
) -> None:
    args = {"application_id": "nemo12-web", "status": "active", "reason": "bring it back"}
    async with toolplane.mcp(tokens.engineering, {"X-Request-Id": "REQ-retired"}) as client:
        waiting = await client.call_tool("application.set_status", args)
        approval_id = error_envelope(waiting)["error"]["details"]["approval_id"]
        await toolplane.admin_stub(person=None).DecideApproval(
            admin_pb.DecideApprovalRequest(
                approval_id=approval_id, decision=admin_pb.APPROVAL_DECISION_APPROVE
            ),
            metadata=as_operator(operators.alice),
            timeout=10,
        )
        conflict = await client.call_tool("application.set_status", args)
    assert error_envelope(conflict)["error"]["code"] == "CONFLICT"
    # Nothing changed, so the approval was not used up.
    approval = await owner.fetchval(
        "SELECT status FROM toolplane.approvals WHERE id = $1", approval_id
    )
    assert approval == "approved"
    rows = await audit_rows(request_id="REQ-retired")
    assert [(r["status"], r["error_code"]) for r in rows] == [
        ("approval_required", "APPROVAL_REQUIRED"),
        ("error", "CONFLICT"),
    ]
