"""The empty gRPC handler: bare grpc.aio, and through the Nemo bootstrap (the baseline of the
service benchmarks). The floor servers answer the same empty call, so one client drives all."""

from __future__ import annotations

from collections.abc import Sequence

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
    metadata = ((DEFAULT_CALLER_TOKEN_METADATA_KEY, TOKEN),)
    with server_process(["-m", module, mode, str(port), *arguments], port) as server:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary(
                METHOD,
                request_serializer=Empty.SerializeToString,
                response_deserializer=Empty.FromString,
            )
            request = Empty()
            return await run_load(
                name,
                lambda: call(request, metadata=metadata, timeout=5),
                concurrency=concurrency,
                seconds=seconds,
                server=server,
            )
