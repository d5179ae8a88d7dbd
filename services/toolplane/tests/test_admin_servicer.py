"""The operators' gRPC service, ToolPlaneAdminService: agent tokens and the audit log (approvals
are in test_approvals.py)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from nemo_core.errors import error_details
from nemo_protos.toolplane.v1 import audit_pb2
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb

from .conftest import AgentTokens, RunningToolPlane
from .mcp_http import post
from .test_servicer import call


async def test_operators_issue_and_revoke_tokens(toolplane: RunningToolPlane) -> None:
    admin = toolplane.admin_stub()
    issued = await admin.IssueAgentToken(
        admin_pb.IssueAgentTokenRequest(agent_id="research-agent", label="tests: grpc"), timeout=10
    )
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    version = {"MCP-Protocol-Version": "2025-11-25"}
    assert (
        await post(toolplane.mcp_url, body, token=issued.token, headers=version)
    ).status_code == 200
    revoked = await admin.RevokeAgentToken(
        admin_pb.RevokeAgentTokenRequest(token_id=issued.token_id), timeout=10
    )
    assert revoked.revoke_time.seconds > 0
    assert (
        await post(toolplane.mcp_url, body, token=issued.token, headers=version)
    ).status_code == 401
    for request, reason in (
        (admin_pb.IssueAgentTokenRequest(agent_id="ghost-agent"), "AGENT_NOT_FOUND"),
        (admin_pb.IssueAgentTokenRequest(), "AGENT_REQUIRED"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await admin.IssueAgentToken(request, timeout=10)
        assert error_details(refused.value).reason == reason
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await admin.RevokeAgentToken(admin_pb.RevokeAgentTokenRequest(token_id="nope"), timeout=10)
    assert unknown.value.code() is grpc.StatusCode.NOT_FOUND


async def test_operators_read_the_audit_log_newest_first(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    for n in range(3):
        await call(toolplane, tokens.research, "docs.search_docs", {"query": "audit"},
                   session_id="S-grpc-audit-list", request_id=f"REQ-grpc-list-{n}")  # fmt: skip
    await toolplane.plane.audit.flush()
    admin = toolplane.admin_stub()
    one = await admin.ListAuditEntries(
        admin_pb.ListAuditEntriesRequest(request_id="REQ-grpc-list-1"), timeout=10
    )
    [entry] = one.entries
    assert (entry.agent_id, entry.tool_id, entry.session_id) == (
        "research-agent",
        "docs.search_docs:v1",
        "S-grpc-audit-list",
    )
    assert (entry.decision, entry.status) == (
        audit_pb2.DECISION_ALLOW,
        audit_pb2.CALL_STATUS_SUCCESS,
    )
    page = admin_pb.ListAuditEntriesRequest(agent_id="research-agent", page_size=2)
    first = await admin.ListAuditEntries(page, timeout=10)
    page.page_token = first.next_page_token
    second = await admin.ListAuditEntries(page, timeout=10)
    ids = [e.audit_id for e in [*first.entries, *second.entries]]
    assert ids == sorted(ids, reverse=True)
    assert len(set(ids)) == 4
    assert [e.request_id for e in first.entries] == ["REQ-grpc-list-2", "REQ-grpc-list-1"]


async def test_audit_entries_carry_their_time_and_duration_and_filter_by_start_time(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    before = datetime.now(UTC)
    await call(toolplane, tokens.research, "docs.search_docs", {"query": "audit"},
               session_id="S-grpc-audit-time", request_id="REQ-grpc-time")  # fmt: skip
    after = datetime.now(UTC)
    await toolplane.plane.audit.flush()
    admin = toolplane.admin_stub()
    [entry] = (
        await admin.ListAuditEntries(
            admin_pb.ListAuditEntriesRequest(request_id="REQ-grpc-time"), timeout=10
        )
    ).entries
    created = entry.create_time.ToDatetime(UTC)
    assert before - timedelta(seconds=1) <= created <= after + timedelta(seconds=1)
    # Measured inside the server, so within what the client saw.
    assert timedelta(0) < entry.duration.ToTimedelta() <= after - before

    async def listed(start: datetime) -> list[str]:
        request = admin_pb.ListAuditEntriesRequest(request_id="REQ-grpc-time")
        request.start_time.FromDatetime(start)
        return [e.request_id for e in (await admin.ListAuditEntries(request, timeout=10)).entries]

    assert await listed(created) == ["REQ-grpc-time"]
    assert await listed(created + timedelta(microseconds=1)) == []


def _token(position: str) -> str:
    """A token in the page-token format: URL-safe base64 of JSON naming the listing first."""
    return base64.urlsafe_b64encode(f'["audit",{position}]'.encode()).decode()


@pytest.mark.parametrize(
    "token",
    [
        _token("99999999999999999999"),  # beyond a bigint
        _token("9223372036854775808"),  # one beyond
        _token("-5"),
        _token("0"),
        _token('"12"'),  # the id as text
        _token("12.0"),
        _token("true"),
        _token("12,13"),
        base64.urlsafe_b64encode(b'["approvals",12]').decode(),  # another listing's
        base64.urlsafe_b64encode(b"12").decode(),  # a bare id, as tokens once were
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        "not base64 at all!",
        "tệp",
    ],
)
async def test_every_malformed_audit_page_token_is_an_invalid_argument(
    token: str, toolplane: RunningToolPlane
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await toolplane.admin_stub().ListAuditEntries(
            admin_pb.ListAuditEntriesRequest(page_token=token), timeout=10
        )
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(refused.value).reason == "INVALID_PAGE_TOKEN"


async def test_the_largest_audit_page_token_is_accepted(
    toolplane: RunningToolPlane, tokens: AgentTokens
) -> None:
    # At least one row below the largest id, whichever tests ran before.
    await call(toolplane, tokens.research, "docs.search_docs", {"query": "audit"},
               session_id="S-grpc-audit-max", request_id="REQ-grpc-max")  # fmt: skip
    await toolplane.plane.audit.flush()
    response = await toolplane.admin_stub().ListAuditEntries(
        admin_pb.ListAuditEntriesRequest(page_token=_token("9223372036854775807"), page_size=1),
        timeout=10,
    )
    assert len(response.entries) == 1
