"""What a streamed reply costs: StreamPrompt(tutor.chat_reply) against a direct stream from the
same provider.

A gateway process (with its context service process on a fresh embedded PostgreSQL, migrated
and seeded) streams each reply from a provider process that answers at once; every caller has
its own chat session and records the same turn again on each call, so bundles keep their size.
The direct stream is a model request made with the gateway's provider client from this process.
Reported at 1 and 16 callers:

- added time to first delta: StreamPrompt's p50 time to its first text delta minus the direct
  stream's. It includes building the conversation bundle (a context service round trip and its
  database read) and holding text back until the reply so far, with its first sentence, has
  passed the chat guardrail as a whole (ADR 0012);
- CPU per model delta: the provider streams the same reply in 1 and in 64 deltas; the difference
  in CPU per call, over 63, is what one more delta costs, in the gateway process and, for the
  direct stream, in this process. It includes cleaning each delta and checking the reply so far
  at each release.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc.aio
import psutil

from benchmarks.context import context_environment, prepare_database, seeded_database
from benchmarks.gateway import CALLER_TOKEN, gateway_settings
from benchmarks.load import server_process
from nemo_core.db import connect, dsn_with
from nemo_core.settings import DEFAULT_CALLER_TOKEN_METADATA_KEY
from nemo_gateway.providers.base import ChatMessage, ModelRequest, TextDelta
from nemo_gateway.providers.factory import build_provider
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_protos.gateway.v1 import gateway_service_pb2_grpc as pb_grpc
from nemo_testing.ports import free_port

CONCURRENCIES = (1, 16)
DELTA_COUNTS = (1, 64)
REPLY = "Em thử khai triển từng bước một nhé. " * 8
QUESTION = "Khai triển (x + 3)² thế nào ạ?"
WARMUP_SECONDS = 1.0

Call = Callable[[int], Awaitable[float]]
"""One call by caller ``n``; returns its time to the first delta, in seconds."""


@dataclass(frozen=True)
class StreamLoad:
    """One closed-loop stream load."""

    calls: int
    ttfd_p50_ms: float
    cpu_ms_per_call: float


async def _load(
    call: Call, concurrency: int, seconds: float, process: psutil.Process
) -> StreamLoad:
    """Drive ``call`` for ``seconds`` after a warm-up; CPU is ``process``'s over the measured
    calls."""
    firsts: list[float] = []
    measuring = False
    stop_at = time.monotonic() + WARMUP_SECONDS + seconds

    async def caller(index: int) -> None:
        while time.monotonic() < stop_at:
            first = await call(index)
            if measuring:
                firsts.append(first)

    tasks = [asyncio.create_task(caller(index)) for index in range(concurrency)]
    await asyncio.sleep(WARMUP_SECONDS)
    measuring = True
    times = process.cpu_times()
    before = times.user + times.system
    await asyncio.gather(*tasks)
    times = process.cpu_times()
    used = times.user + times.system - before
    calls = len(firsts)
    return StreamLoad(calls, statistics.median(firsts) * 1000, used * 1000 / max(calls, 1))


async def _direct(provider_url: str, concurrency: int, seconds: float) -> StreamLoad:
    provider = build_provider(gateway_settings(0, provider_url))
    assert provider is not None
    request = ModelRequest(
        model="bench",
        messages=(ChatMessage("user", QUESTION),),
        max_output_tokens=800,
        temperature=0.0,
        output_schema=None,
    )

    async def call(index: int) -> float:
        started = time.monotonic()
        first = 0.0
        async with provider.open_stream(request, None) as stream:
            async for event in stream.events():
                if isinstance(event, TextDelta) and not first:
                    first = time.monotonic() - started
        return first

    try:
        return await _load(call, concurrency, seconds, psutil.Process())
    finally:
        await provider.aclose()


async def _through_gateway(
    port: int, gateway: psutil.Process, sessions: list[str], concurrency: int, seconds: float
) -> StreamLoad:
    metadata = ((DEFAULT_CALLER_TOKEN_METADATA_KEY, CALLER_TOKEN),)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.GatewayServiceStub(channel)

        async def call(index: int) -> float:
            request = pb.StreamPromptRequest(
                prompt_id="tutor.chat_reply", session_id=sessions[index], turn_id="T-BENCH",
                user_message=QUESTION,
            )  # fmt: skip
            started = time.monotonic()
            first = 0.0
            async for event in stub.StreamPrompt(request, metadata=metadata, timeout=10):
                if event.HasField("text_delta") and not first:
                    first = time.monotonic() - started
                elif event.HasField("completed") and event.completed.run.reason:
                    raise RuntimeError(f"unexpected run: {event.completed.run.reason}")
            return first

        return await _load(call, concurrency, seconds, gateway)


async def _sessions(owner_dsn: str, count: int) -> list[str]:
    """A chat session of L-2041-1 for each caller."""
    sessions = [f"CS-BENCH-{index}-{secrets.token_hex(3)}" for index in range(count)]
    conn = await connect(dsn_with(owner_dsn, database="nemo_bench"))
    try:
        await conn.executemany(
            "INSERT INTO learning.chat_sessions (id, learner_id) VALUES ($1, 'L-2041-1')",
            [(session,) for session in sessions],
        )
    finally:
        await conn.close()
    return sessions


async def measure_streaming(seconds: float) -> str:
    """The summary lines of the streamed-reply benchmark."""
    scratch_root = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    results: dict[tuple[str, int, int], StreamLoad] = {}
    with (
        tempfile.TemporaryDirectory(prefix="nemo-bench-", dir=scratch_root) as scratch,
        seeded_database(Path(scratch)) as (owner_dsn, _),
    ):
        context_dsn = await prepare_database(owner_dsn)
        sessions = await _sessions(owner_dsn, max(CONCURRENCIES))
        context_port = free_port()
        environment = {
            **os.environ,
            **context_environment(context_port, context_dsn, Path(scratch)),
        }
        with server_process(["-m", "nemo_context"], context_port, environment):
            for deltas in DELTA_COUNTS:
                provider_port = free_port()
                provider_url = f"http://127.0.0.1:{provider_port}/v1"
                provider_args = ["-m", "nemo_testing.providers", str(provider_port), REPLY]
                gateway_port = free_port()
                gateway_args = [
                    "-m", "benchmarks.gateway", "serve", str(gateway_port), provider_url,
                    f"127.0.0.1:{context_port}",
                ]  # fmt: skip
                with (
                    server_process([*provider_args, str(deltas)], provider_port),
                    server_process(gateway_args, gateway_port) as gateway,
                ):
                    for concurrency in CONCURRENCIES:
                        results["direct", deltas, concurrency] = await _direct(
                            provider_url, concurrency, seconds
                        )
                        results["gateway", deltas, concurrency] = await _through_gateway(
                            gateway_port, gateway, sessions, concurrency, seconds
                        )
    return _summary(results)


def _summary(results: dict[tuple[str, int, int], StreamLoad]) -> str:
    few, many = DELTA_COUNTS
    lines = ["streamed reply (StreamPrompt tutor.chat_reply against a direct stream):"]
    for concurrency in CONCURRENCIES:
        gateway, direct = (
            results["gateway", many, concurrency],
            results["direct", many, concurrency],
        )
        per_delta = {
            side: (results[side, many, concurrency].cpu_ms_per_call
                   - results[side, few, concurrency].cpu_ms_per_call) / (many - few)
            for side in ("gateway", "direct")
        }  # fmt: skip
        lines.append(
            f"  {concurrency:>2} callers: added time to first delta p50"
            f" {gateway.ttfd_p50_ms - direct.ttfd_p50_ms:6.2f} ms"
            f" (gateway {gateway.ttfd_p50_ms:6.2f}, direct {direct.ttfd_p50_ms:5.2f});"
            f" cpu per delta: gateway {per_delta['gateway'] * 1000:6.1f} us,"
            f" direct {per_delta['direct'] * 1000:6.1f} us;"
            f" gateway cpu {gateway.cpu_ms_per_call:5.2f} ms per {many}-delta reply"
            f" ({gateway.calls} calls)"
        )
    return "\n".join(lines)
