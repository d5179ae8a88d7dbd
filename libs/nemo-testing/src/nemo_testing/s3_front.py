"""A keep-alive front for the test S3 API, which can also fail the way S3 and its network do.

The moto server answers every request with ``Connection: close``, so a client of it opens a new
connection per object, which S3 never makes one do. The front keeps its clients' connections
open (HTTP/1.1, as S3 does) and forwards each request as it came, ``Host`` and signature
included, so moto still routes and, with authentication switched on, checks the signature.

Tests run it in their own event loop (``async with S3Front(upstream) as front``) and switch its
faults on and off: an S3 error answer (:meth:`S3Front.fail_with`), a slow answer
(:meth:`S3Front.delay`), connections reset (:meth:`S3Front.reset_connections`). The benchmark
runs it as a process of its own (``python -m nemo_testing.s3_front <upstream> <port>``, see
:func:`nemo_testing.s3.keep_alive_s3_server`), so its CPU is not the client's.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import struct
import sys
from dataclasses import dataclass, field
from types import TracebackType
from xml.sax.saxutils import escape

import aiohttp
from aiohttp import web
from yarl import URL

from nemo_testing.ports import serve_on_loopback

#: Hop-by-hop and framing headers: each side's own connection sets them.
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"}
)


@dataclass(frozen=True)
class _ErrorAnswer:
    status: int
    code: str


@dataclass
class S3Front:
    """Forwards ``http://127.0.0.1:<port>/<path>`` to ``upstream/<path>`` over kept-alive client
    connections."""

    upstream: str
    """Origin of the S3 API, for example ``http://127.0.0.1:5000``."""
    port: int = 0
    """Where it listens; 0 picks a free port (read it back after entering)."""
    connections: set[tuple[str, int]] = field(default_factory=set)
    """The client connections (peer addresses) requests came on."""
    access_key_ids: list[str] = field(default_factory=list)
    """The access key id each signed request was signed with, in order."""
    _error: _ErrorAnswer | None = None
    _delay: float = 0.0
    _reset: bool = False
    _runner: web.AppRunner | None = None
    _client: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail_with(self, status: int, code: str) -> None:
        """Answer every request with this S3 error (e.g. 403 ``AccessDenied``, 500
        ``InternalError``) until :meth:`heal`."""
        self._error = _ErrorAnswer(status, code)

    def delay(self, seconds: float) -> None:
        """Hold every request ``seconds`` before forwarding it, until :meth:`heal`."""
        self._delay = seconds

    def reset_connections(self) -> None:
        """Reset the connection of every request (TCP RST, no answer) until :meth:`heal`."""
        self._reset = True

    def heal(self) -> None:
        self._error, self._delay, self._reset = None, 0.0, False

    async def __aenter__(self) -> S3Front:
        self._client = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=60),
            auto_decompress=False,
            skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"),
            trust_env=False,
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{path:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, keepalive_timeout=75)
        self.port = await serve_on_loopback(self._runner, self.port)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._client is not None:
            await self._client.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        assert self._client is not None
        self.connections.add(request.transport.get_extra_info("peername"))
        credential = request.headers.get("Authorization", "").partition("Credential=")[2]
        if credential:
            self.access_key_ids.append(credential.partition("/")[0])
        body = await request.read()
        if self._reset:
            _reset(request.transport)
            return web.Response()
        if self._delay:
            await asyncio.sleep(self._delay)
        if self._error is not None:
            return _error_response(self._error)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        async with self._client.request(
            request.method,
            # As it came: re-quoting the path would change what its signature covers.
            URL(self.upstream.rstrip("/") + request.raw_path, encoded=True),
            data=body,
            headers=headers,
            allow_redirects=False,
        ) as upstream:
            answer = await upstream.read()
            relayed = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
            return web.Response(status=upstream.status, body=answer, headers=relayed)


def _reset(transport: asyncio.Transport) -> None:
    """Close the connection with a TCP reset, as a failing load balancer would."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def _error_response(error: _ErrorAnswer) -> web.Response:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Error><Code>{escape(error.code)}</Code><Message>injected by the test front</Message>"
        "</Error>"
    )
    return web.Response(status=error.status, text=body, content_type="application/xml")


async def _serve(upstream: str, port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    async with S3Front(upstream, port=port):
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1], int(sys.argv[2])))
