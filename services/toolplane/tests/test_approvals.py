"""Approvals end to end on ``application.set_status`` (HIGH, write): required, approved, runs
once, then needs approval again; anything not bound to the approved call never runs."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf import struct_pb2

from nemo_core.db import connect
from nemo_core.errors import error_details
from nemo_ops.cli import main as nemo
from nemo_protos.toolplane.v1 import approval_pb2, tool_pb2
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb
from nemo_protos.toolplane.v1 import toolplane_service_pb2 as pb
from nemo_toolplane.approvals import arguments_digest
from nemo_toolplane.operators import authenticate as operators_authenticate
from nemo_toolplane.operators import issue_operator_token, revoke_operator_token
from nemo_toolplane.tokens import issue_token, revoke_token

from .conftest import (
    AgentTokens,
    OperatorTokens,
    RunningToolPlane,
    StartToolPlane,
    as_operator,
    rules_change,
)
from .mcp_http import error_envelope

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
    error = error_envelope(result)["error"]
    assert error["code"] == "APPROVAL_REQUIRED"
    assert error["details"]["policy"] == "approve-high-risk-writes@v1"
    return str(error["details"]["approval_id"])


async def _decide(
    toolplane: RunningToolPlane, approval_id: str, *, approve: bool, operator: str
) -> Any:
    decision = admin_pb.APPROVAL_DECISION_APPROVE if approve else admin_pb.APPROVAL_DECISION_REJECT
    response = await toolplane.admin_stub(person=None).DecideApproval(
        admin_pb.DecideApprovalRequest(
            approval_id=approval_id, decision=decision, note="window 02:00"
        ),
        metadata=as_operator(operator),
        timeout=10,
    )
    return response.approval


async def test_approval_round_trip(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    owner: asyncpg.Connection,
    audit_rows: Any,
    foundry: None,
    operators: OperatorTokens,
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
        "U-2041-S1",
        "application.set_status:v1",
        "pending",
    )
    assert row["arguments_digest"] == arguments_digest(ARGS)
    assert (row["policy_name"], row["policy_version"]) == (
        "approve-high-risk-writes",
        "approve-high-risk-writes@v1",
    )

    approved = await _decide(toolplane, first, approve=True, operator=operators.alice)
    assert approved.status == approval_pb2.APPROVAL_STATUS_APPROVED
    assert approved.decided_by == "alice"

    # Changed arguments, another user or another agent: not what was approved.
    changed = {**ARGS, "reason": "something else"}
    assert _approval_id(await _call(toolplane, tokens.engineering, changed)) != first
    unbound = await issue_token(owner, "engineering-agent", label="tests")
    other_user = await _call(toolplane, unbound.token, ARGS, **{"X-Nemo12-User-Id": "U-2041-A1"})
    assert _approval_id(other_user) != first
    async with rules_change(toolplane):
        grant_id = await owner.fetchval(
            "INSERT INTO toolplane.grants (agent_id, tool_pattern, resource_scope, permission) "
            "VALUES ('research-agent', 'application.set_status', '*', 'write') RETURNING id"
        )
    try:
        assert _approval_id(await _call(toolplane, tokens.research, ARGS)) != first
    finally:
        async with rules_change(toolplane):
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
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    owner: asyncpg.Connection,
    foundry: None,
    operators: OperatorTokens,
) -> None:
    approval_id = _approval_id(await _call(toolplane, tokens.engineering, ARGS))
    await _decide(toolplane, approval_id, approve=True, operator=operators.alice)
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
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    owner: asyncpg.Connection,
    foundry: None,
    operators: OperatorTokens,
) -> None:
    approval_id = _approval_id(await _call(toolplane, tokens.engineering, ARGS))
    rejected = await _decide(toolplane, approval_id, approve=False, operator=operators.alice)
    assert rejected.status == approval_pb2.APPROVAL_STATUS_REJECTED
    assert _approval_id(await _call(toolplane, tokens.engineering, ARGS)) != approval_id
    assert await _status(owner) == "active"


async def test_operators_cannot_decide_twice_or_decide_nothing(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    foundry: None,
    operators: OperatorTokens,
) -> None:
    approval_id = _approval_id(await _call(toolplane, tokens.engineering, ARGS))
    await _decide(toolplane, approval_id, approve=False, operator=operators.alice)
    with pytest.raises(grpc.aio.AioRpcError) as twice:
        await _decide(toolplane, approval_id, approve=True, operator=operators.alice)
    assert twice.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert error_details(twice.value).reason == "APPROVAL_NOT_PENDING"
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await _decide(toolplane, "no-such-approval", approve=True, operator=operators.alice)
    assert error_details(unknown.value).reason == "APPROVAL_NOT_FOUND"


async def test_only_an_authenticated_operator_decides_and_never_for_themselves(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    owner: asyncpg.Connection,
    foundry: None,
    operators: OperatorTokens,
) -> None:
    approval_id = _approval_id(await _call(toolplane, tokens.engineering, ARGS))
    approve = admin_pb.DecideApprovalRequest(
        approval_id=approval_id, decision=admin_pb.APPROVAL_DECISION_APPROVE
    )
    revoked = await issue_operator_token(owner, "alice", label="tests: revoked")
    await revoke_operator_token(owner, revoked.token_id)
    # No credential, a made-up one, a revoked one: refused, whatever name is typed.
    for metadata in ((), as_operator("nemo_ot_forged"), as_operator(revoked.token)):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await toolplane.admin_stub(person=None).DecideApproval(
                admin_pb.DecideApprovalRequest(
                    approval_id=approval_id,
                    decision=admin_pb.APPROVAL_DECISION_APPROVE,
                    operator="alice",
                ),
                metadata=metadata,
                timeout=10,
            )
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert error_details(refused.value).reason == "OPERATOR_UNAUTHENTICATED"
    # Sara's platform account is U-2041-S1, the user the engineering token acts for.
    with pytest.raises(grpc.aio.AioRpcError) as own:
        await toolplane.admin_stub(person=None).DecideApproval(
            approve, metadata=as_operator(operators.sara), timeout=10
        )
    assert (own.value.code(), error_details(own.value).reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "SELF_APPROVAL",
    )
    with pytest.raises(grpc.aio.AioRpcError) as mismatch:
        await toolplane.admin_stub(person=None).DecideApproval(
            admin_pb.DecideApprovalRequest(
                approval_id=approval_id, decision=admin_pb.APPROVAL_DECISION_APPROVE, operator="bob"
            ),
            metadata=as_operator(operators.alice),
            timeout=10,
        )
    assert error_details(mismatch.value).reason == "OPERATOR_MISMATCH"
    # A request that names no approval, or no decision, is the operator's argument to fix; it
    # is not the tool result that says a person must approve (ERROR_CODE_APPROVAL_REQUIRED).
    for incomplete, reason in (
        (
            admin_pb.DecideApprovalRequest(decision=admin_pb.APPROVAL_DECISION_APPROVE),
            "APPROVAL_ID_REQUIRED",
        ),
        (admin_pb.DecideApprovalRequest(approval_id=approval_id), "DECISION_REQUIRED"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await toolplane.admin_stub(person=None).DecideApproval(
                incomplete, metadata=as_operator(operators.alice), timeout=10
            )
        assert (missing.value.code(), error_details(missing.value).reason) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            reason,
        )
    row = await owner.fetchrow("SELECT * FROM toolplane.approvals WHERE id = $1", approval_id)
    assert row is not None
    assert (row["status"], row["decided_by"]) == ("pending", None)
    decided = await toolplane.admin_stub(person=None).DecideApproval(
        approve, metadata=as_operator(operators.bob), timeout=10
    )
    assert decided.approval.decided_by == "bob"
    assert (
        await owner.fetchval(
            "SELECT decided_by_token FROM toolplane.approvals WHERE id = $1", approval_id
        )
        == operators.ids["bob"]
    )


async def test_list_approvals_pages_newest_first(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    foundry: None,
    operators: OperatorTokens,
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


def _cursor(value: object) -> str:
    """A token in the page-token format (URL-safe base64 of JSON naming the listing)."""
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


@pytest.mark.parametrize(
    "token",
    [
        # before the first instant PostgreSQL has
        _cursor(["approvals", "0001-01-01T00:00:00+14:00", "b4f7"]),
        _cursor(["approvals", "2026-01-01T00:00:00", "b4f7"]),  # no time zone
        _cursor(["approvals", "2026-01-01T00:00:00+00:00", "a\u0000b"]),
        _cursor(["approvals", "2026-01-01T00:00:00+00:00", 5]),
        _cursor(["approvals", "2026-01-01T00:00:00+00:00"]),  # half a position
        _cursor(["audit", "2026-01-01T00:00:00+00:00", "b4f7"]),  # another listing's
        _cursor(["2026-01-01T00:00:00+00:00", "b4f7"]),  # no listing
        _cursor({"a": 1}),
        "!!!",
        "tệp",
    ],
)
async def test_every_malformed_approvals_page_token_is_an_invalid_argument(
    token: str, toolplane: RunningToolPlane
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await toolplane.admin_stub().ListApprovals(
            admin_pb.ListApprovalsRequest(page_token=token), timeout=10
        )
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(refused.value).reason == "INVALID_PAGE_TOKEN"


async def test_the_approvals_command_lists_and_decides(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    owner_dsn: str,
    owner: asyncpg.Connection,
    foundry: None,
    operators: OperatorTokens,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    approval_id = _approval_id(await _call(toolplane, tokens.engineering, ARGS))
    database = ["--database-url", owner_dsn]
    assert (
        await asyncio.to_thread(nemo, ["approvals", "list", "--status", "pending", *database]) == 0
    )
    assert approval_id in capsys.readouterr().out
    # Without the operator's own credential, nothing is decided.
    assert await asyncio.to_thread(nemo, ["approvals", "approve", approval_id, *database]) == 1
    assert "no valid operator credential" in capsys.readouterr().err
    sara, bob = tmp_path / "sara.token", tmp_path / "bob.token"
    sara.write_text(operators.sara + "\n")
    bob.write_text(operators.bob + "\n")
    as_sara = ["--operator-token-file", str(sara)]
    assert (
        await asyncio.to_thread(nemo, ["approvals", "approve", approval_id, *as_sara, *database])
        == 1
    )
    assert "own behalf" in capsys.readouterr().err
    as_bob = ["--operator-token-file", str(bob)]
    assert (
        await asyncio.to_thread(nemo, ["approvals", "approve", approval_id, *as_bob, *database])
        == 0
    )
    assert (
        await owner.fetchval(
            "SELECT decided_by FROM toolplane.approvals WHERE id = $1", approval_id
        )
        == "bob"
    )
    assert (
        await asyncio.to_thread(nemo, ["approvals", "reject", approval_id, *as_bob, *database]) == 1
    )
    assert "not pending" in capsys.readouterr().err
    ran = await _call(toolplane, tokens.engineering, ARGS)
    assert not ran.is_error


async def test_the_operators_command_issues_and_revokes_credentials(
    owner_dsn: str, owner: asyncpg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    database = ["--database-url", owner_dsn]
    try:
        added = ["operators", "add", "tests-olga", "--user", "U-2041-S7", *database]
        assert await asyncio.to_thread(nemo, added) == 0
        issued = ["operators", "issue-token", "tests-olga", *database]
        assert await asyncio.to_thread(nemo, issued) == 0
        first, token = capsys.readouterr().out.splitlines()[-2:]
        token_id = first.split()[3]
        stored = await owner.fetchval(
            "SELECT token_hash FROM toolplane.operator_tokens WHERE id = $1", token_id
        )
        assert stored == hashlib.sha256(token.encode()).hexdigest()  # never the token itself
        assert (await operators_authenticate(owner, token)) is not None
        revoke = ["operators", "revoke-token", token_id, *database]
        assert await asyncio.to_thread(nemo, revoke) == 0
        assert (await operators_authenticate(owner, token)) is None
    finally:
        await owner.execute("DELETE FROM toolplane.operators WHERE id = 'tests-olga'")


async def test_an_approval_is_bound_to_the_token_that_asked(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    owner: asyncpg.Connection,
    foundry: None,
    operators: OperatorTokens,
) -> None:
    approval_id = _approval_id(await _call(toolplane, tokens.engineering, ARGS))
    await _decide(toolplane, approval_id, approve=True, operator=operators.alice)
    # Another token of the same agent, bound to the same user: not the call that was approved.
    sibling = await issue_token(owner, "engineering-agent", user_id="U-2041-S1", label="tests")
    try:
        other = _approval_id(await _call(toolplane, sibling.token, ARGS))
        assert other != approval_id
        assert await _status(owner) == "active"
    finally:
        await revoke_token(owner, sibling.token_id)
    row = await owner.fetchrow("SELECT * FROM toolplane.approvals WHERE id = $1", approval_id)
    assert row is not None
    assert (row["token_id"], row["user_source"], row["status"]) == (
        tokens.ids[3],
        "token",
        "approved",
    )


async def test_approval_requests_are_rate_limited_per_agent(
    start_toolplane: StartToolPlane,
    tokens: AgentTokens,
    owner: asyncpg.Connection,
    foundry: None,
) -> None:
    limited = await start_toolplane(approval_requests_per_hour=3)
    ids = [
        _approval_id(await _call(limited, tokens.engineering, {**ARGS, "reason": f"flood {n}"}))
        for n in range(3)
    ]
    # Asking again for a call already waiting is no new request.
    assert (
        _approval_id(await _call(limited, tokens.engineering, {**ARGS, "reason": "flood 0"}))
        == (ids[0])
    )
    flooded = await _call(limited, tokens.engineering, {**ARGS, "reason": "flood 3"})
    assert flooded.is_error
    error = error_envelope(flooded)["error"]
    assert (error["code"], error["retryable"]) == ("RATE_LIMITED", True)
    assert error["details"]["retry_after_seconds"] > 0
    count = await owner.fetchval(
        "SELECT count(*) FROM toolplane.approvals WHERE arguments_json LIKE '%flood%'"
    )
    assert count == 3


async def test_identical_calls_at_once_run_an_approval_exactly_once(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    owner: asyncpg.Connection,
    foundry: None,
    operators: OperatorTokens,
) -> None:
    waiting = await _call_grpc(toolplane, tokens.engineering, "REQ-race-0", 10)
    approval_id = str(waiting.error.details["approval_id"])
    await _decide(toolplane, approval_id, approve=True, operator=operators.alice)
    responses = await asyncio.gather(
        *(_call_grpc(toolplane, tokens.engineering, f"REQ-race-{n}", 10) for n in range(1, 7))
    )
    ran = [response for response in responses if response.success]
    assert len(ran) == 1
    # The others were told the approval is used (a new request) or still in use (retry).
    codes = {tool_pb2.ErrorCode.Name(r.error.code) for r in responses if not r.success}
    assert codes <= {"ERROR_CODE_APPROVAL_REQUIRED", "ERROR_CODE_CONFLICT"}
    assert await _status(owner) == "maintenance"
    assert (
        await owner.fetchval("SELECT status FROM toolplane.approvals WHERE id = $1", approval_id)
        == "consumed"
    )


async def test_operators_see_the_arguments_they_approve(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    owner_dsn: str,
    audit_rows: Any,
    foundry: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    retire = {**ARGS, "status": "retired", "reason": "replaced by nemo12-learn"}
    ids = {
        status: _approval_id(
            await _call(
                toolplane, tokens.engineering, arguments, **{"X-Request-Id": f"REQ-shown-{status}"}
            )
        )
        for status, arguments in (("retired", retire), ("maintenance", ARGS))
    }
    listed = await toolplane.admin_stub().ListApprovals(
        admin_pb.ListApprovalsRequest(status=approval_pb2.APPROVAL_STATUS_PENDING), timeout=10
    )
    shown = {a.approval_id: a for a in listed.approvals}
    for status, arguments in (("retired", retire), ("maintenance", ARGS)):
        approval = shown[ids[status]]
        # Two requests that differ only in what they would do are told apart by their arguments,
        # and what is shown is exactly what the approval is bound to.
        assert json.loads(approval.arguments_json) == arguments
        assert approval.arguments_sha256 == arguments_digest(arguments)
        assert hashlib.sha256(approval.arguments_json.encode()).hexdigest() == (
            approval.arguments_sha256
        )
        assert approval.resource == ""  # the tool names no learner
    database = ["--database-url", owner_dsn]
    assert (
        await asyncio.to_thread(nemo, ["approvals", "list", "--status", "pending", *database]) == 0
    )
    out = capsys.readouterr().out
    assert ids["retired"] in out
    assert shown[ids["retired"]].arguments_json in out
    # The audit log of the same calls still holds no input.
    for status in ids:
        [row] = await audit_rows(request_id=f"REQ-shown-{status}")
        assert "replaced by" not in json.dumps(dict(row), default=str)
        assert "arguments" not in row["metadata"]


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(value)
    return message


async def _call_grpc(
    toolplane: RunningToolPlane, token: str, request_id: str, deadline: float
) -> pb.CallToolResponse:
    response: pb.CallToolResponse = await toolplane.tools_stub().CallTool(
        pb.CallToolRequest(
            tool="application.set_status", arguments=_struct(ARGS), request_id=request_id
        ),
        metadata=(("authorization", f"Bearer {token}"),),
        timeout=deadline,
    )
    return response


async def test_an_approved_call_cut_short_keeps_its_approval(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    owner_dsn: str,
    owner: asyncpg.Connection,
    audit_rows: Any,
    foundry: None,
    operators: OperatorTokens,
) -> None:
    waiting = await _call_grpc(toolplane, tokens.engineering, "REQ-cut-1", 10)
    approval_id = str(waiting.error.details["approval_id"])
    await _decide(toolplane, approval_id, approve=True, operator=operators.alice)
    # Someone else holds the application's row: the approved write waits past its deadline.
    locker = await connect(owner_dsn)
    try:
        async with locker.transaction():
            await locker.execute(
                "SELECT 1 FROM toolplane.applications WHERE id = $1 FOR UPDATE", APP
            )
            # Cut short by its deadline: the caller gives up, or the tool plane, which bounds
            # the approved write by the same deadline, answers first that nothing changed. The
            # lock holds the write for good, so the deadline only has to leave the call time to
            # reach it on a busy machine (its approval is bound there, and audited with it).
            cut: object
            try:
                cut = (await _call_grpc(toolplane, tokens.engineering, "REQ-cut-2", 3.0)).error.code
            except grpc.aio.AioRpcError as gave_up:
                cut = gave_up.code()
            assert cut in (grpc.StatusCode.DEADLINE_EXCEEDED, tool_pb2.ERROR_CODE_DEPENDENCY_ERROR)
    finally:
        await locker.close()

    async def approval_status() -> str:
        return str(
            await owner.fetchval(
                "SELECT status FROM toolplane.approvals WHERE id = $1", approval_id
            )
        )

    # Nothing changed, so the approval is still there to use.
    for _ in range(100):  # the server side of the cut call rolls back on its own time
        if await approval_status() == "approved":
            break
        await asyncio.sleep(0.05)
    assert await approval_status() == "approved"
    assert await _status(owner) == "active"
    ran = await _call_grpc(toolplane, tokens.engineering, "REQ-cut-3", 10)
    assert ran.success, ran.error
    assert await _status(owner) == "maintenance"
    assert await approval_status() == "consumed"
    # Exactly once: after it ran, the same call needs approval again.
    again = await _call_grpc(toolplane, tokens.engineering, "REQ-cut-4", 10)
    assert again.error.details["approval_id"] != approval_id
    statuses = [
        (row["status"], row["metadata"].get("approval_id"))
        for n in range(2, 4)
        for row in await audit_rows(request_id=f"REQ-cut-{n}")
    ]
    assert statuses == [("error", approval_id), ("success", approval_id)]
