"""CheckLearnerAccess, CheckUser, SearchKnowledge and GetKnowledgeNode through a real server."""

from __future__ import annotations

import grpc
import grpc.aio
import pytest

from nemo_core.errors import error_details
from nemo_ops.seed_data.people import USERS
from nemo_protos.context.v1 import context_service_pb2 as pb
from nemo_protos.type.v1 import user_source_pb2

from .conftest import RunningContextServer

TIMEOUT = 10.0


async def test_the_tool_plane_checks_access(context_server: RunningContextServer) -> None:
    stub = context_server.stub("toolplane")
    token = user_source_pb2.USER_SOURCE_TOKEN
    allowed = await stub.CheckLearnerAccess(
        pb.CheckLearnerAccessRequest(
            user_id="U-2041-M1", learner_id="L-2041-1", resource_scope="user", user_source=token
        ),
        timeout=TIMEOUT,
    )
    assert (allowed.allowed, allowed.basis) == (True, pb.ACCESS_BASIS_MENTOR)
    denied = await stub.CheckLearnerAccess(
        pb.CheckLearnerAccessRequest(
            user_id="U-2041-M2", learner_id="L-2041-2", resource_scope="user", user_source=token
        ),
        timeout=TIMEOUT,
    )
    assert (denied.allowed, denied.basis, denied.refusal_rule) == (
        False,
        pb.ACCESS_BASIS_UNSPECIFIED,
        "no_relation",
    )
    # The same mentor named by the caller instead of a token reaches nothing.
    asserted = await stub.CheckLearnerAccess(
        pb.CheckLearnerAccessRequest(
            user_id="U-2041-M1", learner_id="L-2041-1", resource_scope="user"
        ),
        timeout=TIMEOUT,
    )
    assert (asserted.allowed, asserted.refusal_rule) == (False, "user_not_vouched")
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.CheckLearnerAccess(
            pb.CheckLearnerAccessRequest(
                user_id="U-2041-M1", learner_id="L-2041-1", resource_scope="all"
            ),
            timeout=TIMEOUT,
        )
    details = error_details(raised.value)
    assert (details.code, details.reason, details.domain) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_RESOURCE_SCOPE",
        "context",
    )


async def test_only_the_tool_plane_checks_access(context_server: RunningContextServer) -> None:
    request = pb.CheckLearnerAccessRequest(
        user_id="U-2041-S1", learner_id="L-2041-1", resource_scope="*"
    )
    for caller in ("gateway", "audit"):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await context_server.stub(caller).CheckLearnerAccess(request, timeout=TIMEOUT)
        assert error_details(raised.value).reason == "CALLER_NOT_ALLOWED"


async def test_knowledge_for_the_gateway_and_the_tool_plane(
    context_server: RunningContextServer,
) -> None:
    for caller in ("gateway", "toolplane"):
        stub = context_server.stub(caller)
        found = await stub.SearchKnowledge(
            pb.SearchKnowledgeRequest(query="he so goc", limit=3), timeout=TIMEOUT
        )
        assert found.hits[0].node.title == "Hệ số góc"
        assert len(found.hits) <= 3
        node = await stub.GetKnowledgeNode(
            pb.GetKnowledgeNodeRequest(node_id="math-09-quadratic-equations"), timeout=TIMEOUT
        )
        assert node.node.title == "Phương trình bậc hai"
        assert {edge.from_node_id for edge in node.edges} == {
            "math-08-factorization",
            "math-08-linear-equations",
            "math-09-square-roots",
        }


async def test_knowledge_errors_on_the_wire(context_server: RunningContextServer) -> None:
    stub = context_server.stub("toolplane")
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await stub.GetKnowledgeNode(
            pb.GetKnowledgeNodeRequest(node_id="math-99-nothing"), timeout=TIMEOUT
        )
    assert (error_details(missing.value).code, error_details(missing.value).reason) == (
        grpc.StatusCode.NOT_FOUND,
        "KNOWLEDGE_NODE_NOT_FOUND",
    )
    with pytest.raises(grpc.aio.AioRpcError) as too_many:
        await stub.SearchKnowledge(
            pb.SearchKnowledgeRequest(query="he so goc", limit=500), timeout=TIMEOUT
        )
    assert error_details(too_many.value).reason == "INVALID_LIMIT"


async def test_the_tool_plane_checks_that_a_user_exists_and_only_the_tool_plane_may(
    context_server: RunningContextServer,
) -> None:
    stub = context_server.stub("toolplane")
    for row in USERS.rows:
        answer = await stub.CheckUser(pb.CheckUserRequest(user_id=str(row["id"])), timeout=TIMEOUT)
        assert answer.exists, row["id"]
    # Well-formed ids nobody holds, ids no key can be, and nothing at all name no user.
    for nobody in ("U-2041-P9", "U-9999-X1", "L-2041-1", "", "u-2041-p1", "U-2041-P1 ", "x" * 300):
        answer = await stub.CheckUser(pb.CheckUserRequest(user_id=nobody), timeout=TIMEOUT)
        assert not answer.exists, nobody
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await context_server.stub("gateway").CheckUser(
            pb.CheckUserRequest(user_id="U-2041-P1"), timeout=TIMEOUT
        )
    assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
