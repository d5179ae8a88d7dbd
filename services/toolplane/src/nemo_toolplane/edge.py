"""The HTTP edge of the tool plane, served by uvicorn inside the gRPC server's process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

logger = logging.getLogger(__name__)


async def health(_: Request) -> JSONResponse:
    """Liveness of the edge; the only path that needs no authentication."""
    return JSONResponse({"status": "ok"})


def create_app() -> Starlette:
    """The edge's ASGI application."""
    return Starlette(routes=[Route("/health", health, methods=["GET"])])


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the gRPC bootstrap owns SIGTERM/SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Edge:
    """Runs the ASGI app until the service stops; in-flight requests get the grace period."""

    def __init__(self, app: Starlette, host: str, port: int, grace_seconds: float) -> None:
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=max(1, round(grace_seconds)),
        )
        self._server = _EmbeddedServer(config)

    @property
    def port(self) -> int:
        """The bound port once started (useful with port 0); 0 before."""
        servers = getattr(self._server, "servers", [])
        for server in servers:
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return 0

    async def run(self, stopping: asyncio.Event) -> None:
        """Serve until ``stopping`` is set, then shut down gracefully."""
        serving = asyncio.create_task(self._server.serve())
        stop = asyncio.create_task(stopping.wait())
        done, _ = await asyncio.wait({serving, stop}, return_when=asyncio.FIRST_COMPLETED)
        if serving in done:
            stop.cancel()
            serving.result()
            raise RuntimeError("the HTTP edge stopped on its own")
        self._server.should_exit = True
        await serving
        logger.info("http edge stopped")
