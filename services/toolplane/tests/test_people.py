"""Every administrative action is a person's (issue 26): the people's API acts only for a person
proven by their own credential, records who they are, and never lets anyone decide a call of
their own, however their id is written; approval requests are limited per agent and
credential, and a request nobody decides in time is denied."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf import message_factory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_core.errors import error_details
from nemo_protos.toolplane.v1 import approval_pb2
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb
from nemo_testing.oauth import OAuthServer
from nemo_toolplane.acl import PEOPLE_API
from nemo_toolplane.operators import add_operator, issue_operator_token

from .conftest import RunningToolPlane, StartToolPlane
from .mcp_http import error_envelope
from .oauth.conftest import Forger
from .test_approvals import foundry as foundry

#: The people's API as the test authorization server names it in ``aud``.
PEOPLE_AUDIENCE = "http://127.0.0.1/nemo-people"
APP = "nemo12-foundry"
ARGS = {"application_id": APP, "status": "maintenance", "reason": "people tests"}
_SERVICE = admin_pb.DESCRIPTOR.services_by_name["ToolPlaneAdminService"]
_SETTINGS = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
async def people_plane(start_toolplane: StartToolPlane, oauth_server: OAuthServer) -> Any:
    """A tool plane that takes people's access tokens for the people's API from the session's
    authorization server, obtained by its development client (the console's role here)."""
    return await start_toolplane(
        people_issuer=oauth_server.issuer,
        people_audience=PEOPLE_AUDIENCE,
        people_clients=[oauth_server.client_id],
    )


@pytest.fixture(scope="module")
def people_forger(oauth_server: OAuthServer) -> Forger:
    """Signs people's tokens with the server's own key (any subject, client or audience)."""
    return Forger(oauth_server, PEOPLE_AUDIENCE)


@pytest.fixture(scope="module")
async def sara(owner: asyncpg.Connection) -> AsyncIterator[str]:
    """Operator sara, whose own platform account is U-2041-S1; her credential."""
    await add_operator(owner, "sara-p", name="Sara", user_id="U-2041-S1")
    issued = await issue_operator_token(owner, "sara-p", label="tests")
    yield issued.token
    await owner.execute("DELETE FROM toolplane.operators WHERE id = 'sara-p'")


def _request(method: str) -> Any:
    """An empty request of ``method`` of the people's API."""
    return message_factory.GetMessageClass(_SERVICE.methods_by_name[method].input_type)()


async def _refusal(call: Any) -> tuple[grpc.StatusCode, str | None]:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call
    return refused.value.code(), error_details(refused.value).reason


@pytest.mark.parametrize("method", sorted(PEOPLE_API))
@pytest.mark.parametrize("caller", ["operator", "console"])
async def test_a_caller_token_alone_acts_for_nobody(
    people_plane: RunningToolPlane,
    people_forger: Forger,
    owner: asyncpg.Connection,
    method: str,
    caller: str,
) -> None:
    before = await owner.fetchval(
        "SELECT (SELECT count(*) FROM toolplane.agent_tokens) + "
        "(SELECT count(*) FROM toolplane.admin_actions)"
    )
    # No person; an agent token; the edge's token for a person (another audience); a token of
    # a client that may not act for people; a forged operator credential.
    credentials = [
        None,
        "nemo_at_" + "x" * 43,
        people_forger.sign(people_forger.claims(aud="http://127.0.0.1/mcp", sub="U-2041-S1")),
        people_forger.sign(people_forger.claims(sub="U-2041-S1", client_id="some-mcp-host")),
        "nemo_ot_forged",
    ]
    for credential in credentials:
        stub = getattr(people_plane.admin_stub(person=credential, caller=caller), method)
        assert await _refusal(stub(_request(method), timeout=10)) == (
            grpc.StatusCode.UNAUTHENTICATED,
            "OPERATOR_UNAUTHENTICATED",
        )
    after = await owner.fetchval(
        "SELECT (SELECT count(*) FROM toolplane.agent_tokens) + "
        "(SELECT count(*) FROM toolplane.admin_actions)"
    )
    assert after == before


async def test_a_person_who_is_no_operator_acts_only_for_themselves(
    people_plane: RunningToolPlane, oauth_server: OAuthServer, owner: asyncpg.Connection
) -> None:
    tokens = await oauth_server.tokens("U-2041-P1", resource=PEOPLE_AUDIENCE, scopes=["openid"])
    admin = people_plane.admin_stub(person=tokens.access_token, caller="console")
    person = await admin.GetPerson(admin_pb.GetPersonRequest(), timeout=10)
    assert (person.user_id, person.operator_id, person.credential_kind) == (
        "U-2041-P1",
        "",
        "oauth",
    )
    operator_only = sorted(
        PEOPLE_API
        - {
            "GetPerson",
            "DecideApproval",
            "ListLinkedLearners",
            "ListLearnerActivity",
            "ListLearnerApprovals",
            "ListAuthorizations",
            "RevokeAuthorization",
        }
    )
    for method in operator_only:
        assert await _refusal(getattr(admin, method)(_request(method), timeout=10)) == (
            grpc.StatusCode.PERMISSION_DENIED,
            "NOT_AN_OPERATOR",
        )
    recorded = await owner.fetch(
        "SELECT action, outcome, credential_kind FROM toolplane.admin_actions "
        "WHERE person = 'U-2041-P1' ORDER BY id DESC LIMIT $1",
        len(operator_only),
    )
    assert {row["action"] for row in recorded} == set(operator_only)
    assert {(row["outcome"], row["credential_kind"]) for row in recorded} == {
        ("NOT_AN_OPERATOR", "oauth")
    }


async def test_an_operator_signed_in_issues_and_revokes_and_is_recorded(
    people_plane: RunningToolPlane, oauth_server: OAuthServer, owner: asyncpg.Connection
) -> None:
    # Olivia's account is the admin user; her access token proves her, not a caller token.
    await add_operator(owner, "olivia", name="Olivia", user_id="u-2041-a1")
    try:
        tokens = await oauth_server.tokens("U-2041-A1", resource=PEOPLE_AUDIENCE, scopes=["openid"])
        admin = people_plane.admin_stub(person=tokens.access_token, caller="console")
        issued = await admin.IssueAgentToken(
            admin_pb.IssueAgentTokenRequest(agent_id="research-agent", label="tests: olivia"),
            timeout=10,
        )
        await admin.RevokeAgentToken(
            admin_pb.RevokeAgentTokenRequest(token_id=issued.token_id), timeout=10
        )
        row = await owner.fetchrow(
            "SELECT issued_by, revoked_by FROM toolplane.agent_tokens WHERE id = $1",
            issued.token_id,
        )
        assert row is not None
        assert (row["issued_by"], row["revoked_by"]) == ("olivia", "olivia")
        recorded = await owner.fetch(
            "SELECT action, target, outcome, operator_id, user_id, caller, credential_id "
            "FROM toolplane.admin_actions WHERE person = 'olivia' ORDER BY id"
        )
        assert [(r["action"], r["target"], r["outcome"]) for r in recorded] == [
            ("IssueAgentToken", "research-agent", "ok"),
            ("RevokeAgentToken", issued.token_id, "ok"),
        ]
        assert {(r["operator_id"], r["user_id"], r["caller"]) for r in recorded} == {
            ("olivia", "U-2041-A1", "console")
        }
        assert all(r["credential_id"] for r in recorded)
    finally:
        await owner.execute("DELETE FROM toolplane.operators WHERE id = 'olivia'")


def _written_otherwise(data: st.DataObject, user_id: str) -> str:
    """``user_id`` as an agent may write it in a header (visible ASCII) to pass for another
    person: other case, other or no separators, trailing punctuation."""
    out = []
    for char in user_id:
        if char == "-":
            char = data.draw(st.sampled_from(["-", "_", ".", ":", ""]))
        elif char.isalpha():
            char = data.draw(st.sampled_from([char.lower(), char.upper()]))
        out.append(char)
    return "".join(out) + data.draw(st.sampled_from(["", ",", ";", ".", ",,"]))


async def _approval_filed(plane: RunningToolPlane, token: str, **headers: str) -> str:
    async with plane.mcp(token, headers) as client:
        result = await client.call_tool("application.set_status", ARGS)
    error = error_envelope(result)["error"]
    assert error["code"] == "APPROVAL_REQUIRED", error
    return str(error["details"]["approval_id"])


def _approve(approval_id: str) -> admin_pb.DecideApprovalRequest:
    return admin_pb.DecideApprovalRequest(
        approval_id=approval_id, decision=admin_pb.APPROVAL_DECISION_APPROVE
    )


@_SETTINGS
@given(data=st.data())
async def test_nobody_decides_a_call_made_for_them_however_their_id_is_written(
    people_plane: RunningToolPlane,
    sara: str,
    owner: asyncpg.Connection,
    foundry: None,
    data: st.DataObject,
) -> None:
    # Another operator issued the unbound token, so only the user the call names links it to
    # sara (an asserted user counts for this rule as much as a bound one).
    unbound = await people_plane.admin_stub().IssueAgentToken(
        admin_pb.IssueAgentTokenRequest(agent_id="engineering-agent", label="tests: self"),
        timeout=10,
    )
    header = _written_otherwise(data, "U-2041-S1")
    approval_id = await _approval_filed(people_plane, unbound.token, **{"X-Nemo12-User-Id": header})
    decide = people_plane.admin_stub(person=sara).DecideApproval(_approve(approval_id), timeout=10)
    assert await _refusal(decide) == (grpc.StatusCode.PERMISSION_DENIED, "SELF_APPROVAL")
    status = await owner.fetchval(
        "SELECT status FROM toolplane.approvals WHERE id = $1", approval_id
    )
    assert status == "pending"


async def test_nobody_decides_a_call_made_with_a_token_they_issued(
    people_plane: RunningToolPlane, sara: str, owner: asyncpg.Connection, foundry: None
) -> None:
    # Sara holds an unbound token she issued herself: without a user header, or with anyone's,
    # the call is hers to make and another person's to decide.
    mine = await people_plane.admin_stub(person=sara).IssueAgentToken(
        admin_pb.IssueAgentTokenRequest(agent_id="engineering-agent", label="tests: own"),
        timeout=10,
    )
    for headers in ({}, {"X-Nemo12-User-Id": "U-2041-A1"}):
        approval_id = await _approval_filed(people_plane, mine.token, **headers)
        own = people_plane.admin_stub(person=sara).DecideApproval(_approve(approval_id), timeout=10)
        assert await _refusal(own) == (grpc.StatusCode.PERMISSION_DENIED, "SELF_APPROVAL")
        listed = await people_plane.admin_stub().ListApprovals(
            admin_pb.ListApprovalsRequest(status=approval_pb2.APPROVAL_STATUS_PENDING),
            timeout=10,
        )
        [shown] = [a for a in listed.approvals if a.approval_id == approval_id]
        assert shown.token_issued_by == "sara-p"
    # Another operator may.
    decided = await people_plane.admin_stub().DecideApproval(_approve(approval_id), timeout=10)
    assert decided.approval.status == approval_pb2.APPROVAL_STATUS_APPROVED


#: Approval requests per hour of the limited plane.
LIMIT = 3


@pytest.fixture(scope="module")
async def limited_plane(start_toolplane: StartToolPlane) -> RunningToolPlane:
    return await start_toolplane(approval_requests_per_hour=LIMIT)


@settings(_SETTINGS, max_examples=4)
@given(
    names=st.lists(
        st.from_regex(r"U-[0-9]{4}-[A-Z][0-9]{1,3}", fullmatch=True),
        min_size=LIMIT + 3,
        max_size=LIMIT + 3,
        unique=True,
    )
)
async def test_approval_requests_are_limited_per_agent_and_credential_whoever_is_named(
    limited_plane: RunningToolPlane,
    owner: asyncpg.Connection,
    foundry: None,
    names: list[str],
) -> None:
    limited = limited_plane
    unbound = await limited.admin_stub().IssueAgentToken(
        admin_pb.IssueAgentTokenRequest(agent_id="engineering-agent", label="tests: flood"),
        timeout=10,
    )
    outcomes = []
    for n, name in enumerate(names):
        async with limited.mcp(unbound.token, {"X-Nemo12-User-Id": name}) as client:
            result = await client.call_tool(
                "application.set_status", {**ARGS, "reason": f"flood {n}"}
            )
        outcomes.append(error_envelope(result)["error"]["code"])
    assert outcomes == ["APPROVAL_REQUIRED"] * LIMIT + ["RATE_LIMITED"] * (len(names) - LIMIT)
    filed = await owner.fetchval(
        "SELECT count(*) FROM toolplane.approvals WHERE token_id = $1", unbound.token_id
    )
    assert filed == LIMIT


async def test_a_request_nobody_decides_in_time_is_denied(
    start_toolplane: StartToolPlane,
    owner: asyncpg.Connection,
    foundry: None,
    sara: str,
) -> None:
    plane = await start_toolplane(approval_decide_seconds=1)
    token = await plane.admin_stub().IssueAgentToken(
        admin_pb.IssueAgentTokenRequest(agent_id="engineering-agent", label="tests: late"),
        timeout=10,
    )
    approval_id = await _approval_filed(plane, token.token)
    row = await owner.fetchrow(
        "SELECT decide_by - created_at AS to_decide, expires_at - created_at AS usable "
        "FROM toolplane.approvals WHERE id = $1",
        approval_id,
    )
    assert row is not None
    assert row["to_decide"].total_seconds() == pytest.approx(1, abs=0.01)
    assert row["usable"].total_seconds() == pytest.approx(3600, abs=0.01)
    await owner.execute(
        "UPDATE toolplane.approvals SET decide_by = now() - interval '1 ms' WHERE id = $1",
        approval_id,
    )
    late = plane.admin_stub(person=sara).DecideApproval(_approve(approval_id), timeout=10)
    assert await _refusal(late) == (grpc.StatusCode.FAILED_PRECONDITION, "APPROVAL_NOT_PENDING")
    listed = await plane.admin_stub().ListApprovals(
        admin_pb.ListApprovalsRequest(status=approval_pb2.APPROVAL_STATUS_DENIED), timeout=10
    )
    assert approval_id in {a.approval_id for a in listed.approvals}
    # The call does not run on a denied request: it asks again.
    assert await _approval_filed(plane, token.token) != approval_id
    assert (
        await owner.fetchval("SELECT status FROM toolplane.applications WHERE id = $1", APP)
        == "active"
    )
