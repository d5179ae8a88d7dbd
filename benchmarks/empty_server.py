"""An empty unary gRPC handler, served bare or through the Nemo bootstrap.

`python -m benchmarks.empty_server bare|nemo PORT` serves `/nemo.bench.v1.Empty/Call` until
SIGTERM. The bare server is grpc.aio with nothing added; the nemo server adds what every Nemo
service has (tracing, caller identity and ACL, error model, health, reflection).
"""

from __future__ import annotations

import asyncio
import signal
import sys

import grpc
import grpc.aio
from google.protobuf.empty_pb2 import Empty
from pydantic_settings import SettingsConfigDict

from nemo_core.callers import CallerAcl
from nemo_core.server import Server, Service, ServiceSetup, serve
from nemo_core.settings import ServiceSettings

SERVICE = "nemo.bench.v1.Empty"
METHOD = f"/{SERVICE}/Call"
CALLER = "bench"
TOKEN = "bench-caller-token-0123456789"


class BenchSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="NEMO_BENCH_")


async def _empty(request: Empty, context: grpc.aio.ServicerContext[Empty, Empty]) -> Empty:
    return request


def _handlers() -> dict[str, grpc.RpcMethodHandler[Empty, Empty]]:
    return {
        "Call": grpc.unary_unary_rpc_method_handler(
            _empty,
            request_deserializer=Empty.FromString,
            response_serializer=Empty.SerializeToString,
        )
    }


async def _serve_bare(port: int) -> None:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, _handlers()),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(1)


async def _serve_nemo(port: int) -> None:
    settings = BenchSettings(
        listen_address=f"127.0.0.1:{port}", caller_tokens={CALLER: TOKEN}, log_level="WARNING"
    )
    setup = ServiceSetup(
        services=[Service.from_handlers(SERVICE, _handlers())],
        acl=CallerAcl({CALLER: {"Call"}}),
    )
    await serve(Server("bench", settings, setup))


def main() -> None:
    mode, port = sys.argv[1], int(sys.argv[2])
    asyncio.run(_serve_bare(port) if mode == "bare" else _serve_nemo(port))


if __name__ == "__main__":
    main()
