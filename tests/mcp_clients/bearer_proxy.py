"""A loopback HTTP proxy that adds an agent's bearer token to requests that carry none.

The conformance suite connects as an anonymous client; the edge answers those with 401. Behind
this proxy the suite's requests reach the edge as an authenticated agent's, and otherwise as sent:
method, path, every header (``Host`` and ``Origin`` included, which the DNS-rebinding scenario
forges) and body, and the edge's answer comes back unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import httpx
import uvicorn
from starlette.types import Message, Receive, Scope, Send

#: Headers that describe one connection, not the message (RFC 9110 section 7.6.1).
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"content-length",
    }
)


class BearerProxy:
    """The ASGI app: forwards to ``upstream`` (an ``http://host:port`` origin)."""

    def __init__(self, upstream: str, token: str) -> None:
        self._upstream = upstream
        self._authorization = f"Bearer {token}".encode()
        self._http = httpx.AsyncClient(timeout=60)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in HOP_BY_HOP]
        if not any(k.lower() == b"authorization" for k, _ in headers):
            headers.append((b"authorization", self._authorization))
        query = scope.get("query_string", b"")
        url = self._upstream + scope["raw_path"].decode() + (f"?{query.decode()}" if query else "")
        upstream = await self._http.request(scope["method"], url, headers=headers, content=body)
        reply: list[tuple[bytes, bytes]] = [
            (k, v) for k, v in upstream.headers.raw if k.lower() not in HOP_BY_HOP
        ]
        start: Message = {
            "type": "http.response.start",
            "status": upstream.status_code,
            "headers": reply,
        }
        await send(start)
        await send({"type": "http.response.body", "body": upstream.content})

    async def aclose(self) -> None:
        await self._http.aclose()


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def bearer_proxy(upstream: str, token: str) -> AsyncIterator[str]:
    """Serve a :class:`BearerProxy` on a free loopback port; yields its base URL."""
    app = BearerProxy(upstream, token)
    server = _QuietServer(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, access_log=False)
    )
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, not an event
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await serving
        await app.aclose()
