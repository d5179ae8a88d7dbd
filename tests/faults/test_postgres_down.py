"""PostgreSQL stopped under load, on a server of this test's own: the context service answers
UNAVAILABLE (DATABASE_UNAVAILABLE) at once while it is down, serves again without a restart when
it is back, and no recorded turn is half written."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from nemo_core.db import connect, dsn_with
from nemo_ops.embedded_pg import EmbeddedPostgres, start_embedded_postgres
from nemo_protos.context.v1 import context_service_pb2 as context_pb
from nemo_protos.context.v1 import conversation_pb2
from tests.stack import StackFactory

from .support import OK, Load, StackClients, migrated_and_seeded, stack_clients, status_kind

DOWN = "UNAVAILABLE/DATABASE_UNAVAILABLE"
#: A call must fail well inside its 10 s deadline while the database is down: this bound is the
#: "fails fast" requirement (no waiting on a connect timeout), not a speed measurement.
FAIL_FAST_SECONDS = 3.0
SESSION_ID = "CS-PG-FAULT"


@pytest.fixture
async def postgres(fast_scratch_dir: Path) -> AsyncIterator[tuple[Path, str]]:
    """(data directory, owner DSN) of a dedicated server with a migrated and seeded database."""
    data_dir = fast_scratch_dir / f"pg-fault-{secrets.token_hex(4)}"
    server = _start_postgres(data_dir)
    try:
        conn = await connect(server.dsn)
        try:
            await conn.execute('CREATE DATABASE "nemo"')
        finally:
            await conn.close()
        owner_dsn = await migrated_and_seeded(dsn_with(server.dsn, database="nemo"))
        conn = await connect(owner_dsn)
        try:
            await conn.execute(
                "INSERT INTO learning.chat_sessions (id, learner_id) VALUES ($1, 'L-2041-1')",
                SESSION_ID,
            )
        finally:
            await conn.close()
        yield data_dir, owner_dsn
    finally:
        # Whatever the test left running on that directory (it restarts the server).
        await asyncio.to_thread(lambda: _start_postgres(data_dir).stop())


def _start_postgres(data_dir: Path) -> EmbeddedPostgres:
    """Start the server on ``data_dir`` again.

    ``pg_ctl start`` run from this test process now and then dies with SIGSEGV before the server
    starts (never when run alone); starting again is safe, so a few attempts are made.
    """
    for attempt in range(5):
        try:
            return start_embedded_postgres(data_dir)
        except subprocess.CalledProcessError:
            if attempt == 4:
                raise
            # pgserver keeps the handle of a failed start; forget it so the next one starts.
            # (Imported here, after embedded_pg silenced its import-time warning.)
            from pgserver.postgres_server import PostgresServer

            PostgresServer._instances.pop(data_dir.resolve(), None)
    raise AssertionError("unreachable")


def _record_turn(clients: StackClients) -> tuple[list[str], object]:
    """A RecordTurn caller for the load, and the turn ids it answered OK."""
    recorded: list[str] = []

    async def record(sequence: int) -> str:
        turn_id = f"T{sequence}"
        request = context_pb.RecordTurnRequest(
            session_id=SESSION_ID,
            turn_id=turn_id,
            messages=[
                conversation_pb2.TurnMessage(
                    role=conversation_pb2.MESSAGE_ROLE_USER,
                    type=conversation_pb2.MESSAGE_TYPE_TEXT,
                    status=conversation_pb2.MESSAGE_STATUS_COMPLETED,
                    content=f"question {sequence}",
                ),
                conversation_pb2.TurnMessage(
                    role=conversation_pb2.MESSAGE_ROLE_ASSISTANT,
                    type=conversation_pb2.MESSAGE_TYPE_TEXT,
                    status=conversation_pb2.MESSAGE_STATUS_COMPLETED,
                    content=f"answer {sequence}",
                ),
            ],
        )
        try:
            await clients.context.RecordTurn(request, metadata=clients.context_metadata, timeout=10)
        except grpc.aio.AioRpcError as error:
            return status_kind(error)
        recorded.append(turn_id)
        return OK

    return recorded, record


async def _messages_per_turn(owner_dsn: str) -> dict[str, int]:
    conn = await connect(owner_dsn)
    try:
        rows = await conn.fetch(
            "SELECT turn_id, count(*) AS n FROM learning.chat_messages"
            " WHERE session_id = $1 GROUP BY turn_id",
            SESSION_ID,
        )
    finally:
        await conn.close()
    return {row["turn_id"]: row["n"] for row in rows}


async def test_context_fails_fast_while_postgres_is_down_and_recovers_by_itself(
    start_stack: StackFactory, postgres: tuple[Path, str]
) -> None:
    data_dir, owner_dsn = postgres
    stack = await start_stack(owner_dsn)
    context_pid = stack.context.pid
    server: EmbeddedPostgres | None = None
    async with stack_clients(stack) as clients:
        recorded, record = _record_turn(clients)
        bundles, turns = Load(), Load()
        bundles.start(clients.bundle, callers=2)
        turns.start(record, callers=2)  # type: ignore[arg-type]
        try:
            await bundles.wait_for(OK, since=time.monotonic())
            await turns.wait_for(OK, since=time.monotonic())

            start_embedded_postgres(data_dir).stop()
            down = time.monotonic()
            await bundles.wait_for(DOWN, since=down)
            await turns.wait_for(DOWN, since=down)
            await asyncio.sleep(0.5)  # a few more calls against the stopped server
            down_outcomes = [o for o in bundles.outcomes + turns.outcomes if o.started > down + 0.1]

            server = _start_postgres(data_dir)
            back = time.monotonic()
            await bundles.wait_for(OK, since=back)
            await turns.wait_for(OK, since=back)
        finally:
            await bundles.stop()
            await turns.stop()

    assert server is not None
    assert dsn_with(server.dsn, database="nemo") == owner_dsn, "the server came back elsewhere"
    # While it was down: only the precise error, each well inside the deadline.
    assert down_outcomes
    assert {o.kind for o in down_outcomes} <= {DOWN, OK}
    assert max(o.ended - o.started for o in down_outcomes if o.kind == DOWN) < FAIL_FAST_SECONDS
    # The same process served again: recovery needed no restart.
    assert stack.context.pid == context_pid
    assert stack.context.running
    # Every turn is all or nothing, and every turn answered OK is stored whole.
    stored = await _messages_per_turn(owner_dsn)
    assert set(stored.values()) == {2}
    assert set(recorded) <= set(stored)
