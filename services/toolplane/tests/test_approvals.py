"""Approvals end to end on ``application.set_status`` (HIGH, write): required, approved, runs
once, then needs approval again; anything not bound to the approved call never runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import grpc
import pytest

from nemo.toolplane.v1 import approval_pb2
from nemo.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb
from nemo_core.errors import error_details
from nemo_ops.cli import main as nemo
from nemo_toolplane.approvals import arguments_digest
from nemo_toolplane.tokens import issue_token, revoke_token

from .conftest import AgentTokens, RunningToolPlane, access_change

APP = "nemo12-foundry"
ARGS = {"application_id": APP, "status": "maintenance", "reason": "database upgrade"}


@pytest.fixture
async def foundry(owner: asyncpg.Connection) -> AsyncIterator[None]:
    """Leaves the application and the approvals of this test as they were."""
    yield
    await owner.execute("UPDATE toolplane.applications SET status = 'active' WHERE id = $1", APP)
    await owner.execute(
        "DELETE FROM toolplane.approvals WHERE tool_id = 'application.set_status:v1'"
    )


async def _status(owner: asyncpg.Connection) -> str:
    return str(await owner.fetchval("SELECT status FROM toolplane.applications WHERE id = $1", APP))


async def _call(
    toolplane: RunningToolPlane, token: str, arguments: dict[str, Any], **headers: str
) -> Any:
    async with toolplane.mcp(token, headers) as client:
        return await client.call_tool("application.set_status", arguments)


def _approval_id(result: Any) -> str:
    assert result.is_error, result.structured_content
    error = result.structured_content["error"]
    assert error["code"] == "APPROVAL_REQUIRED"
    assert error["details"]["policy"] == "approve-high-risk-writes@v1"
    return str(error["details"]["approval_id"])


async def _decide(toolplane: RunningToolPlane, approval_id: str, *, approve: bool) -> Any:
    decision = admin_pb.APPROVAL_DECISION_APPROVE if approve else admin_pb.APPROVAL_DECISION_REJECT
    response = await toolplane.admin_stub().DecideApproval(
        admin_pb.DecideApprovalRequest(
            approval_id=approval_id, decision=decision, operator="alice", note="window 02:00"
        ),
        timeout=10,
    )
    return response.approval


async def test_approval_round_trip(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    owner: asyncpg.Connection,
    audit_rows: Any,
    foundry: None,
) -> None:
    first = _approval_id(
        await _call(toolplane, tokens.engineering, ARGS, **{"X-Request-Id": "REQ-appr-1"})
    )
    assert await _status(owner) == "active"
    # Asking again while it waits returns the same request instead of a copy.
    assert _approval_id(await _call(toolplane, tokens.engineering, ARGS)) == first

    row = await owner.fetchrow("SELECT * FROM toolplane.approvals WHERE id = $1", first)
    assert row is not None
    assert (row["agent_id"], row["user_id"], row["tool_id"], row["status"]) == (
        "engineering-agent",
        "U-S1",
        "application.set_status:v1",
        "pending",
    )
    assert row["arguments_digest"] == arguments_digest(ARGS)
    assert (row["policy_name"], row["policy_version"]) == (
        "approve-high-risk-writes",
        "approve-high-risk-writes@v1",
    )

    approved = await _decide(toolplane, first, approve=True)
    assert approved.status == approval_pb2.APPROVAL_STATUS_APPROVED
    assert approved.decided_by == "alice"

    # Changed arguments, another user or another agent: not what was approved.
    changed = {**ARGS, "reason": "something else"}
    assert _approval_id(await _call(toolplane, tokens.engineering, changed)) != first
    unbound = await issue_token(owner, "engineering-agent", label="tests")
    other_user = await _call(toolplane, unbound.token, ARGS, **{"X-Nemo12-User-Id": "U-A1"})
    assert _approval_id(other_user) != first
    async with access_change(toolplane):
        grant_id = await owner.fetchval(
            "INSERT INTO toolplane.grants (agent_id, tool_pattern, resource_scope, permission) "
            "VALUES ('research-agent', 'application.set_status', '*', 'write') RETURNING id"
        )
    try:
        assert _approval_id(await _call(toolplane, tokens.research, ARGS)) != first
    finally:
        async with access_change(toolplane):
            await owner.execute("DELETE FROM toolplane.grants WHERE id = $1", grant_id)
            await revoke_token(owner, unbound.token_id)
    assert await _status(owner) == "active"

    ran = await _call(toolplane, tokens.engineering, ARGS, **{"X-Request-Id": "REQ-appr-run"})
    assert not ran.is_error, ran.structured_content
    assert ran.structured_content == {
        "application_id": APP,
        "previous_status": "active",
        "status": "maintenance",
    }
    assert await _status(owner) == "maintenance"
    assert await owner.fetchval("SELECT status FROM toolplane.approvals WHERE id = $1", first) == (
        "consumed"
    )

    # Exactly once: the same call again needs a new approval.
    await owner.execute("UPDATE toolplane.applications SET status = 'active' WHERE id = $1", APP)
    second = _approval_id(await _call(toolplane, tokens.engineering, ARGS))
    assert second != first
    assert await _status(owner) == "active"

    [waiting] = await audit_rows(request_id="REQ-appr-1")
    assert (waiting["decision"], waiting["status"], waiting["error_code"]) == (
        "require_approval",
        "approval_required",
        "APPROVAL_REQUIRED",
    )
    [success] = await audit_rows(request_id="REQ-appr-run")
    assert (success["decision"], success["status"]) == ("require_approval", "success")
    assert success["metadata"]["approval_id"] == first


async def test_an_expired_approval_does_not_run(
    toolplane: RunningToolPlane, tokens: AgentTokens, owner: asyncpg.Connection, foundry: None
) -> None:
    approval_id = _approval_id(await _call(toolplane, tokens.engineering, ARGS))
    await _decide(toolplane, approval_id, approve=True)
    await owner.execute(
        "UPDATE toolplane.approvals SET expires_at = now() - interval '1 second' WHERE id = $1",
        approval_id,
    )
    again = _approval_id(await _call(toolplane, tokens.engineering, ARGS))
    assert again != approval_id
    assert await _status(owner) == "active"
    assert (
        await owner.fetchval("SELECT status FROM toolplane.approvals WHERE id = $1", approval_id)
        == "expired"
    )


async def test_a_rejected_call_does_not_run(
    toolplane: RunningToolPlane, tokens: AgentTokens, owner: asyncpg.Connection, foundry: None
) -> None:
    approval_id = _approval_id(await _call(toolplane, tokens.engineering, ARGS))
    rejected = await _decide(toolplane, approval_id, approve=False)
    assert rejected.status == approval_pb2.APPROVAL_STATUS_REJECTED
    assert _approval_id(await _call(toolplane, tokens.engineering, ARGS)) != approval_id
    assert await _status(owner) == "active"


async def test_operators_cannot_decide_twice_or_decide_nothing(
    toolplane: RunningToolPlane, tokens: AgentTokens, foundry: None
) -> None:
    approval_id = _approval_id(await _call(toolplane, tokens.engineering, ARGS))
    await _decide(toolplane, approval_id, approve=False)
    with pytest.raises(grpc.aio.AioRpcError) as twice:
        await _decide(toolplane, approval_id, approve=True)
    assert twice.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert error_details(twice.value).reason == "APPROVAL_NOT_PENDING"
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await _decide(toolplane, "no-such-approval", approve=True)
    assert error_details(unknown.value).reason == "APPROVAL_NOT_FOUND"
    with pytest.raises(grpc.aio.AioRpcError) as anonymous:
        await toolplane.admin_stub().DecideApproval(
            admin_pb.DecideApprovalRequest(
                approval_id=approval_id, decision=admin_pb.APPROVAL_DECISION_APPROVE
            ),
            timeout=10,
        )
    assert error_details(anonymous.value).reason == "OPERATOR_REQUIRED"


async def test_list_approvals_pages_newest_first(
    toolplane: RunningToolPlane, tokens: AgentTokens, foundry: None
) -> None:
    ids = [
        _approval_id(await _call(toolplane, tokens.engineering, {**ARGS, "reason": f"r{i}"}))
        for i in range(3)
    ]
    stub = toolplane.admin_stub()
    request = admin_pb.ListApprovalsRequest(
        status=approval_pb2.APPROVAL_STATUS_PENDING, page_size=2
    )
    first = await stub.ListApprovals(request, timeout=10)
    request.page_token = first.next_page_token
    second = await stub.ListApprovals(request, timeout=10)
    listed = [a.approval_id for a in [*first.approvals, *second.approvals]]
    assert listed[:3] == ids[::-1]
    with pytest.raises(grpc.aio.AioRpcError) as bad_size:
        await stub.ListApprovals(admin_pb.ListApprovalsRequest(page_size=1000), timeout=10)
    assert error_details(bad_size.value).reason == "INVALID_PAGE_SIZE"


async def test_the_approvals_command_lists_and_decides(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    owner_dsn: str,
    owner: asyncpg.Connection,
    foundry: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    approval_id = _approval_id(await _call(toolplane, tokens.engineering, ARGS))
    database = ["--database-url", owner_dsn]
    assert (
        await asyncio.to_thread(nemo, ["approvals", "list", "--status", "pending", *database]) == 0
    )
    assert approval_id in capsys.readouterr().out
    with pytest.raises(SystemExit) as usage:
        await asyncio.to_thread(nemo, ["approvals", "approve", approval_id, *database])
    assert usage.value.code == 2  # no --operator
    assert (
        await asyncio.to_thread(
            nemo, ["approvals", "approve", approval_id, "--operator", "bob", *database]
        )
        == 0
    )
    assert (
        await owner.fetchval(
            "SELECT decided_by FROM toolplane.approvals WHERE id = $1", approval_id
        )
        == "bob"
    )
    assert (
        await asyncio.to_thread(
            nemo, ["approvals", "reject", approval_id, "--operator", "bob", *database]
        )
        == 1
    )
    assert "not pending" in capsys.readouterr().err
    ran = await _call(toolplane, tokens.engineering, ARGS)
    assert not ran.is_error
