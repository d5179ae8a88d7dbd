"""What the fault tests share: clients of a stack and a steady load whose outcomes are recorded."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import grpc
import grpc.aio
from google.protobuf import struct_pb2

from nemo_core.errors import error_details
from nemo_ops.migrate import migrate, role_passwords_from_env
from nemo_ops.seed import seed
from nemo_protos.context.v1 import context_service_pb2, context_service_pb2_grpc
from nemo_protos.gateway.v1 import gateway_service_pb2 as gateway_pb
from nemo_protos.gateway.v1 import gateway_service_pb2_grpc
from nemo_protos.toolplane.v1 import tool_pb2, toolplane_service_pb2_grpc
from nemo_protos.toolplane.v1 import toolplane_service_pb2 as toolplane_pb
from tests.stack import Stack

#: Tool plane limits high enough that a test's own load is never rate limited.
UNLIMITED_TOOLPLANE = {
    "NEMO_TOOLPLANE_AGENT_CALLS_PER_SECOND": "100000",
    "NEMO_TOOLPLANE_AGENT_CALL_BURST": "100000",
    "NEMO_TOOLPLANE_USER_CALLS_PER_SECOND": "100000",
    "NEMO_TOOLPLANE_USER_CALL_BURST": "100000",
    "NEMO_TOOLPLANE_TOOL_CALL_LIMITS": "[]",
}

OK = "ok"


@dataclass
class Outcome:
    """One call of the load: when it started and ended, and how ("ok", CODE/REASON, or
    envelope/CODE)."""

    started: float
    ended: float
    kind: str
    sequence: int


@dataclass
class Load:
    """Callers running one call after another until stopped, each outcome recorded."""

    outcomes: list[Outcome] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)

    def start(self, call: Callable[[int], Awaitable[str]], callers: int) -> None:
        """Run ``callers`` loops of ``call(sequence_number)``."""

        async def loop(caller: int) -> None:
            sequence = 0
            while not self._stopping.is_set():
                sequence += 1
                number = caller * 1_000_000 + sequence
                started = time.monotonic()
                kind = await call(number)
                self.outcomes.append(Outcome(started, time.monotonic(), kind, number))
                if kind != OK:
                    # A refused call fails at once; pausing keeps a down service from
                    # turning the load into a busy loop.
                    await asyncio.sleep(0.02)

        self._tasks += [asyncio.create_task(loop(caller)) for caller in range(callers)]

    async def stop(self) -> None:
        """Let every caller finish its call in flight, then return."""
        self._stopping.set()
        await asyncio.gather(*self._tasks)

    def in_flight_at(self, moment: float) -> list[Outcome]:
        """The calls that had started and not yet ended at ``moment``."""
        return [o for o in self.outcomes if o.started <= moment <= o.ended]

    def kinds(self, since: float = 0.0, until: float = float("inf")) -> Counter[str]:
        return Counter(o.kind for o in self.outcomes if since <= o.ended <= until)

    async def wait_for(self, kind: str, since: float, seconds: float = 20.0) -> None:
        """Return once an outcome of ``kind`` ended after ``since``."""
        deadline = time.monotonic() + seconds
        while not self.kinds(since)[kind]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {kind!r} outcome; got {dict(self.kinds(since))}")
            await asyncio.sleep(0.05)


def status_kind(error: grpc.aio.AioRpcError) -> str:
    """``CODE/REASON`` of a failed call."""
    return f"{error.code().name}/{error_details(error).reason or ''}"


@dataclass
class StackClients:
    """gRPC clients of a stack: the gateway as an internal service, the tool plane as an
    internal service acting for the parent's learning agent."""

    gateway: gateway_service_pb2_grpc.GatewayServiceAsyncStub
    toolplane: toolplane_service_pb2_grpc.ToolPlaneServiceAsyncStub
    context: context_service_pb2_grpc.ContextServiceAsyncStub
    context_metadata: tuple[tuple[str, str], ...]
    toolplane_metadata: tuple[tuple[str, str], ...]
    internal_metadata: tuple[tuple[str, str], ...]

    async def hint(self, _: int) -> str:
        """A learner.tutor_hint for L-2041-1 (gateway -> context)."""
        try:
            await self.gateway.RunPrompt(
                gateway_pb.RunPromptRequest(prompt_id="learner.tutor_hint", learner_id="L-2041-1"),
                metadata=self.internal_metadata,
                timeout=10,
            )
        except grpc.aio.AioRpcError as error:
            return status_kind(error)
        return OK

    async def bundle(self, _: int) -> str:
        """A tutor_hint bundle of L-2041-1, asked of the context service as the gateway."""
        try:
            await self.context.BuildContext(
                context_service_pb2.BuildContextRequest(
                    learner_id="L-2041-1", purpose="tutor_hint"
                ),
                metadata=self.context_metadata,
                timeout=10,
            )
        except grpc.aio.AioRpcError as error:
            return status_kind(error)
        return OK

    async def learning_state(self, sequence: int, request_prefix: str = "REQ-fault") -> str:
        """nemo12.get_learner_learning_state of L-2041-1 (tool plane -> context)."""
        arguments = struct_pb2.Struct()
        arguments.update({"learner_id": "L-2041-1"})
        try:
            response = await self.toolplane.CallTool(
                toolplane_pb.CallToolRequest(
                    tool="nemo12.get_learner_learning_state",
                    arguments=arguments,
                    request_id=f"{request_prefix}-{sequence}",
                ),
                metadata=self.toolplane_metadata,
                timeout=10,
            )
        except grpc.aio.AioRpcError as error:
            return status_kind(error)
        if response.success:
            return OK
        return f"envelope/{tool_pb2.ErrorCode.Name(response.error.code)}"


@asynccontextmanager
async def stack_clients(stack: Stack) -> AsyncIterator[StackClients]:
    gateway_channel = grpc.aio.insecure_channel(stack.gateway.address)
    toolplane_channel = grpc.aio.insecure_channel(stack.toolplane.address)
    context_channel = grpc.aio.insecure_channel(stack.context.address)
    try:
        yield StackClients(
            gateway=gateway_service_pb2_grpc.GatewayServiceStub(gateway_channel),
            toolplane=toolplane_service_pb2_grpc.ToolPlaneServiceStub(toolplane_channel),
            context=context_service_pb2_grpc.ContextServiceStub(context_channel),
            context_metadata=stack.metadata("gateway"),
            toolplane_metadata=(
                *stack.metadata("internal"),
                ("authorization", f"Bearer {stack.agent_tokens['learning-agent']}"),
            ),
            internal_metadata=stack.metadata("internal"),
        )
    finally:
        for channel in (gateway_channel, toolplane_channel, context_channel):
            with contextlib.suppress(Exception):
                await channel.close()


def only(kinds: Mapping[str, int], allowed: set[str]) -> dict[str, int]:
    """The outcome kinds outside ``allowed`` (empty when every outcome was expected)."""
    return {kind: count for kind, count in kinds.items() if kind not in allowed}


async def migrated_and_seeded(owner_dsn: str) -> str:
    """Migrate and seed the empty database at ``owner_dsn``; returns the DSN."""
    await migrate(owner_dsn, role_passwords=role_passwords_from_env(os.environ))
    await seed(owner_dsn)
    return owner_dsn
