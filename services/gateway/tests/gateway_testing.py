"""Shared test helpers: tokens, the in-process context service, chat sessions."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc.aio
from google.protobuf import struct_pb2, timestamp_pb2

from nemo_context.app import SERVICE_NAME as CONTEXT_SERVICE_NAME
from nemo_context.app import build as build_context
from nemo_context.settings import ContextSettings
from nemo_core.db import connect
from nemo_core.server import Server
from nemo_gateway.prompts.registry import REGISTRY
from nemo_gateway.prompts.spec import Rpc
from nemo_gateway.settings import GatewaySettings
from nemo_protos.gateway.v1 import gateway_service_pb2 as gw_pb
from nemo_protos.gateway.v1 import gateway_service_pb2_grpc

INTERNAL_TOKEN = "internal-caller-token-0123456789"
CONTEXT_CLIENT_TOKEN = "gateway-client-token-0123456789"
LLM_KEY = "sk-test-llm-key-that-must-never-leak-4242"
PSEUDONYM_KEY = "gateway-tests-pseudonym-key-0123456789abcdef"

#: A fixed evaluation time, a day after the seeded demo data: 2026-11-24T08:00:00Z. Learner
#: bundles are built as of it, so evidence and models recorded later are left out.
FIXED_TIME = timestamp_pb2.Timestamp(seconds=1_795_507_200)


@dataclass
class Gateway:
    """A running gateway and a client for it."""

    server: Server
    settings: GatewaySettings
    stub: gateway_service_pb2_grpc.GatewayServiceAsyncStub
    metadata: tuple[tuple[str, str], ...]


StartGateway = Callable[..., Awaitable[Gateway]]


def prompt_ids(*rpcs: Rpc, learner: bool | None = None) -> set[str]:
    """Ids of the registered prompts the ``rpcs`` serve: with ``learner``, only those that run
    on a learner's context (True) or on none (False). Per-prompt test tables compare their keys
    with these, so a newly registered prompt fails until each table has its entry."""
    return {
        spec.prompt_id
        for spec in REGISTRY
        if spec.rpc in rpcs and (learner is None or (spec.purpose is not None) is learner)
    }


async def collect_stream(
    gateway: Gateway, request: gw_pb.StreamPromptRequest, deadline_seconds: float = 10
) -> tuple[list[str], list[gw_pb.StreamPromptResponse], grpc.aio.AioRpcError | None]:
    """The text deltas, every event, and the error the stream ended with (None if clean)."""
    events: list[gw_pb.StreamPromptResponse] = []
    try:
        async for event in gateway.stub.StreamPrompt(
            request, metadata=gateway.metadata, timeout=deadline_seconds
        ):
            events.append(event)
    except grpc.aio.AioRpcError as exc:
        return [e.text_delta for e in events if e.HasField("text_delta")], events, exc
    return [e.text_delta for e in events if e.HasField("text_delta")], events, None


def variables(**values: Any) -> struct_pb2.Struct:
    """A Struct of prompt variables."""
    struct = struct_pb2.Struct()
    struct.update(values)
    return struct


@asynccontextmanager
async def start_context_service(
    context_dsn: str, snapshot_dir: Path, **overrides: Any
) -> AsyncIterator[str]:
    """The context service as in production (``app.build``), accepting the gateway's token."""
    values: dict[str, Any] = {
        "database_url": context_dsn,
        "listen_address": "127.0.0.1:0",
        "caller_tokens": {"gateway": CONTEXT_CLIENT_TOKEN},
        "pseudonym_key": PSEUDONYM_KEY,
        "snapshot_dir": snapshot_dir,
        "grace_period_seconds": 0.5,
        "database_pool_size": 4,
        "log_level": "WARNING",
    }
    settings = ContextSettings(**(values | overrides))
    server = Server(CONTEXT_SERVICE_NAME, settings, await build_context(settings))
    port = await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.shutdown()


EARLIER_TURNS = (
    ("Em chưa hiểu hằng đẳng thức (a + b)² ạ.", "(a + b)² = a² + 2ab + b². Em thử với a = x nhé."),
    ("Vậy (x + 3)² bằng bao nhiêu ạ?", "Áp dụng với a = x, b = 3: (x + 3)² = x² + 6x + 9."),
)


@asynccontextmanager
async def chat_session(
    owner_dsn: str, learner_id: str = "L-2041-1", turns: int = 1
) -> AsyncIterator[str]:
    """A new chat session of ``learner_id`` with ``turns`` finished earlier turns (T1, T2);
    deleted afterwards with everything stored for it, so the seeded sessions stay as they are."""
    session_id = f"CS-GW-{secrets.token_hex(6)}"
    conn = await connect(owner_dsn)
    try:
        await conn.execute(
            "INSERT INTO learning.chat_sessions (id, learner_id) VALUES ($1, $2)",
            session_id,
            learner_id,
        )
        seq = 0
        for turn, exchange in enumerate(EARLIER_TURNS[:turns], start=1):
            for role, content in zip(("user", "assistant"), exchange, strict=True):
                seq += 1
                await conn.execute(
                    "INSERT INTO learning.chat_messages (id, session_id, learner_id, turn_id,"
                    " seq, role, type, status, content)"
                    " VALUES ($1, $2, $3, $4, $5, $6, 'text', 'completed', $7)",
                    f"{session_id}-M{seq}",
                    session_id,
                    learner_id,
                    f"T{turn}",
                    seq,
                    role,
                    content,
                )
        yield session_id
    finally:
        await conn.execute("DELETE FROM learning.chat_sessions WHERE id = $1", session_id)
        await conn.close()


async def stored_messages(
    owner_dsn: str, session_id: str, turn_id: str
) -> list[tuple[str, str, str]]:
    """(role, status, content) of a turn's stored messages, in order."""
    conn = await connect(owner_dsn)
    try:
        rows = await conn.fetch(
            "SELECT role, status, content FROM learning.chat_messages"
            " WHERE session_id = $1 AND turn_id = $2 ORDER BY seq",
            session_id,
            turn_id,
        )
    finally:
        await conn.close()
    return [(row["role"], row["status"], row["content"]) for row in rows]
