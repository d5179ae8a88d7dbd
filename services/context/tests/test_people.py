"""People at the context service: the learners linked to a person are exactly those the access
rules let them reach in person; a pseudonym resolves only for someone who may reach its learner;
the console reads a snapshot and records a rights request only for the person whose verified
access token it carries, within what that person may reach."""

from __future__ import annotations

import itertools
import secrets

import grpc
import grpc.aio
import pytest

from nemo_core.db import connect
from nemo_core.errors import error_details
from nemo_protos.context.v1 import context_service_pb2 as pb
from nemo_protos.context.v1 import rights_service_pb2 as rights_pb
from nemo_protos.context.v1 import rights_service_pb2_grpc as rights_grpc
from nemo_protos.type.v1 import user_source_pb2
from nemo_testing.oauth import OAuthServer
from services.context.tests.conftest import RunningContextServer, StartContextServer
from services.context.tests.rights.test_blocks import MASTER_KEY

PEOPLE_AUDIENCE = "http://127.0.0.1/nemo-people"
TIMEOUT = 10.0
#: The "user" scope's bases that link a person to a learner in person (not staff's).
PERSONAL = {
    pb.ACCESS_BASIS_SELF: pb.LEARNER_RELATION_SELF,
    pb.ACCESS_BASIS_FAMILY_MEMBER: pb.LEARNER_RELATION_FAMILY_MEMBER,
    pb.ACCESS_BASIS_GUARDIAN: pb.LEARNER_RELATION_GUARDIAN,
    pb.ACCESS_BASIS_MENTOR: pb.LEARNER_RELATION_MENTOR,
}


@pytest.fixture(scope="module")
async def people_server(
    start_context_server: StartContextServer, oauth_server: OAuthServer
) -> RunningContextServer:
    return await start_context_server(
        people_issuer=oauth_server.issuer,
        people_audience=PEOPLE_AUDIENCE,
        people_clients=[oauth_server.client_id],
        snapshot_master_key=MASTER_KEY,
    )


@pytest.fixture(scope="module")
async def population(owner_dsn: str) -> tuple[list[str], list[str]]:
    """Every seeded user and learner."""
    conn = await connect(owner_dsn)
    try:
        users = [row["id"] for row in await conn.fetch("SELECT id FROM learning.users ORDER BY id")]
        learners = [
            row["id"] for row in await conn.fetch("SELECT id FROM learning.learners ORDER BY id")
        ]
    finally:
        await conn.close()
    return users, learners


async def _basis(server: RunningContextServer, user: str, learner: str) -> pb.AccessBasis.ValueType:
    answer = await server.stub("toolplane").CheckLearnerAccess(
        pb.CheckLearnerAccessRequest(
            user_id=user,
            learner_id=learner,
            resource_scope="user",
            user_source=user_source_pb2.USER_SOURCE_TOKEN,
        ),
        timeout=TIMEOUT,
    )
    return answer.basis


async def _refs(server: RunningContextServer, learners: list[str]) -> dict[str, str]:
    """Each learner's pseudonym, as a bundle of an agent view names it."""
    refs = {}
    for learner in learners:
        built = await server.stub("toolplane").BuildContext(
            pb.BuildContextRequest(
                learner_id=learner,
                purpose="profile",
                agent_access=pb.AgentAccess(resource_scopes=["*"]),
            ),
            timeout=TIMEOUT,
        )
        refs[learner] = built.bundle.learner_ref
    return refs


async def test_the_learners_linked_to_a_person_are_those_the_access_rules_let_them_reach(
    people_server: RunningContextServer, population: tuple[list[str], list[str]]
) -> None:
    users, learners = population
    refs = await _refs(people_server, learners)
    for user in users:
        listed = await people_server.stub("toolplane").ListLinkedLearners(
            pb.ListLinkedLearnersRequest(user_id=user), timeout=TIMEOUT
        )
        expected = {}
        for learner in learners:
            basis = await _basis(people_server, user, learner)
            if basis in PERSONAL:
                expected[refs[learner]] = PERSONAL[basis]
        assert {linked.learner_ref: linked.relation for linked in listed.learners} == expected, user
        assert [linked.learner_ref for linked in listed.learners] == sorted(expected)
        assert all(1 <= linked.grade <= 12 for linked in listed.learners)


async def test_a_pseudonym_resolves_only_for_someone_who_may_reach_its_learner(
    people_server: RunningContextServer, population: tuple[list[str], list[str]]
) -> None:
    users, learners = population
    refs = await _refs(people_server, learners)
    unknown = "nemo_" + secrets.token_hex(12)
    for user, learner in itertools.product(users, learners):
        basis = await _basis(people_server, user, learner)
        request = pb.ResolveLearnerRefRequest(learner_ref=refs[learner], user_id=user)
        if basis == pb.ACCESS_BASIS_UNSPECIFIED:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await people_server.stub("toolplane").ResolveLearnerRef(request, timeout=TIMEOUT)
            assert error_details(refused.value).reason == "LEARNER_OUT_OF_REACH"
            continue
        resolved = await people_server.stub("toolplane").ResolveLearnerRef(request, timeout=TIMEOUT)
        assert resolved.learner_id == learner
        assert resolved.relation == PERSONAL.get(basis, pb.LEARNER_RELATION_UNSPECIFIED)
    for user in users:
        # A pseudonym no learner has gets the same answer as one out of reach.
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await people_server.stub("toolplane").ResolveLearnerRef(
                pb.ResolveLearnerRefRequest(learner_ref=unknown, user_id=user), timeout=TIMEOUT
            )
        assert error_details(missing.value).reason == "LEARNER_OUT_OF_REACH"
    for bad in ("", "nemo_", "nemo_xyz", "L-2041-1", refs[learners[0]].upper(), unknown + "0"):
        with pytest.raises(grpc.aio.AioRpcError) as invalid:
            await people_server.stub("toolplane").ResolveLearnerRef(
                pb.ResolveLearnerRefRequest(learner_ref=bad, user_id=users[0]), timeout=TIMEOUT
            )
        assert error_details(invalid.value).reason == "INVALID_LEARNER_REF"


def _as(token: str | None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token else ()


async def test_the_console_reads_a_snapshot_only_for_a_person_who_may_reach_its_learner(
    people_server: RunningContextServer, oauth_server: OAuthServer
) -> None:
    snapshots = {}
    for learner in ("L-2041-1", "L-2041-2"):
        built = await people_server.stub("toolplane").BuildContext(
            pb.BuildContextRequest(
                learner_id=learner,
                purpose="profile",
                persist=True,
                agent_access=pb.AgentAccess(resource_scopes=["*"]),
            ),
            timeout=TIMEOUT,
        )
        snapshots[learner] = built.bundle.input_ref
    parent = await oauth_server.tokens("U-2041-P1", resource=PEOPLE_AUDIENCE, scopes=["openid"])
    staff = await oauth_server.tokens("U-2041-S1", resource=PEOPLE_AUDIENCE, scopes=["openid"])
    console = people_server.stub("console")
    own = await console.GetSnapshot(
        pb.GetSnapshotRequest(input_ref=snapshots["L-2041-1"]),
        metadata=_as(parent.access_token),
        timeout=TIMEOUT,
    )
    assert own.bundle.learner_ref
    assert len(own.sha256) == 64
    # Another family's child: refused, not an empty answer.
    with pytest.raises(grpc.aio.AioRpcError) as other:
        await console.GetSnapshot(
            pb.GetSnapshotRequest(input_ref=snapshots["L-2041-2"]),
            metadata=_as(parent.access_token),
            timeout=TIMEOUT,
        )
    assert (other.value.code(), error_details(other.value).reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "LEARNER_OUT_OF_REACH",
    )
    seen = await console.GetSnapshot(
        pb.GetSnapshotRequest(input_ref=snapshots["L-2041-2"]),
        metadata=_as(staff.access_token),
        timeout=TIMEOUT,
    )
    assert seen.sha256
    # The console's caller token alone is nobody; an edge token is no person's.
    edge = await oauth_server.tokens(
        "U-2041-P1", resource="http://127.0.0.1/mcp", scopes=["openid"]
    )
    for credential in (None, edge.access_token, "nemo_at_x"):
        with pytest.raises(grpc.aio.AioRpcError) as nobody:
            await console.GetSnapshot(
                pb.GetSnapshotRequest(input_ref=snapshots["L-2041-1"]),
                metadata=_as(credential),
                timeout=TIMEOUT,
            )
        assert (nobody.value.code(), error_details(nobody.value).reason) == (
            grpc.StatusCode.UNAUTHENTICATED,
            "PERSON_UNAUTHENTICATED",
        )
    # The audit caller reads as before, with no person.
    audited = await people_server.stub("audit").GetSnapshot(
        pb.GetSnapshotRequest(input_ref=snapshots["L-2041-2"]), timeout=TIMEOUT
    )
    assert audited.sha256 == seen.sha256


async def test_the_console_records_a_rights_request_for_the_signed_in_person_only(
    people_server: RunningContextServer, oauth_server: OAuthServer
) -> None:
    refs = await _refs(people_server, ["L-2041-1", "L-2041-2"])
    parent = await oauth_server.tokens("U-2041-P2", resource=PEOPLE_AUDIENCE, scopes=["openid"])
    console = rights_grpc.RightsServiceStub(people_server.channel("console"))
    request_id = f"CONSOLE-{secrets.token_hex(4)}"
    submitted = await console.SubmitRightsRequest(
        rights_pb.SubmitRightsRequestRequest(
            request_id=request_id,
            kind=rights_pb.RIGHTS_KIND_EXPORT,
            learner_ref=refs["L-2041-2"],
        ),
        metadata=_as(parent.access_token),
        timeout=TIMEOUT,
    )
    assert submitted.request.requested_by == "U-2041-P2"
    listed = await console.ListRightsRequests(
        rights_pb.ListRightsRequestsRequest(learner_ref=refs["L-2041-2"]),
        metadata=_as(parent.access_token),
        timeout=TIMEOUT,
    )
    assert [made.request_id for made in listed.requests] == [request_id]
    refused = [
        # Another family's child.
        (rights_pb.SubmitRightsRequestRequest(
            request_id=f"{request_id}-b", kind=rights_pb.RIGHTS_KIND_ERASURE,
            learner_ref=refs["L-2041-1"]), "LEARNER_OUT_OF_REACH"),
        # In someone else's name.
        (rights_pb.SubmitRightsRequestRequest(
            request_id=f"{request_id}-c", kind=rights_pb.RIGHTS_KIND_EXPORT,
            learner_ref=refs["L-2041-2"], requested_by="U-2041-G2"), "LEARNER_OUT_OF_REACH"),
        (rights_pb.SubmitRightsRequestRequest(
            request_id=f"{request_id}-d", kind=rights_pb.RIGHTS_KIND_EXPORT,
            learner_ref="L-2041-2"), "INVALID_LEARNER_REF"),
    ]  # fmt: skip
    for request, reason in refused:
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await console.SubmitRightsRequest(
                request, metadata=_as(parent.access_token), timeout=TIMEOUT
            )
        assert error_details(error.value).reason == reason
    with pytest.raises(grpc.aio.AioRpcError) as nobody:
        await console.ListRightsRequests(
            rights_pb.ListRightsRequestsRequest(learner_ref=refs["L-2041-2"]), timeout=TIMEOUT
        )
    assert error_details(nobody.value).reason == "PERSON_UNAUTHENTICATED"
