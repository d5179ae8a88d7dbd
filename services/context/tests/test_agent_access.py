"""Agent views are authorized by the context service itself, in the transaction that reads them:
who the agent acts for and where that user came from decide, and a learner out of reach looks
exactly like one that does not exist (answer, rule and the statements that ran)."""

from __future__ import annotations

import grpc
import grpc.aio
import pytest
from asyncpg.connection import LoggedQuery

from nemo_context.access import reach_of
from nemo_context.builder import ContextBuilder
from nemo_context.pseudonym import Pseudonymizer
from nemo_context.purposes import PURPOSES
from nemo_context.repository import PostgresLearnerRepository
from nemo_core.db import Pool
from nemo_core.errors import ServiceError, error_details
from nemo_protos.context.v1 import context_service_pb2 as pb
from nemo_protos.type.v1 import locale_pb2
from nemo_protos.type.v1 import user_source_pb2 as us

from .conftest import TEST_IDENTIFIER_KEY, RunningContextServer

TIMEOUT = 10.0
VIEW = "profile"


def _request(
    learner_id: str, user_id: str, source: us.UserSource.ValueType, *scopes: str
) -> pb.BuildContextRequest:
    return pb.BuildContextRequest(
        learner_id=learner_id,
        purpose=VIEW,
        agent_access=pb.AgentAccess(
            user_id=user_id, user_source=source, resource_scopes=list(scopes or ["user"])
        ),
    )


async def _refusal(
    server: RunningContextServer, request: pb.BuildContextRequest
) -> tuple[grpc.StatusCode, str | None, str, dict[str, str]]:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await server.stub("toolplane").BuildContext(request, timeout=TIMEOUT)
    details = error_details(refused.value)
    return details.code, details.reason, refused.value.details() or "", dict(details.metadata)


@pytest.mark.parametrize(
    ("user", "source", "learner"),
    [
        ("U-2041-P1", us.USER_SOURCE_TOKEN, "L-2041-1"),  # a parent of L-2041-1
        ("U-2041-P1", us.USER_SOURCE_CALLER, "L-2041-3"),  # vouched for by a trusted caller
        ("U-2041-S1", us.USER_SOURCE_TOKEN, "L-2041-2"),  # staff, bound to the token
        ("U-2041-M1", us.USER_SOURCE_TOKEN, "L-2041-1"),  # mentor with an active assignment
    ],
)
async def test_a_user_the_agent_cannot_choose_reaches_their_learners(
    context_server: RunningContextServer,
    user: str,
    source: us.UserSource.ValueType,
    learner: str,
) -> None:
    request = _request(learner, user, source)
    response = await context_server.stub("toolplane").BuildContext(request, timeout=TIMEOUT)
    assert response.bundle.purpose == VIEW
    assert response.bundle.profile.grade > 0


@pytest.mark.parametrize(
    "source", [us.USER_SOURCE_ASSERTED, us.USER_SOURCE_UNSPECIFIED, us.USER_SOURCE_NONE]
)
@pytest.mark.parametrize("user", ["U-2041-S1", "U-2041-A1", "U-2041-P2", "U-2041-P1"])
async def test_a_user_the_agent_named_itself_reads_nobody(
    context_server: RunningContextServer, user: str, source: us.UserSource.ValueType
) -> None:
    # Staff, administrators, another family's parent, even the learner's own parent.
    code, reason, _, metadata = await _refusal(context_server, _request("L-2041-1", user, source))
    assert (code, reason, metadata) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "LEARNER_OUT_OF_REACH",
        {"rule": "user_not_vouched"},
    )


@pytest.mark.parametrize(
    ("user", "source", "scopes"),
    [
        ("U-2041-P1", us.USER_SOURCE_TOKEN, ("user",)),
        ("U-2041-P1", us.USER_SOURCE_ASSERTED, ("user",)),
        ("", us.USER_SOURCE_NONE, ("user",)),
        ("U-2041-P1", us.USER_SOURCE_TOKEN, ("family:F-2041-1", "learner:L-2041-1")),
        ("U-2041-P1", us.USER_SOURCE_TOKEN, ("user", "family:F-2041-1")),
    ],
)
async def test_a_foreign_learner_and_a_missing_one_get_the_same_refusal(
    context_server: RunningContextServer,
    user: str,
    source: us.UserSource.ValueType,
    scopes: tuple[str, ...],
) -> None:
    foreign = await _refusal(context_server, _request("L-2041-2", user, source, *scopes))
    missing = await _refusal(context_server, _request("L-2041-404", user, source, *scopes))
    assert foreign[:2] == (grpc.StatusCode.PERMISSION_DENIED, "LEARNER_OUT_OF_REACH")
    assert missing == foreign


async def test_the_same_statements_run_for_a_foreign_and_a_missing_learner(
    recorded_pool: tuple[Pool, list[LoggedQuery]],
) -> None:
    pool, statements = recorded_pool
    builder = ContextBuilder(
        PostgresLearnerRepository(pool, identifier_key=TEST_IDENTIFIER_KEY),
        Pseudonymizer(b"k" * 32),
    )
    reach = reach_of("U-2041-P1", us.USER_SOURCE_TOKEN, ["user"])
    ran: dict[str, list[str]] = {}
    refused: dict[str, ServiceError] = {}
    for learner in ("L-2041-2", "L-2041-404"):
        statements.clear()
        with pytest.raises(ServiceError) as caught:
            await builder.build(learner, PURPOSES[VIEW], locale_pb2.LOCALE_VI, reach=reach)
        refused[learner] = caught.value
        ran[learner] = [statement.query for statement in statements]
        # Access is decided before the view's data is read: nothing of it is read.
        assert not [q for q in ran[learner] if "learner_age_years" in q]
    assert ran["L-2041-2"] == ran["L-2041-404"]
    assert repr(refused["L-2041-2"]) == repr(refused["L-2041-404"])
    assert refused["L-2041-2"].metadata == refused["L-2041-404"].metadata


async def test_access_and_data_are_read_in_one_transaction(
    recorded_pool: tuple[Pool, list[LoggedQuery]],
) -> None:
    pool, statements = recorded_pool
    builder = ContextBuilder(
        PostgresLearnerRepository(pool, identifier_key=TEST_IDENTIFIER_KEY),
        Pseudonymizer(b"k" * 32),
    )
    reach = reach_of("U-2041-P1", us.USER_SOURCE_TOKEN, ["user"])
    statements.clear()
    await builder.build("L-2041-1", PURPOSES[VIEW], locale_pb2.LOCALE_VI, reach=reach)
    queries = [statement.query for statement in statements]
    assert queries[0].startswith("BEGIN")
    facts = next(i for i, q in enumerate(queries) if "mentor_assignments AS a" in q)
    data = next(i for i, q in enumerate(queries) if "learner_age_years" in q)
    assert 0 < facts < data
    assert not any(q.startswith(("BEGIN", "COMMIT")) for q in queries[1:data])
    assert statements[facts].args == ("L-2041-1", "U-2041-P1")


@pytest.mark.parametrize(
    ("caller", "purpose", "access", "reason"),
    [
        ("toolplane", VIEW, None, "AGENT_ACCESS_REQUIRED"),
        ("toolplane", VIEW, pb.AgentAccess(user_id="U-2041-P1"), "AGENT_ACCESS_REQUIRED"),
        (
            "toolplane",
            VIEW,
            pb.AgentAccess(user_id="U-2041-P1", resource_scopes=["users"]),
            "INVALID_RESOURCE_SCOPE",
        ),
        (
            "gateway",
            "tutor_hint",
            pb.AgentAccess(user_id="U-2041-P1", resource_scopes=["*"]),
            "AGENT_ACCESS_NOT_APPLICABLE",
        ),
    ],
)
async def test_agent_access_is_required_exactly_for_agent_views(
    context_server: RunningContextServer,
    caller: str,
    purpose: str,
    access: pb.AgentAccess | None,
    reason: str,
) -> None:
    request = pb.BuildContextRequest(learner_id="L-2041-1", purpose=purpose)
    if access is not None:
        request.agent_access.CopyFrom(access)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await context_server.stub(caller).BuildContext(request, timeout=TIMEOUT)
    details = error_details(refused.value)
    assert (details.code, details.reason) == (grpc.StatusCode.INVALID_ARGUMENT, reason)
