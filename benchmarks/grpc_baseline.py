"""The empty gRPC handler: bare grpc.aio, and through the Nemo bootstrap (the baseline of the
service benchmarks). The floor servers answer the same empty call, so one client drives all."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import grpc.aio
from google.protobuf.empty_pb2 import Empty

from benchmarks.empty_server import CALLER, METHOD, TOKEN
from benchmarks.load import LoadResult, run_load, server_process
from nemo_core.settings import DEFAULT_CALLER_TOKEN_METADATA_KEY
from nemo_testing.ports import free_port


async def measure_empty_handler(mode: str, *, concurrency: int, seconds: float) -> LoadResult:
    """Throughput and latency of an empty unary call, bare or through the ``nemo`` bootstrap."""
    return await measure_empty_call(
        f"empty handler, {mode}, {concurrency} callers ({CALLER})",
        "benchmarks.empty_server",
        mode,
        concurrency=concurrency,
        seconds=seconds,
    )


async def measure_empty_call(
    name: str,
    module: str,
    mode: str,
    arguments: Sequence[str] = (),
    *,
    concurrency: int,
    seconds: float,
) -> LoadResult:
    """Load the empty call of ``python -m MODULE MODE PORT *ARGUMENTS`` run as its own process."""
    port = free_port()
    with server_process(["-m", module, mode, str(port), *arguments], port) as server:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            return await run_load(
                name, empty_call(channel), concurrency=concurrency, seconds=seconds, server=server
            )


def empty_call(channel: grpc.aio.Channel) -> Callable[[], Awaitable[object]]:
    """The empty call on ``channel``, as the bench caller (for any server that answers it)."""
    call = channel.unary_unary(
        METHOD, request_serializer=Empty.SerializeToString, response_deserializer=Empty.FromString
    )
    metadata = ((DEFAULT_CALLER_TOKEN_METADATA_KEY, TOKEN),)
    request = Empty()
    return lambda: call(request, metadata=metadata, timeout=5)
