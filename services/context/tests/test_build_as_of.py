"""BuildContext as of an evaluation time: the same request with the same ``evaluate_time``
builds the same bundle, whatever is recorded after it; built without one, the later records are
read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import grpc
import grpc.aio
import pytest
from google.protobuf import timestamp_pb2

from nemo_core.db import connect
from nemo_core.errors import error_details
from nemo_protos.context.v1 import context_service_pb2 as pb
from nemo_protos.context.v1 import learner_context_pb2

from .conftest import PARENT, RunningContextServer

TIMEOUT = 10.0
# A day after the seeded demo data.
AS_OF = datetime(2026, 11, 24, 8, tzinfo=UTC)
LATER = AS_OF + timedelta(hours=1)


@asynccontextmanager
async def _later_records(owner_dsn: str) -> AsyncIterator[None]:
    """An answer of L-2041-1 and a new version of each of its computed models, recorded after
    AS_OF; removed afterwards."""
    conn = await connect(owner_dsn)
    try:
        node = await conn.fetchval(
            "SELECT node_id FROM learning.mastery WHERE learner_id = 'L-2041-1' ORDER BY node_id"
        )
        await conn.execute(
            "INSERT INTO learning.evidence (id, learner_id, node_id, correct, reliability,"
            " created_at) VALUES ('E-AS-OF', 'L-2041-1', $1, false, 0.9, $2)",
            node,
            LATER,
        )
        await conn.execute(
            "INSERT INTO learning.learner_model_versions"
            " (learner_id, kind, version, model_json, engine_version, computed_at)"
            " SELECT DISTINCT ON (kind) learner_id, kind, version + 1, model_json, 'later', $1"
            " FROM learning.learner_model_versions WHERE learner_id = 'L-2041-1'"
            " ORDER BY kind, version DESC",
            LATER,
        )
        yield
    finally:
        await conn.execute("DELETE FROM learning.evidence WHERE id = 'E-AS-OF'")
        await conn.execute(
            "DELETE FROM learning.learner_model_versions WHERE engine_version = 'later'"
        )
        await conn.close()


async def _build(
    server: RunningContextServer, caller: str, purpose: str, when: datetime | None
) -> learner_context_pb2.ContextBundle:
    request = pb.BuildContextRequest(learner_id="L-2041-1", purpose=purpose)
    if caller == "toolplane":
        request.agent_access.CopyFrom(PARENT)
    if when is not None:
        request.evaluate_time.FromDatetime(when)
    response = await server.stub(caller).BuildContext(request, timeout=TIMEOUT)
    return response.bundle


def _content(bundle: learner_context_pb2.ContextBundle) -> bytes:
    copy = learner_context_pb2.ContextBundle()
    copy.CopyFrom(bundle)
    copy.ClearField("build_time")
    return copy.SerializeToString(deterministic=True)


@pytest.mark.parametrize(
    ("caller", "purpose"), [("gateway", "tutor_hint"), ("toolplane", "learning_state")]
)
async def test_the_same_time_builds_the_same_bundle_whatever_came_after(
    caller: str, purpose: str, context_server: RunningContextServer, owner_dsn: str
) -> None:
    before = await _build(context_server, caller, purpose, AS_OF)
    assert before.build_time.ToDatetime(tzinfo=UTC) == AS_OF
    async with _later_records(owner_dsn):
        after = await _build(context_server, caller, purpose, AS_OF)
        now = await _build(context_server, caller, purpose, None)
    assert after.SerializeToString(deterministic=True) == before.SerializeToString(
        deterministic=True
    )
    assert _content(now) != _content(before)


async def test_an_evaluation_time_outside_the_timestamp_range_is_invalid(
    context_server: RunningContextServer,
) -> None:
    request = pb.BuildContextRequest(learner_id="L-2041-1", purpose="tutor_hint")
    request.evaluate_time.CopyFrom(timestamp_pb2.Timestamp(seconds=-62_135_596_801))
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await context_server.stub("gateway").BuildContext(request, timeout=TIMEOUT)
    details = error_details(raised.value)
    assert (details.code, details.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_EVALUATE_TIME",
    )
