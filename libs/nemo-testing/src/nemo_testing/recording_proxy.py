"""A loopback HTTP proxy in front of a real model server: it forwards every request as it is,
keeps the exact bytes it received, and relays the answer as it comes (streams included).

Tests put it between the gateway and the local model server, so the body the server received can
be compared with the run record's digest. ``cut_next_stream(after=N)`` cuts the next streamed
answer's connection once N server-sent events have reached the client, as a failing network
would, to see what the gateway records for a reply cut short by a real model.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from types import TracebackType

import aiohttp
from aiohttp import web

from nemo_testing.ports import serve_on_loopback
from nemo_testing.providers import RecordedRequest

#: Hop-by-hop and framing headers: the proxy's own connections set these.
_NOT_FORWARDED = frozenset(
    {"host", "content-length", "connection", "transfer-encoding", "accept-encoding", "keep-alive"}
)
_RELAYED_HEADERS = ("content-type", "cache-control", "retry-after", "retry-after-ms")


@dataclass
class RecordingProxy:
    """Forwards ``http://127.0.0.1:<port>/<path>`` to ``upstream/<path>``."""

    upstream: str
    """Origin of the model server, for example ``http://127.0.0.1:8000``."""
    requests: list[RecordedRequest] = field(default_factory=list)
    answers: list[tuple[int, bytes]] = field(default_factory=list)
    """(status, body) of each answer relayed whole, in the order of ``requests``; a cut stream's
    body is what was relayed before the cut."""
    port: int = 0
    _cut_after: int | None = None
    _runner: web.AppRunner | None = None
    _client: aiohttp.ClientSession | None = None

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def reset(self) -> None:
        self.requests.clear()
        self.answers.clear()
        self._cut_after = None

    def cut_next_stream(self, *, after: int) -> None:
        """Cut the next streamed answer after ``after`` events, without its end."""
        self._cut_after = after

    async def __aenter__(self) -> RecordingProxy:
        self._client = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_read=300), trust_env=False
        )
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{path:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        self.port = await serve_on_loopback(self._runner)
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
        body = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.requests.append(RecordedRequest(request.path, headers, body, time.monotonic()))
        index = len(self.answers)
        self.answers.append((0, b""))
        assert self._client is not None
        async with self._client.request(
            request.method,
            self.upstream.rstrip("/") + request.path_qs,
            data=body,
            headers={k: v for k, v in headers.items() if k not in _NOT_FORWARDED},
        ) as upstream:
            response = web.StreamResponse(
                status=upstream.status,
                headers={
                    k: v for k, v in upstream.headers.items() if k.lower() in _RELAYED_HEADERS
                },
            )
            await response.prepare(request)
            streamed = upstream.headers.get("content-type", "").startswith("text/event-stream")
            cut_after, events = (self._cut_after if streamed else None), 0
            if streamed:
                self._cut_after = None
            relayed = bytearray()
            async for chunk in upstream.content.iter_any():
                if cut_after is not None:
                    events += chunk.count(b"data:")
                relayed += chunk
                self.answers[index] = (upstream.status, bytes(relayed))
                await response.write(chunk)
                if cut_after is not None and events >= cut_after:
                    await asyncio.sleep(0.1)  # what was sent reaches the client first
                    assert request.transport is not None
                    request.transport.abort()
                    return response
            await response.write_eof()
            return response
