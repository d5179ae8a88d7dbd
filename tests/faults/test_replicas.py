"""Two replicas of every service on one PostgreSQL and one S3 (moto), the gateways and tool planes
balancing over both context replicas. Under load, one replica of each service is killed with
SIGKILL in turn (and started again): a call in flight on the killed replica fails with a
retryable status and succeeds when the caller retries on the other replica, every other call
succeeds, no audit row of an answered tool call and no recorded turn is lost, an approval is
used exactly once even when the call is sent to both replicas, and a tool limit holds for the
sum of both tool planes. It runs twice: with every service connected straight to PostgreSQL,
and with every service through PgBouncer in transaction mode, as in production."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import struct_pb2

from nemo_core.db import connect
from nemo_protos.context.v1 import context_service_pb2 as context_pb
from nemo_protos.context.v1 import conversation_pb2
from nemo_protos.toolplane.v1 import tool_pb2
from nemo_protos.toolplane.v1 import toolplane_service_pb2 as toolplane_pb
from nemo_testing.pgbouncer import PgBouncer
from nemo_testing.s3 import moto_s3_server
from nemo_toolplane.mcp.endpoint import ERROR_META_KEY
from tests.stack import Stack, start_replicas

from .support import (
    OK,
    UNLIMITED_TOOLPLANE,
    StackClients,
    migrated_and_seeded,
    stack_clients,
    status_kind,
)

SESSION_ID = "CS-REPLICAS"
MCP_VERSION = "2026-07-28"
LIMITED_TOOL, LIMIT_BURST = "docs.get_doc", 5
#: Statuses a caller retries on another replica: the replica went away, or the tool plane could
#: not reach a context replica in time (its envelope says so).
RETRYABLE = {"UNAVAILABLE", "envelope/ERROR_CODE_DEPENDENCY_ERROR"}


@dataclass
class Call:
    """One logical call: its first attempt's outcome and, when that was retried on the other
    replica, the retry's."""

    kind: str
    replica: int
    first: str
    #: When the first attempt ended.
    ended: float
    retried: str | None = None

    @property
    def final(self) -> str:
        return self.retried if self.retried is not None else self.first


@dataclass
class Load:
    calls: list[Call] = field(default_factory=list)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)


def _retryable(outcome: str) -> bool:
    return outcome.split("/")[0] == "UNAVAILABLE" or outcome in RETRYABLE


async def _run(load: Load, kind: str, attempt: Callable[[int, int], Awaitable[str]]) -> None:
    """Calls one after another, each to the next replica in turn, retried once on the other
    replica when the first attempt fails retryably."""
    sequence = 0
    while not load.stopping.is_set():
        sequence += 1
        replica = sequence % 2
        first = await attempt(sequence, replica)
        call = Call(kind, replica, first, time.monotonic())
        if _retryable(call.first):
            call.retried = await attempt(sequence, 1 - replica)
        load.calls.append(call)


def _turn(sequence: int) -> context_pb.RecordTurnRequest:
    message = conversation_pb2.TurnMessage
    return context_pb.RecordTurnRequest(
        session_id=SESSION_ID,
        turn_id=f"T{sequence}",
        messages=[
            message(
                role=conversation_pb2.MESSAGE_ROLE_USER,
                type=conversation_pb2.MESSAGE_TYPE_TEXT,
                status=conversation_pb2.MESSAGE_STATUS_COMPLETED,
                content=f"question {sequence}",
            ),
            message(
                role=conversation_pb2.MESSAGE_ROLE_ASSISTANT,
                type=conversation_pb2.MESSAGE_TYPE_TEXT,
                status=conversation_pb2.MESSAGE_STATUS_COMPLETED,
                content=f"answer {sequence}",
            ),
        ],
    )


@asynccontextmanager
async def _all_clients(stacks: list[Stack]) -> AsyncIterator[list[StackClients]]:
    async with AsyncExitStack() as exit_stack:
        yield [await exit_stack.enter_async_context(stack_clients(stack)) for stack in stacks]


async def _record_turn(clients: list[StackClients], sequence: int, replica: int) -> str:
    try:
        await clients[replica].context.RecordTurn(
            _turn(sequence), metadata=clients[replica].context_metadata, timeout=10
        )
    except grpc.aio.AioRpcError as error:
        return status_kind(error)
    return OK


async def _tool_call(clients: list[StackClients], sequence: int, replica: int) -> str:
    arguments = struct_pb2.Struct()
    arguments.update({"learner_id": "L-2041-1"})
    try:
        response = await clients[replica].toolplane.CallTool(
            toolplane_pb.CallToolRequest(
                tool="nemo12.get_learner_learning_state",
                arguments=arguments,
                request_id=f"REQ-replica-{sequence}",
            ),
            metadata=clients[replica].toolplane_metadata,
            timeout=10,
        )
    except grpc.aio.AioRpcError as error:
        return status_kind(error)
    return OK if response.success else f"envelope/{tool_pb2.ErrorCode.Name(response.error.code)}"


async def _mcp(http: httpx.AsyncClient, stack: Stack, token: str, tool: str, arguments: Any) -> Any:
    """One stateless (2026-07-28) MCP tools/call; its result."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MCP_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    response = await http.post(
        stack.mcp_url,
        json=body,
        headers={
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {token}",
            "MCP-Protocol-Version": MCP_VERSION,
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool,
        },
    )
    response.raise_for_status()
    return response.json()["result"]


def _error(result: Any) -> dict[str, Any]:
    return result["_meta"][ERROR_META_KEY]["error"] if result.get("isError") else {}


@pytest.mark.parametrize("database", ["direct", "pgbouncer"])
async def test_one_replica_of_each_service_killed_in_turn(
    make_empty_database: Callable[[], Awaitable[str]],
    tmp_path: Path,
    pgbouncer: PgBouncer,
    database: str,
) -> None:
    pooler = pgbouncer if database == "pgbouncer" else None
    owner_dsn = await migrated_and_seeded(await make_empty_database())
    conn = await connect(owner_dsn)
    try:
        await conn.execute(
            "INSERT INTO learning.chat_sessions (id, learner_id) VALUES ($1, 'L-2041-1')",
            SESSION_ID,
        )
    finally:
        await conn.close()
    limit = [{"tools": LIMITED_TOOL, "per": ["agent"], "per_second": 0.0001, "burst": LIMIT_BURST}]
    toolplane_env = UNLIMITED_TOOLPLANE | {"NEMO_TOOLPLANE_TOOL_CALL_LIMITS": json.dumps(limit)}
    with moto_s3_server() as s3:
        stacks = await start_replicas(
            owner_dsn, tmp_path, s3=s3, extra_env={"toolplane": toolplane_env}, pooler=pooler
        )
        try:
            async with _all_clients(stacks) as clients:
                load = Load()
                runners = [
                    asyncio.create_task(
                        _run(load, "turn", lambda s, r: _record_turn(clients, s, r))
                    ),
                    asyncio.create_task(
                        _run(load, "tool", lambda s, r: _tool_call(clients, s, r))
                    ),
                    asyncio.create_task(
                        _run(load, "prompt", lambda s, r: clients[r].hint(s))
                    ),
                ]  # fmt: skip
                recovery: dict[str, float] = {}
                kills: dict[str, float] = {}
                await asyncio.sleep(1.0)
                for service in ("context", "gateway", "toolplane"):
                    victim = stacks[0].services[service]
                    kills[service] = time.monotonic()
                    assert await victim.kill() == -9
                    await asyncio.sleep(1.0)
                    restarted = time.monotonic()
                    await victim.start()
                    recovery[service] = time.monotonic() - restarted
                    await asyncio.sleep(1.0)
                load.stopping.set()
                await asyncio.gather(*runners)

            async with httpx.AsyncClient(timeout=30) as http:
                engineering = stacks[0].agent_tokens["engineering-agent"]
                arguments = {
                    "application_id": "nemo12-foundry",
                    "status": "maintenance",
                    "reason": "replica test",
                }
                waiting = await _mcp(
                    http, stacks[0], engineering, "application.set_status", arguments
                )
                approval_id = _error(waiting)["details"]["approval_id"]
                conn = await connect(owner_dsn)
                try:
                    await conn.execute(
                        "UPDATE toolplane.approvals SET status = 'approved', "
                        "decided_by = 'replica-test', decided_at = now() WHERE id = $1",
                        approval_id,
                    )
                finally:
                    await conn.close()
                # The approved call reaches both replicas at once (a retry racing the first).
                both = await asyncio.gather(
                    *(
                        _mcp(http, stack, engineering, "application.set_status", arguments)
                        for stack in stacks
                    )
                )
                research = stacks[0].agent_tokens["research-agent"]
                limited = [
                    await _mcp(
                        http, stacks[n % 2], research, LIMITED_TOOL, {"path": "toolplane/audit"}
                    )
                    for n in range(4 * LIMIT_BURST)
                ]
        finally:
            for stack in stacks:
                await stack.stop()

    first_kill = min(kills.values())
    summary = {
        kind: {
            "calls": sum(call.kind == kind for call in load.calls),
            "first attempt": dict(Counter(c.first for c in load.calls if c.kind == kind)),
            "after retry": dict(Counter(c.final for c in load.calls if c.kind == kind)),
        }
        for kind in ("turn", "tool", "prompt")
    }
    print(json.dumps({"load": summary, "restart to serving, s": recovery}, indent=1))
    # Every call succeeded, at once or on the other replica; only retryable failures, and only
    # once a replica was killed.
    assert {call.final for call in load.calls} == {OK}, summary
    failed = [call for call in load.calls if call.first != OK]
    assert all(_retryable(call.first) for call in failed), summary
    assert all(call.ended >= first_kill for call in failed)
    assert all(
        sum(call.kind == kind for call in load.calls) > 10 for kind in ("turn", "tool", "prompt")
    ), summary

    conn = await connect(owner_dsn)
    try:
        recorded = {
            row["turn_id"]: row["n"]
            for row in await conn.fetch(
                "SELECT turn_id, count(*) AS n FROM learning.chat_messages "
                "WHERE session_id = $1 GROUP BY turn_id",
                SESSION_ID,
            )
        }
        audited = {
            row["request_id"]
            for row in await conn.fetch(
                "SELECT request_id FROM toolplane.audit_logs WHERE request_id LIKE 'REQ-replica-%'"
            )
        }
        approval = await conn.fetchrow(
            "SELECT status FROM toolplane.approvals WHERE id = $1", approval_id
        )
        runs = await conn.fetchval(
            "SELECT count(*) FROM toolplane.audit_logs WHERE status = 'success' "
            "AND metadata->>'approval_id' = $1",
            approval_id,
        )
    finally:
        await conn.close()
    # No recorded turn lost, none half written.
    turns = [call for call in load.calls if call.kind == "turn"]
    answered_turns = {f"T{n + 1}" for n, _ in enumerate(turns)}
    assert answered_turns <= set(recorded)
    assert set(recorded.values()) == {2}
    # No audit row of an answered tool call lost.
    tools = [call for call in load.calls if call.kind == "tool"]
    assert {f"REQ-replica-{n + 1}" for n, _ in enumerate(tools)} <= audited
    # The approval ran exactly once.
    outcomes = sorted(_error(result).get("code", "ok") for result in both)
    assert outcomes == ["APPROVAL_REQUIRED", "ok"]
    assert approval is not None
    assert approval["status"] == "consumed"
    assert runs == 1
    # The limit holds for the sum of both tool planes.
    assert Counter(_error(result).get("code", "ok") for result in limited) == {
        "ok": LIMIT_BURST,
        "RATE_LIMITED": 3 * LIMIT_BURST,
    }
