"""No borrowed identities: the user an agent acts for counts only when it comes from the agent's
token or from an internal caller trusted to vouch for users. A user the agent names itself (the
MCP header, the gRPC field, through any other internal caller) is recorded and reaches nothing it
could not reach without it, whoever that user is: staff, an administrator, another parent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf import struct_pb2

from nemo_core.errors import error_details
from nemo_ops.cli import main as nemo
from nemo_ops.operator_credential import OPERATOR_TOKEN_ENV
from nemo_protos.toolplane.v1 import tool_pb2
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb
from nemo_protos.toolplane.v1 import toolplane_service_pb2 as pb
from nemo_toolplane.acl import ACL, USER_VOUCHING_CALLERS
from nemo_toolplane.tokens import UserRequired, issue_token

from .conftest import AgentTokens, OperatorTokens, RunningToolPlane
from .mcp_http import error_envelope

LEARNERS = ("L-2041-1", "L-2041-2", "L-2041-3", "L-2041-10", "L-2041-404")
#: Staff, an administrator, a parent of another family, and L-2041-1's own parent.
ASSERTED_USERS = ("U-2041-S1", "U-2041-A1", "U-2041-P2", "U-2041-P1")
#: What U-2041-P1 (parent of family F-2041-1) reaches.
PARENT_REACH = {"L-2041-1", "L-2041-3"}
TOOL = "learner.get_profile"


def _outcome(result: Any) -> tuple[bool, str | None, str | None]:
    """What the agent learns from a call: success, or the envelope's code and message."""
    if not result.is_error:
        return True, None, None
    error = error_envelope(result)["error"]
    return False, error["code"], error["message"]


def _grpc_outcome(response: pb.CallToolResponse) -> tuple[bool, str | None, str | None]:
    if response.success:
        return True, None, None
    code = tool_pb2.ErrorCode.Name(response.error.code).removeprefix("ERROR_CODE_")
    return False, code, response.error.message


async def _mcp_reads(
    toolplane: RunningToolPlane, token: str, headers: dict[str, str]
) -> dict[str, tuple[bool, str | None, str | None]]:
    async with toolplane.mcp(token, headers) as client:
        return {
            learner: _outcome(await client.call_tool(TOOL, {"learner_id": learner}))
            for learner in LEARNERS
        }


async def _grpc_reads(
    toolplane: RunningToolPlane, token: str, *, caller: str, **fields: str
) -> dict[str, tuple[bool, str | None, str | None]]:
    stub = toolplane.tools_stub(caller)
    reads = {}
    for learner in LEARNERS:
        arguments = struct_pb2.Struct()
        arguments.update({"learner_id": learner})
        response = await stub.CallTool(
            pb.CallToolRequest(tool=TOOL, arguments=arguments, **fields),
            metadata=(("authorization", f"Bearer {token}"),),
            timeout=10,
        )
        reads[learner] = _grpc_outcome(response)
    return reads


def _reached(reads: dict[str, tuple[bool, str | None, str | None]]) -> set[str]:
    return {learner for learner, (ok, _, _) in reads.items() if ok}


async def test_an_unbound_token_naming_any_user_over_mcp_reads_no_learner(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    without = await _mcp_reads(toolplane, tokens.learning_unbound, {})
    assert _reached(without) == set()
    for user in ASSERTED_USERS:
        session = f"S-asserted-mcp-{user}"
        headers = {"X-Nemo12-User-Id": user, "X-Nemo12-Session-Id": session}
        assert await _mcp_reads(toolplane, tokens.learning_unbound, headers) == without, user
        rows = await audit_rows(session_id=session)
        assert len(rows) == len(LEARNERS)
        for row in rows:
            # Recorded for attribution, marked as the agent's own word.
            assert (row["user_id"], row["user_source"]) == (user, "asserted")
            assert row["token_id"] == tokens.ids[1]
            assert (row["decision"], row["status"]) == ("deny", "denied")
            assert row["metadata"]["rule"] == "access:user_not_vouched"


async def test_a_bound_token_over_mcp_acts_for_its_user_whatever_the_header_says(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    without = await _mcp_reads(toolplane, tokens.learning_parent, {})
    assert _reached(without) == PARENT_REACH
    session = "S-bound-mcp-staff-header"
    headers = {"X-Nemo12-User-Id": "U-2041-S1", "X-Nemo12-Session-Id": session}
    assert await _mcp_reads(toolplane, tokens.learning_parent, headers) == without
    rows = await audit_rows(session_id=session)
    assert {(row["user_id"], row["user_source"], row["token_id"]) for row in rows} == {
        ("U-2041-P1", "token", tokens.ids[0])
    }
    refused = {
        row["resource"]: row["metadata"]["rule"] for row in rows if row["status"] == "denied"
    }
    assert refused == {
        f"learner:{learner}": "access:no_relation"
        for learner in ("L-2041-2", "L-2041-10", "L-2041-404")
    }


@pytest.mark.parametrize("user", ASSERTED_USERS)
async def test_the_grpc_user_field_from_an_untrusted_caller_reads_no_learner(
    toolplane: RunningToolPlane, tokens: AgentTokens, user: str
) -> None:
    without = await _grpc_reads(toolplane, tokens.learning_unbound, caller="internal")
    assert _reached(without) == set()
    named = await _grpc_reads(toolplane, tokens.learning_unbound, caller="internal", user_id=user)
    assert named == without


async def test_a_bound_token_over_grpc_ignores_the_user_field(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    for caller in ("internal", "platform"):
        reads = await _grpc_reads(
            toolplane, tokens.learning_parent, caller=caller, user_id="U-2041-S1"
        )
        assert _reached(reads) == PARENT_REACH, caller


async def test_a_user_vouched_for_by_the_platform_counts(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any
) -> None:
    session = "S-vouched-grpc"
    parent = await _grpc_reads(
        toolplane,
        tokens.learning_unbound,
        caller="platform",
        user_id="U-2041-P1",
        session_id=session,
    )
    assert _reached(parent) == PARENT_REACH
    # Nonexistent and foreign learners still look alike.
    assert parent["L-2041-2"] == parent["L-2041-404"]
    assert parent["L-2041-2"][1] == "AUTHORIZATION_ERROR"
    rows = await audit_rows(session_id=session)
    assert {(row["user_id"], row["user_source"]) for row in rows} == {("U-2041-P1", "caller")}
    mentor = await _grpc_reads(
        toolplane, tokens.learning_unbound, caller="platform", user_id="U-2041-M1"
    )
    assert _reached(mentor) == {"L-2041-1"}


def test_only_the_platform_vouches_for_users_and_it_may_call_tools() -> None:
    vouching = set(USER_VOUCHING_CALLERS)
    assert vouching == {"platform"}
    tool_callers = ACL.callers_of("/nemo.toolplane.v1.ToolPlaneService/CallTool")
    assert vouching <= tool_callers


@pytest.fixture
async def forget_issued(owner: asyncpg.Connection) -> AsyncIterator[None]:
    yield
    await owner.execute("DELETE FROM toolplane.agent_tokens WHERE label = 'tests: issue'")


async def test_an_unbound_token_for_user_scoped_grants_is_issued_only_when_asked_for(
    toolplane: RunningToolPlane, forget_issued: None
) -> None:
    admin = toolplane.admin_stub()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await admin.IssueAgentToken(
            admin_pb.IssueAgentTokenRequest(agent_id="learning-agent", label="tests: issue"),
            timeout=10,
        )
    details = error_details(refused.value)
    assert (details.code, details.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "USER_REQUIRED")
    assert "learner.get_profile" in (refused.value.details() or "")
    unbound = await admin.IssueAgentToken(
        admin_pb.IssueAgentTokenRequest(
            agent_id="learning-agent", label="tests: issue", unbound=True
        ),
        timeout=10,
    )
    assert unbound.token
    assert "reach no learner" in unbound.reach
    bound = await admin.IssueAgentToken(
        admin_pb.IssueAgentTokenRequest(
            agent_id="learning-agent", user_id="U-2041-P1", label="tests: issue"
        ),
        timeout=10,
    )
    assert bound.reach.startswith("acts for U-2041-P1 only")
    # An agent without user-scoped grants loses nothing by being unbound.
    research = await admin.IssueAgentToken(
        admin_pb.IssueAgentTokenRequest(agent_id="research-agent", label="tests: issue"),
        timeout=10,
    )
    assert "fixed scopes" in research.reach


async def test_the_issue_token_command_refuses_an_unbound_token_unless_asked(
    owner_dsn: str,
    owner: asyncpg.Connection,
    operators: OperatorTokens,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OPERATOR_TOKEN_ENV, operators.alice)
    database = ["--database-url", owner_dsn]
    refused = await asyncio.to_thread(
        nemo, ["issue-token", "learning-agent", "--label", "tests: cli", *database]
    )
    assert refused == 1
    assert "Bind the token to a user" in capsys.readouterr().err
    issued = await asyncio.to_thread(
        nemo, ["issue-token", "learning-agent", "--unbound", "--label", "tests: cli", *database]
    )
    assert issued == 0
    out = capsys.readouterr().out.splitlines()
    assert "reach no learner" in out[1]
    assert out[2].startswith("nemo_at_")
    issued_by = await owner.fetchval(
        "SELECT issued_by FROM toolplane.agent_tokens WHERE id = $1", out[0].split()[2]
    )
    assert issued_by == "alice"
    with pytest.raises(SystemExit) as both:
        await asyncio.to_thread(
            nemo, ["issue-token", "learning-agent", "--unbound", "--user", "U-2041-P1", *database]
        )
    assert both.value.code == 2


async def test_the_token_library_refuses_too(owner: asyncpg.Connection) -> None:
    with pytest.raises(UserRequired):
        await issue_token(owner, "learning-agent", label="tests: library")
