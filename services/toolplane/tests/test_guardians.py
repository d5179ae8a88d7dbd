"""A guardian's own view through the people's API: approvals about their child, which they may
decide where the policy names guardians (never one of another family, never their own call);
the learners linked to them by pseudonym; the hosts that acted for them, which they may revoke
so that the edge refuses them from then on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import grpc
import pytest

from nemo_core.errors import error_details
from nemo_protos.toolplane.v1 import approval_pb2, audit_pb2
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb
from nemo_testing.oauth import OAuthServer
from nemo_testing.ports import free_port
from nemo_toolplane.tokens import issue_token

from .conftest import RunningToolPlane, StartToolPlane, rules_change
from .mcp_http import error_envelope, modern_call, post
from .oauth.conftest import Forger
from .test_people import PEOPLE_AUDIENCE

GUARDED = "approve-profile-with-guardians"


@pytest.fixture(scope="module")
async def family_plane(start_toolplane: StartToolPlane, oauth_server: OAuthServer) -> Any:
    """A tool plane taking agents' OAuth tokens at its edge and people's for its people's API."""
    port = free_port()
    return await start_toolplane(
        mcp_port=port,
        oauth_issuer=oauth_server.issuer,
        oauth_resource=f"http://127.0.0.1:{port}/mcp",
        people_issuer=oauth_server.issuer,
        people_audience=PEOPLE_AUDIENCE,
        people_clients=[oauth_server.client_id],
    )


@pytest.fixture(scope="module")
def person(oauth_server: OAuthServer) -> Forger:
    return Forger(oauth_server, PEOPLE_AUDIENCE)


def _as(forger: Forger, user: str) -> str:
    return forger.sign(forger.claims(sub=user, scope=""))


@pytest.fixture
async def guardian_policy(
    family_plane: RunningToolPlane, owner: asyncpg.Connection
) -> AsyncIterator[None]:
    """Profile changes for a learner wait for an operator or one of the learner's guardians."""
    async with rules_change(family_plane):
        await owner.execute(
            "UPDATE toolplane.policies SET enabled = false WHERE name = 'deny-learner-writes'"
        )
        await owner.execute(
            "INSERT INTO toolplane.policies (name, effect, tool_scope, priority, approvers) "
            "VALUES ($1, 'require_approval', 'learner.update_profile', 5, 'operator,guardian')",
            GUARDED,
        )
        grant = await owner.fetchval(
            "INSERT INTO toolplane.grants (agent_id, tool_pattern, resource_scope, permission) "
            "VALUES ('learning-agent', 'learner.update_profile', 'user', 'write') RETURNING id"
        )
    yield
    async with rules_change(family_plane):
        await owner.execute("DELETE FROM toolplane.grants WHERE id = $1", grant)
        await owner.execute("DELETE FROM toolplane.approvals WHERE policy_name = $1", GUARDED)
        await owner.execute("DELETE FROM toolplane.policies WHERE name = $1", GUARDED)
        await owner.execute(
            "UPDATE toolplane.policies SET enabled = true WHERE name = 'deny-learner-writes'"
        )


async def _profile_change(plane: RunningToolPlane, token: str, learner: str) -> str:
    async with plane.mcp(token) as client:
        result = await client.call_tool(
            "learner.update_profile", {"learner_id": learner, "grade": 9}
        )
    error = error_envelope(result)["error"]
    assert error["code"] == "APPROVAL_REQUIRED", error
    return str(error["details"]["approval_id"])


async def _refusal(call: Any) -> tuple[grpc.StatusCode, str | None]:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call
    return refused.value.code(), error_details(refused.value).reason


def _approve(approval_id: str) -> admin_pb.DecideApprovalRequest:
    return admin_pb.DecideApprovalRequest(
        approval_id=approval_id, decision=admin_pb.APPROVAL_DECISION_APPROVE, note="ok"
    )


async def test_a_guardian_decides_an_approval_about_their_child_where_the_policy_names_them(
    family_plane: RunningToolPlane,
    person: Forger,
    owner: asyncpg.Connection,
    guardian_policy: None,
) -> None:
    # The mentor's agent asks to change L-2041-1's profile; the policy names guardians.
    mentor = await issue_token(owner, "learning-agent", user_id="U-2041-M1", label="tests")
    approval_id = await _profile_change(family_plane, mentor.token, "L-2041-1")
    parent, other_family = _as(person, "U-2041-P1"), _as(person, "U-2041-P2")
    mine = await family_plane.admin_stub(person=parent, caller="console").ListLinkedLearners(
        admin_pb.ListLinkedLearnersRequest(), timeout=10
    )
    theirs = await family_plane.admin_stub(
        person=other_family, caller="console"
    ).ListLinkedLearners(admin_pb.ListLinkedLearnersRequest(), timeout=10)
    [own_ref] = [child.learner_ref for child in mine.learners if child.grade == 8]
    assert own_ref not in {child.learner_ref for child in theirs.learners}
    about = await family_plane.admin_stub(person=parent, caller="console").ListLearnerApprovals(
        admin_pb.ListLearnerApprovalsRequest(learner_ref=own_ref), timeout=10
    )
    [shown] = [a for a in about.approvals if a.approval_id == approval_id]
    assert list(shown.approvers) == ["operator", "guardian"]
    # Another family's parent neither sees nor decides it.
    assert await _refusal(
        family_plane.admin_stub(person=other_family, caller="console").ListLearnerApprovals(
            admin_pb.ListLearnerApprovalsRequest(learner_ref=own_ref), timeout=10
        )
    ) == (grpc.StatusCode.PERMISSION_DENIED, "LEARNER_NOT_LINKED")
    assert await _refusal(
        family_plane.admin_stub(person=other_family, caller="console").DecideApproval(
            _approve(approval_id), timeout=10
        )
    ) == (grpc.StatusCode.PERMISSION_DENIED, "NOT_AN_APPROVER")
    decided = await family_plane.admin_stub(person=parent, caller="console").DecideApproval(
        _approve(approval_id), timeout=10
    )
    assert decided.approval.status == approval_pb2.APPROVAL_STATUS_APPROVED
    assert decided.approval.decided_by == "U-2041-P1"


async def test_a_guardian_never_decides_their_own_call_nor_one_for_operators_only(
    family_plane: RunningToolPlane,
    person: Forger,
    owner: asyncpg.Connection,
    guardian_policy: None,
) -> None:
    own = await issue_token(owner, "learning-agent", user_id="U-2041-P1", label="tests")
    approval_id = await _profile_change(family_plane, own.token, "L-2041-1")
    assert await _refusal(
        family_plane.admin_stub(person=_as(person, "u_2041_p1"), caller="console").DecideApproval(
            _approve(approval_id), timeout=10
        )
    ) == (grpc.StatusCode.PERMISSION_DENIED, "NOT_AN_APPROVER")
    assert await _refusal(
        family_plane.admin_stub(person=_as(person, "U-2041-P1"), caller="console").DecideApproval(
            _approve(approval_id), timeout=10
        )
    ) == (grpc.StatusCode.PERMISSION_DENIED, "SELF_APPROVAL")
    engineering = await issue_token(owner, "engineering-agent", label="tests")
    async with family_plane.mcp(engineering.token) as client:
        result = await client.call_tool(
            "application.set_status",
            {"application_id": "nemo12-foundry", "status": "maintenance", "reason": "guardians"},
        )
    operators_only = str(error_envelope(result)["error"]["details"]["approval_id"])
    assert await _refusal(
        family_plane.admin_stub(person=_as(person, "U-2041-P1"), caller="console").DecideApproval(
            _approve(operators_only), timeout=10
        )
    ) == (grpc.StatusCode.PERMISSION_DENIED, "NOT_AN_APPROVER")
    await owner.execute("DELETE FROM toolplane.approvals WHERE id = $1", operators_only)


async def test_a_person_revokes_a_host_and_the_edge_refuses_it_for_them_only(
    family_plane: RunningToolPlane,
    oauth_server: OAuthServer,
    person: Forger,
    owner: asyncpg.Connection,
) -> None:
    edge = family_plane.settings.oauth_resource or ""
    parent = await oauth_server.tokens("U-2041-P2", resource=edge)
    other = await oauth_server.tokens("U-2041-P3", resource=edge)
    body = modern_call("docs.search_docs", {"query": "audit"})
    assert (await post(family_plane.mcp_url, body, token=parent.access_token)).status_code == 200
    await family_plane.plane.audit.flush()
    # A client no registered agent answers for is refused, with no agent: it acted for nobody.
    columns = [
        row["column_name"]
        for row in await owner.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = "
            "'toolplane' AND table_name = 'audit_logs' AND is_identity = 'NO' "
            "AND column_default IS NULL AND column_name NOT IN ('client_id', 'agent_id')"
        )
    ]
    listed = ", ".join(columns)
    await owner.execute(
        f"INSERT INTO toolplane.audit_logs ({listed}, client_id, agent_id) "
        f"SELECT {listed}, 'an-unknown-client', NULL FROM toolplane.audit_logs "
        "WHERE subject = $1 AND client_id IS NOT NULL ORDER BY id DESC LIMIT 1",
        "U-2041-P2",
    )
    admin = family_plane.admin_stub(person=_as(person, "U-2041-P2"), caller="console")
    allowed = await admin.ListAuthorizations(admin_pb.ListAuthorizationsRequest(), timeout=10)
    listed_hosts = {host.client_id for host in allowed.hosts}
    assert oauth_server.client_id in listed_hosts
    assert "an-unknown-client" not in listed_hosts
    assert await _refusal(
        admin.RevokeAuthorization(
            admin_pb.RevokeAuthorizationRequest(client_id="a-host-that-never-acted"), timeout=10
        )
    ) == (grpc.StatusCode.NOT_FOUND, "AUTHORIZATION_NOT_FOUND")
    async with rules_change(family_plane):
        revoked = await admin.RevokeAuthorization(
            admin_pb.RevokeAuthorizationRequest(client_id=oauth_server.client_id), timeout=10
        )
    assert revoked.revoke_time.seconds > 0
    # Every token of that host for this person is refused, a fresh one too; other people's not.
    fresh = await oauth_server.tokens("U-2041-P2", resource=edge)
    for token in (parent.access_token, fresh.access_token):
        assert (await post(family_plane.mcp_url, body, token=token)).status_code == 401
    assert (await post(family_plane.mcp_url, body, token=other.access_token)).status_code == 200


async def test_a_guardian_pages_through_what_agents_did_with_their_child_and_no_other(
    family_plane: RunningToolPlane, person: Forger, owner: asyncpg.Connection
) -> None:
    mentor = await issue_token(owner, "learning-agent", user_id="U-2041-M1", label="tests")
    reads = 3
    async with family_plane.mcp(mentor.token) as client:
        for _ in range(reads):
            await client.call_tool("learner.get_profile", {"learner_id": "L-2041-1"})
    await family_plane.plane.audit.flush()
    parent = family_plane.admin_stub(person=_as(person, "U-2041-P1"), caller="console")
    linked = await parent.ListLinkedLearners(admin_pb.ListLinkedLearnersRequest(), timeout=10)
    [child] = [learner.learner_ref for learner in linked.learners if learner.grade == 8]
    seen: list[audit_pb2.AuditEntry] = []
    token = ""
    while True:
        page = await parent.ListLearnerActivity(
            admin_pb.ListLearnerActivityRequest(learner_ref=child, page_size=1, page_token=token),
            timeout=10,
        )
        assert len(page.entries) <= 1
        seen.extend(page.entries)
        token = page.next_page_token
        if not token:
            break
    # Every row is about this child, newest first, each once; the mentor's reads are among them.
    assert {entry.resource for entry in seen} == {"learner:L-2041-1"}
    ids = [entry.audit_id for entry in seen]
    assert ids == sorted(set(ids), reverse=True)
    by_mentor = [
        entry
        for entry in seen
        if entry.token_id == mentor.token_id and entry.tool_id.startswith("learner.get_profile")
    ]
    assert len(by_mentor) == reads
    assert {(entry.agent_id, entry.user_id) for entry in by_mentor} == {
        ("learning-agent", "U-2041-M1")
    }
    assert all(entry.create_time.seconds > 0 for entry in by_mentor)
    # Another family's guardian is refused that child, not shown an empty page.
    other_family = family_plane.admin_stub(person=_as(person, "U-2041-P2"), caller="console")
    assert await _refusal(
        other_family.ListLearnerActivity(
            admin_pb.ListLearnerActivityRequest(learner_ref=child), timeout=10
        )
    ) == (grpc.StatusCode.PERMISSION_DENIED, "LEARNER_NOT_LINKED")
    for not_a_ref in ("L-2041-1", child.upper(), child + "0", ""):
        assert await _refusal(
            parent.ListLearnerActivity(
                admin_pb.ListLearnerActivityRequest(learner_ref=not_a_ref), timeout=10
            )
        ) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_LEARNER_REF")
