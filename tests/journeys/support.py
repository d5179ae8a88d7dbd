"""What the journeys share: clients of the running stack, a traced start, and the stored rows."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import date
from typing import Any

import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry.sdk.trace import TracerProvider
from pydantic import SecretStr

from nemo_core.client import create_channel
from nemo_core.db import connect
from nemo_core.settings import ServiceSettings
from nemo_protos.context.v1 import context_service_pb2, context_service_pb2_grpc
from nemo_protos.gateway.v1 import gateway_service_pb2_grpc
from nemo_testing.otlp import OtlpReceiver, ReceivedSpan
from tests.stack import Stack

#: Columns of the seed that identify a person; none of their values may reach a model or agent.
IDENTIFIER_COLUMNS = {
    "learning.learners": (
        "display_name",
        "first_name",
        "last_name",
        "birth_date",
        "email",
        "phone",
        "address",
        "school_name",
        "avatar_url",
        "facebook_url",
        "photo_url",
    ),
    "learning.users": ("display_name", "email", "phone"),
}

# A tracer of the test's own, so the journey starts from a real (sampled) span whatever the
# process's global provider is.
_tracer = TracerProvider().get_tracer("nemo.journeys")


@contextmanager
def journey_span(name: str) -> Iterator[str]:
    """Run the block in a new root span; yields its trace id (hex)."""
    with _tracer.start_as_current_span(name) as span:
        yield format(span.get_span_context().trace_id, "032x")


async def services_in_trace(
    receiver: OtlpReceiver, trace_id: str, services: set[str], seconds: float = 15.0
) -> list[ReceivedSpan]:
    """The trace's spans once every one of ``services`` has exported at least one of them."""
    await receiver.wait_until(
        lambda: services <= {span.service for span in receiver.trace(trace_id)}, seconds
    )
    return receiver.trace(trace_id)


async def identifier_values(owner_dsn: str, ids: Mapping[str, str]) -> set[str]:
    """The identifier column values of the given rows (table -> id), as text."""
    conn = await connect(owner_dsn)
    try:
        values: set[str] = set()
        for table, row_id in ids.items():
            columns = ", ".join(IDENTIFIER_COLUMNS[table])
            row = await conn.fetchrow(f"SELECT {columns} FROM {table} WHERE id = $1", row_id)
            assert row is not None, (table, row_id)
            for value in row.values():
                if isinstance(value, date):
                    values.add(value.isoformat())
                elif value:
                    values.add(str(value))
        return values
    finally:
        await conn.close()


def leaked(text: str, forbidden: set[str]) -> set[str]:
    """Which forbidden values occur in ``text``."""
    return {value for value in forbidden if value in text}


async def audit_rows(
    owner_dsn: str, *, request_id: str, count: int = 1, seconds: float = 10.0
) -> list[dict[str, Any]]:
    """The audit rows of ``request_id`` once ``count`` of them are written (rows are flushed off
    the request path, so they arrive shortly after the answer)."""
    conn = await connect(owner_dsn)
    try:
        deadline = time.monotonic() + seconds
        while True:
            rows = await conn.fetch(
                "SELECT * FROM toolplane.audit_logs WHERE request_id = $1 ORDER BY id", request_id
            )
            if len(rows) >= count or time.monotonic() > deadline:
                return [dict(row) for row in rows]
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


@asynccontextmanager
async def mcp_client(
    stack: Stack, token: str, headers: Mapping[str, str] | None = None
) -> AsyncIterator[Client]:
    """The official MCP client on the stack's edge, authenticated with an agent token."""
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}", **(headers or {})}, timeout=30
    )
    try:
        async with Client(streamable_http_client(stack.mcp_url, http_client=http)) as client:
            yield client
    finally:
        await http.aclose()


@dataclass
class Clients:
    """gRPC clients of the stack with the tracing interceptors of every Nemo service."""

    gateway: gateway_service_pb2_grpc.GatewayServiceAsyncStub
    context_audit: context_service_pb2_grpc.ContextServiceAsyncStub
    context_gateway: context_service_pb2_grpc.ContextServiceAsyncStub


@asynccontextmanager
async def clients(stack: Stack) -> AsyncIterator[Clients]:
    settings = ServiceSettings()
    channels = [
        create_channel(
            stack.gateway.address, settings, token=SecretStr(stack.caller_tokens["internal"])
        ),
        create_channel(
            stack.context.address, settings, token=SecretStr(stack.caller_tokens["audit"])
        ),
        create_channel(
            stack.context.address, settings, token=SecretStr(stack.caller_tokens["gateway"])
        ),
    ]
    try:
        yield Clients(
            gateway=gateway_service_pb2_grpc.GatewayServiceStub(channels[0]),
            context_audit=context_service_pb2_grpc.ContextServiceStub(channels[1]),
            context_gateway=context_service_pb2_grpc.ContextServiceStub(channels[2]),
        )
    finally:
        for channel in channels:
            await channel.close()


async def snapshot(clients: Clients, input_ref: str) -> context_service_pb2.GetSnapshotResponse:
    """The stored snapshot behind ``input_ref``, read as the audit caller."""
    response: context_service_pb2.GetSnapshotResponse = await clients.context_audit.GetSnapshot(
        context_service_pb2.GetSnapshotRequest(input_ref=input_ref), timeout=10
    )
    return response
