"""An empty unary gRPC handler, served bare or through the Nemo bootstrap.

`python -m benchmarks.empty_server bare|nemo PORT` serves `/nemo.bench.v1.Empty/Call` until
SIGTERM. The bare server is grpc.aio with nothing added; the nemo server adds what every Nemo
service has (tracing, caller identity and ACL, error model, health, reflection).
:func:`serve_nemo` is also how the floor servers (``benchmarks.floor_servers``) serve their handler.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence

import grpc
import grpc.aio
from google.protobuf.empty_pb2 import Empty
from pydantic_settings import SettingsConfigDict

from nemo_core import event_loop
from nemo_core.callers import CallerAcl
from nemo_core.server import Cleanup, Server, Service, ServiceSetup, serve
from nemo_core.settings import ServiceSettings

SERVICE = "nemo.bench.v1.Empty"
METHOD = f"/{SERVICE}/Call"
CALLER = "bench"
TOKEN = "bench-caller-token-0123456789"

Handler = Callable[[Empty, grpc.aio.ServicerContext[Empty, Empty]], Awaitable[Empty]]


class BenchSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="NEMO_BENCH_")


async def _empty(request: Empty, context: grpc.aio.ServicerContext[Empty, Empty]) -> Empty:
    return request


def _handlers(handler: Handler) -> dict[str, grpc.RpcMethodHandler[Empty, Empty]]:
    return {
        "Call": grpc.unary_unary_rpc_method_handler(
            handler,
            request_deserializer=Empty.FromString,
            response_serializer=Empty.SerializeToString,
        )
    }


async def _serve_bare(port: int) -> None:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, _handlers(_empty)),)
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(1)


async def serve_nemo(port: int, handler: Handler, cleanup: Sequence[Cleanup] = ()) -> None:
    """Serve ``handler`` as `Call` through the Nemo bootstrap until SIGTERM."""
    settings = BenchSettings(
        listen_address=f"127.0.0.1:{port}", caller_tokens={CALLER: TOKEN}, log_level="WARNING"
    )
    setup = ServiceSetup(
        services=[Service.from_handlers(SERVICE, _handlers(handler))],
        acl=CallerAcl({CALLER: {"Call"}}),
        cleanup=cleanup,
    )
    await serve(Server("bench", settings, setup))


def main() -> None:
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "bare":
        asyncio.run(_serve_bare(port))
    else:
        event_loop.run(serve_nemo(port, _empty))


if __name__ == "__main__":
    main()
