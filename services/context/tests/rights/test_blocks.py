"""Restricted and erased learners through a real server: every build and turn is refused with a
precise error, other learners build as before, lifting a restriction lets them through again,
and an erased learner's snapshot says it was erased."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Sequence

import grpc
import grpc.aio
import pytest

from nemo_context.snapshots.keys import MasterKey
from nemo_core.db import Connection, connect
from nemo_core.errors import error_details
from nemo_protos.context.v1 import context_service_pb2 as pb
from nemo_protos.context.v1 import conversation_pb2
from services.context.tests.conftest import MakeSession, RunningContextServer, StartContextServer

TIMEOUT = 10.0
MASTER_KEY = "blocks-test-master-key-0123456789abcdef0123"
MASTER = MasterKey(MASTER_KEY.encode())


@pytest.fixture
async def owner(owner_dsn: str) -> AsyncIterator[Connection]:
    conn = await connect(owner_dsn)
    yield conn
    await conn.execute("DELETE FROM rights.blocks WHERE request_id LIKE 'BLOCK-TEST-%'")
    await conn.close()


@pytest.fixture
async def server(start_context_server: StartContextServer) -> RunningContextServer:
    return await start_context_server(snapshot_master_key=MASTER_KEY)


async def refusal(call: Awaitable[object]) -> tuple[grpc.StatusCode, str | None]:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    details = error_details(raised.value)
    return details.code, details.reason


async def eventually_refused(
    server: RunningContextServer, learner_id: str
) -> tuple[grpc.StatusCode, str | None]:
    """The refusal of a build, once the server has read the blocks again (within seconds)."""
    deadline = time.monotonic() + 10
    request = pb.BuildContextRequest(learner_id=learner_id, purpose="tutor_hint")
    while True:
        try:
            await server.stub("gateway").BuildContext(request, timeout=TIMEOUT)
        except grpc.aio.AioRpcError as error:
            details = error_details(error)
            return details.code, details.reason
        assert time.monotonic() < deadline, "the block never applied"
        await asyncio.sleep(0.3)


async def block(
    owner: Connection, learner_id: str, kind: str, ref_digests: Sequence[str] = ()
) -> None:
    await owner.execute(
        "INSERT INTO rights.blocks (subject, kind, request_id, ref_digests)"
        " VALUES ($1, $2, $3, $4)",
        MASTER.subject(learner_id),
        kind,
        f"BLOCK-TEST-{kind}",
        list(ref_digests),
    )


async def test_a_restricted_learner_is_refused_everywhere_until_lifted(
    server: RunningContextServer, owner: Connection, make_session: MakeSession
) -> None:
    session = await make_session("L-2041-3")
    await block(owner, "L-2041-3", "restricted")
    assert await eventually_refused(server, "L-2041-3") == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "LEARNER_RESTRICTED",
    )
    gateway = server.stub("gateway")
    conversation = pb.BuildConversationContextRequest(
        session_id=session, turn_id="T1", current_user_message="Em hỏi ạ", persist=True
    )
    assert await refusal(gateway.BuildConversationContext(conversation, timeout=TIMEOUT)) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "LEARNER_RESTRICTED",
    )
    turn = pb.RecordTurnRequest(
        session_id=session,
        turn_id="T1",
        messages=[
            conversation_pb2.TurnMessage(
                role=conversation_pb2.MESSAGE_ROLE_USER,
                type=conversation_pb2.MESSAGE_TYPE_TEXT,
                status=conversation_pb2.MESSAGE_STATUS_COMPLETED,
                content="Em hỏi ạ",
            )
        ],
    )
    assert await refusal(gateway.RecordTurn(turn, timeout=TIMEOUT)) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "LEARNER_RESTRICTED",
    )
    assert await owner.fetchval(
        "SELECT count(*) FROM learning.chat_messages WHERE session_id = $1", session
    ) == 0  # fmt: skip
    # Another learner is not concerned.
    other = await gateway.BuildContext(
        pb.BuildContextRequest(learner_id="L-2041-1", purpose="tutor_hint"), timeout=TIMEOUT
    )
    assert other.bundle.learner_ref

    await owner.execute("DELETE FROM rights.blocks WHERE request_id = 'BLOCK-TEST-restricted'")
    deadline = time.monotonic() + 10
    while True:
        try:
            await gateway.BuildContext(
                pb.BuildContextRequest(learner_id="L-2041-3", purpose="tutor_hint"),
                timeout=TIMEOUT,
            )
            break
        except grpc.aio.AioRpcError:
            assert time.monotonic() < deadline, "the lifted restriction still applies"
            await asyncio.sleep(0.3)


async def test_an_erased_learner_and_its_snapshots_say_so(
    server: RunningContextServer, owner: Connection
) -> None:
    built = await server.stub("gateway").BuildContext(
        pb.BuildContextRequest(learner_id="L-2041-2", purpose="tutor_hint", persist=True),
        timeout=TIMEOUT,
    )
    input_ref = built.bundle.input_ref
    assert input_ref
    # What an erasure leaves: no digest, no key, a tombstone with the ref's digest.
    await owner.execute("DELETE FROM learning.context_snapshots WHERE input_ref = $1", input_ref)
    await block(owner, "L-2041-2", "erased", [MASTER.ref_digest(built.bundle.learner_ref)])
    assert await eventually_refused(server, "L-2041-2") == (
        grpc.StatusCode.NOT_FOUND,
        "LEARNER_ERASED",
    )
    audit = server.stub("audit")
    assert await refusal(
        audit.GetSnapshot(pb.GetSnapshotRequest(input_ref=input_ref), timeout=TIMEOUT)
    ) == (
        grpc.StatusCode.NOT_FOUND,
        "SNAPSHOT_ERASED",
    )
    # A snapshot that never existed is still only not found.
    unknown = input_ref.replace(built.bundle.learner_ref, "nemo_" + "0" * 24)
    assert await refusal(
        audit.GetSnapshot(pb.GetSnapshotRequest(input_ref=unknown), timeout=TIMEOUT)
    ) == (
        grpc.StatusCode.NOT_FOUND,
        "SNAPSHOT_NOT_FOUND",
    )
