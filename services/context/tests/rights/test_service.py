"""RightsService through a real server: the platform records a person's request about a
learner; the context service's access rules decide who may ask; restriction and erasure block
the learner at once."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable

import grpc
import grpc.aio
import pytest

from nemo_context.rights.retention import RETENTION
from nemo_core.db import Connection, connect
from nemo_core.errors import error_details
from nemo_protos.context.v1 import rights_service_pb2 as pb
from nemo_protos.context.v1 import rights_service_pb2_grpc as pb_grpc
from services.context.tests.conftest import RunningContextServer, StartContextServer
from services.context.tests.rights.test_blocks import MASTER_KEY, eventually_refused

TIMEOUT = 10.0


@pytest.fixture
async def server(start_context_server: StartContextServer) -> RunningContextServer:
    return await start_context_server(snapshot_master_key=MASTER_KEY)


class Rights:
    """RightsService as one caller calls it, each call with the test's deadline."""

    def __init__(self, server: RunningContextServer, caller: str) -> None:
        self._stub = pb_grpc.RightsServiceStub(server.channel(caller))

    def ListRetention(
        self, request: pb.ListRetentionRequest
    ) -> Awaitable[pb.ListRetentionResponse]:
        return self._stub.ListRetention(request, timeout=TIMEOUT)

    def SubmitRightsRequest(
        self, request: pb.SubmitRightsRequestRequest
    ) -> Awaitable[pb.SubmitRightsRequestResponse]:
        return self._stub.SubmitRightsRequest(request, timeout=TIMEOUT)

    def GetRightsRequest(
        self, request: pb.GetRightsRequestRequest
    ) -> Awaitable[pb.GetRightsRequestResponse]:
        return self._stub.GetRightsRequest(request, timeout=TIMEOUT)


def rights(server: RunningContextServer, caller: str = "platform") -> Rights:
    return Rights(server, caller)


@pytest.fixture
async def family(owner_dsn: str) -> AsyncIterator[dict[str, str]]:
    """A learner of its own, with a parent, a guardian, a mentor and an outsider."""
    tag = secrets.token_hex(4)
    people = {
        "learner": f"L-{tag}-1",
        "parent": f"U-{tag}-P1",
        "guardian": f"U-{tag}-G1",
        "mentor": f"U-{tag}-M1",
        "outsider": f"U-{tag}-X1",
    }
    conn = await connect(owner_dsn)
    family_id = f"F-{tag}-1"
    for role, user in (
        ("parent", "parent"),
        ("parent", "guardian"),
        ("mentor", "mentor"),
        ("parent", "outsider"),
    ):
        await conn.execute(
            "INSERT INTO learning.users (id, role) VALUES ($1, $2)", people[user], role
        )
    await conn.execute("INSERT INTO learning.families (id, name) VALUES ($1, 'Lê')", family_id)
    await conn.execute(
        "INSERT INTO learning.family_members (family_id, user_id, relation)"
        " VALUES ($1, $2, 'owner')",
        family_id, people["parent"],
    )  # fmt: skip
    await conn.execute(
        "INSERT INTO learning.learners (id, family_id, grade) VALUES ($1, $2, 5)",
        people["learner"], family_id,
    )  # fmt: skip
    await conn.execute(
        "INSERT INTO learning.guardians (learner_id, user_id) VALUES ($1, $2)",
        people["learner"], people["guardian"],
    )  # fmt: skip
    await conn.execute(
        "INSERT INTO learning.mentor_assignments (mentor_user_id, learner_id, status)"
        " VALUES ($1, $2, 'active')",
        people["mentor"], people["learner"],
    )  # fmt: skip
    yield people
    await _forget(conn, people, family_id)
    await conn.close()


async def _forget(conn: Connection, people: dict[str, str], family_id: str) -> None:
    await conn.execute(
        "DELETE FROM rights.blocks WHERE request_id IN"
        " (SELECT id FROM rights.requests WHERE requested_by = ANY($1::text[]))",
        list(people.values()),
    )
    await conn.execute(
        "DELETE FROM rights.requests WHERE requested_by = ANY($1::text[])", list(people.values())
    )
    await conn.execute("DELETE FROM learning.learners WHERE id = $1", people["learner"])
    await conn.execute("DELETE FROM learning.families WHERE id = $1", family_id)
    await conn.execute(
        "DELETE FROM learning.users WHERE id = ANY($1::text[])", list(people.values())
    )


def submit(
    learner: str,
    by: str,
    kind: pb.RightsKind.ValueType = pb.RIGHTS_KIND_RESTRICTION,
    request_id: str = "",
) -> pb.SubmitRightsRequestRequest:
    return pb.SubmitRightsRequestRequest(
        request_id=request_id or f"T-{secrets.token_hex(4)}",
        kind=kind,
        learner_id=learner,
        requested_by=by,
    )


async def refused(call: Awaitable[object]) -> tuple[grpc.StatusCode, str | None]:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    details = error_details(raised.value)
    return details.code, details.reason


async def test_the_retention_table_is_served(server: RunningContextServer) -> None:
    for caller in ("platform", "audit"):
        table = await rights(server, caller).ListRetention(pb.ListRetentionRequest())
        assert [rule.store for rule in table.rules] == [rule.store for rule in RETENTION]
        assert all(rule.purpose and rule.period and rule.on_erasure for rule in table.rules)


async def test_a_parent_restricts_and_the_learner_is_blocked_at_once(
    server: RunningContextServer, family: dict[str, str]
) -> None:
    request = submit(family["learner"], family["parent"])
    recorded = (await rights(server).SubmitRightsRequest(request)).request
    assert recorded.state == pb.RIGHTS_STATE_IN_EFFECT
    assert recorded.requested_by == family["parent"]
    assert recorded.HasField("acknowledge_time")  # the answer is the acknowledgement
    received = recorded.receive_time.ToDatetime()
    assert 2 <= (recorded.acknowledge_deadline.ToDatetime() - received).days <= 4
    assert (recorded.complete_deadline.ToDatetime() - received).days == 15
    assert await eventually_refused(server, family["learner"]) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "LEARNER_RESTRICTED",
    )
    # The same request again is the same request; its id for another kind is refused.
    again = (await rights(server).SubmitRightsRequest(request)).request
    assert again.request_id == recorded.request_id
    assert again.receive_time == recorded.receive_time
    other_kind = submit(
        family["learner"], family["parent"], pb.RIGHTS_KIND_EXPORT, request.request_id
    )
    assert await refused(rights(server).SubmitRightsRequest(other_kind)) == (
        grpc.StatusCode.ALREADY_EXISTS,
        "REQUEST_ID_CONFLICT",
    )
    read = await rights(server).GetRightsRequest(
        pb.GetRightsRequestRequest(request_id=request.request_id, requested_by=family["parent"])
    )
    assert read.request == again
    someone_else = pb.GetRightsRequestRequest(
        request_id=request.request_id, requested_by=family["outsider"]
    )
    assert await refused(rights(server).GetRightsRequest(someone_else)) == (
        grpc.StatusCode.NOT_FOUND,
        "RIGHTS_REQUEST_NOT_FOUND",
    )


async def test_the_access_rules_decide_who_may_ask(
    server: RunningContextServer, family: dict[str, str]
) -> None:
    for person in ("guardian", "parent"):
        export = submit(family["learner"], family[person], pb.RIGHTS_KIND_EXPORT)
        assert (await rights(server).SubmitRightsRequest(export)).request.state == (
            pb.RIGHTS_STATE_ACKNOWLEDGED
        )
    staff = submit(family["learner"], "U-2041-S1", pb.RIGHTS_KIND_EXPORT)
    assert (await rights(server).SubmitRightsRequest(staff)).request.request_id
    for person in (family["mentor"], family["outsider"], "nobody-12", ""):
        asked = submit(family["learner"], person, pb.RIGHTS_KIND_ERASURE)
        assert await refused(rights(server).SubmitRightsRequest(asked)) == (
            grpc.StatusCode.PERMISSION_DENIED,
            "LEARNER_OUT_OF_REACH",
        )
    # A learner that does not exist gets the same answer as one out of reach.
    missing = submit("L-0000-missing-1", family["parent"])
    assert await refused(rights(server).SubmitRightsRequest(missing)) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "LEARNER_OUT_OF_REACH",
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"learner_id": "L 1"}, "INVALID_LEARNER_ID"),
        ({"request_id": "a"}, "INVALID_REQUEST_ID"),
        ({"request_id": "ticket/1"}, "INVALID_REQUEST_ID"),
        ({"kind": pb.RIGHTS_KIND_UNSPECIFIED}, "INVALID_RIGHTS_KIND"),
    ],
)
async def test_bad_requests_are_refused_with_their_reason(
    server: RunningContextServer, family: dict[str, str], change: dict[str, object], reason: str
) -> None:
    request = submit(family["learner"], family["parent"])
    for name, value in change.items():
        setattr(request, name, value)
    assert await refused(rights(server).SubmitRightsRequest(request)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        reason,
    )


async def test_only_the_platform_records_requests(server: RunningContextServer) -> None:
    for caller in ("gateway", "toolplane", "audit"):
        code, reason = await refused(
            rights(server, caller).SubmitRightsRequest(submit("L-2041-1", "U-2041-P1"))
        )
        assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "CALLER_NOT_ALLOWED")
