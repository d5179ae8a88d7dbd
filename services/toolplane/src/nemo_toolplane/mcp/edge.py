"""The HTTP edge of the tool plane, served by uvicorn inside the gRPC server's process.

``/health`` and, when the edge accepts OAuth access tokens, its protected resource metadata
(:mod:`nemo_toolplane.mcp.resource_metadata`) are the only paths without authentication;
``/mcp`` is the MCP endpoint (:mod:`nemo_toolplane.mcp.endpoint`) behind the browser checks of
:mod:`nemo_toolplane.mcp.origins`. A connection whose request headers do not arrive within the
header timeout is closed (:mod:`nemo_toolplane.mcp.slow_clients`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from nemo_core.oauth.config import OAuthConfig
from nemo_toolplane.mcp.endpoint import McpEndpoint
from nemo_toolplane.mcp.origins import BrowserGuard, OriginPolicy
from nemo_toolplane.mcp.resource_metadata import ResourceMetadata, metadata_paths
from nemo_toolplane.mcp.slow_clients import header_timeout_protocol

logger = logging.getLogger(__name__)


async def health(_: Request) -> JSONResponse:
    """Liveness of the edge; the only path that needs no authentication."""
    return JSONResponse({"status": "ok"})


def create_app(
    mcp: McpEndpoint, browsers: OriginPolicy, oauth: OAuthConfig | None = None
) -> Starlette:
    """The edge's ASGI application; ``browsers`` guards ``/mcp`` (probes of ``/health`` come
    from the cluster, under any host name; the resource metadata is public)."""
    metadata_routes = (
        [
            Route(path, ResourceMetadata(oauth).respond, methods=["GET", "HEAD", "OPTIONS"])
            for path in metadata_paths(oauth)
        ]
        if oauth is not None
        else []
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with mcp.running():
            yield

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            *metadata_routes,
            # Every method reaches the endpoint, which answers 405 itself after authentication.
            Route(
                "/mcp",
                BrowserGuard(mcp, browsers, mcp.refuse_browser),
                methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
            ),
        ],
        lifespan=lifespan,
    )


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the gRPC bootstrap owns SIGTERM/SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Edge:
    """Runs the ASGI app until the service stops; in-flight requests get the grace period."""

    def __init__(
        self,
        app: Starlette,
        host: str,
        port: int,
        grace_seconds: float,
        header_timeout_seconds: float = 10.0,
    ) -> None:
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=max(1, round(grace_seconds)),
            http=header_timeout_protocol(header_timeout_seconds),
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

    async def wait_started(self) -> int:
        """Wait until the edge accepts connections (bound the wait with asyncio.timeout);
        returns its port."""
        while not self._server.started:  # noqa: ASYNC110 - uvicorn offers a flag, not an event
            await asyncio.sleep(0.01)
        return self.port

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
