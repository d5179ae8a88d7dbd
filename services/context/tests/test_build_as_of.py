"""BuildContext as of an evaluation time: the same request with the same ``evaluate_time``
builds the same bundle, whatever is recorded after it; built without one, the later records are
read. The age is the learner's age today, whatever the time asked for."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import asyncpg
import grpc
import grpc.aio
import pytest
from google.protobuf import timestamp_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_core.db import Pool, connect, learner_transaction
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


EVALUATION_TIMES = st.datetimes(
    min_value=datetime(1900, 1, 1),  # noqa: DTZ001  hypothesis takes naive bounds
    max_value=datetime(2200, 12, 31),  # noqa: DTZ001
    timezones=st.just(UTC),
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(times=st.lists(EVALUATION_TIMES, min_size=2, max_size=4))
async def test_no_evaluation_time_reveals_more_than_the_age_today(
    times: list[datetime], context_server: RunningContextServer, owner_dsn: str
) -> None:
    # Bisecting evaluate_time around a birthday used to recover the birth date; now every time,
    # past or future, before or after the birth, gives the learner's age as of the server's date.
    conn = await connect(owner_dsn)
    try:
        today = await conn.fetchval(
            "SELECT date_part('year', age(current_date, birth_date))::int"
            " FROM learning.learners WHERE id = 'L-2041-1'"
        )
    finally:
        await conn.close()
    ages = {(await _build(context_server, "toolplane", "profile", when)).profile.age_years
            for when in times}  # fmt: skip
    assert ages == {today}


async def test_the_age_function_takes_no_day_and_never_answers_a_negative_age(
    context_pool: Pool, owner_dsn: str
) -> None:
    async with learner_transaction(context_pool, ["L-2041-2"], readonly=True) as conn:
        with pytest.raises(asyncpg.UndefinedFunctionError):
            await conn.fetchval("SELECT learning.learner_age_years_on('L-2041-2', '1990-01-01')")
    owner = await connect(owner_dsn)
    try:
        born = await owner.fetchval(
            "SELECT birth_date FROM learning.learners WHERE id = 'L-2041-2'"
        )
        await owner.execute(
            "UPDATE learning.learners SET birth_date = current_date + 30 WHERE id = 'L-2041-2'"
        )
        async with learner_transaction(context_pool, ["L-2041-2"], readonly=True) as conn:
            assert await conn.fetchval("SELECT learning.learner_age_years('L-2041-2')") is None
    finally:
        await owner.execute(
            "UPDATE learning.learners SET birth_date = $1 WHERE id = 'L-2041-2'", born
        )
        await owner.close()
