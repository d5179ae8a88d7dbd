"""A real HTTP server on loopback speaking the model providers' wire formats, with scripted
replies and a log of every request.

It serves ``POST /v1/chat/completions`` (OpenAI-compatible; base URL ``openai_base_url``) and
``POST /v1/messages`` (Anthropic; base URL ``anthropic_base_url``), as JSON or, when the request
asks for ``"stream": true``, as server-sent events with chunked transfer encoding. Each request
takes the next scripted reply (or the default one):

- :class:`Answer` — a whole answer with its finish reason and token usage;
- :class:`HttpError` — a status such as 429 (with ``Retry-After``) or 503;
- :class:`Hang` — no answer for a while, so the client's timeout fires;
- :class:`Stream` — text deltas, then a clean end, or a cut connection after ``cut_after``, or
  (``endless``) the deltas over and over until the client goes away;
- :class:`Raw` — any bytes with any status and headers, as a hostile provider may send them
  (JSON nested past any parser's recursion limit, a huge body, a redirect).

Anywhere in a reply, :data:`ECHOED_KEY` stands for the key the request carried (its bearer token
or ``x-api-key``), as a provider that echoes the caller's key sends it back.

In tests: ``async with ScriptedProvider() as provider: provider.script(Answer('{"a": 1}'))``.
As a process (benchmarks): ``python -m nemo_testing.providers PORT TEXT [DELTAS]`` answers every
request at once with TEXT (a stream request: TEXT cut into DELTAS deltas, default 1) and keeps no
log.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, NoReturn

import h11

ECHOED_KEY = "<<the request's key>>"
"""Replaced, in every reply, by the key the request carried."""
OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
_READ_SIZE = 65536


@dataclass(frozen=True)
class Answer:
    """A whole answer; ``truncated`` makes the finish reason length / max_tokens. ``text`` None
    sends ``content: null``; ``reasoning`` goes in the message's ``reasoning_content`` (OpenAI
    wire) or a ``thinking`` block before the text (Anthropic wire), as reasoning servers send
    it; ``usage`` False leaves token usage out."""

    text: str | None
    truncated: bool = False
    input_tokens: int = 40
    output_tokens: int = 12
    reasoning: str | None = None
    usage: bool = True


@dataclass(frozen=True)
class HttpError:
    """An error status, for example 429 with a Retry-After of ``retry_after`` seconds (a number,
    or the header's text as it is, for an HTTP date), with ``body`` as its JSON body."""

    status: int
    retry_after: float | str | None = None
    body: Any = field(default_factory=lambda: {"error": "scripted"})
    headers: tuple[tuple[str, str], ...] = ()
    """More response headers, for example ``(("retry-after-ms", "1500"),)``."""


@dataclass(frozen=True)
class Hang:
    """Accept the request and stay silent for ``seconds``, then close the connection."""

    seconds: float = 60.0


@dataclass(frozen=True)
class Stream:
    """Streamed deltas; with ``cut_after`` the connection is cut after that many deltas, with
    no terminal event and no end of the chunked body."""

    deltas: tuple[str, ...]
    cut_after: int | None = None
    truncated: bool = False
    delta_delay: float = 0.0
    input_tokens: int = 40
    usage: bool = True
    """False: no usage in the stream, as llama-cpp-python's server sends none."""
    endless: bool = False
    """Send the deltas over and over, never ending, until the client goes away."""
    output_tokens: int | None = None
    """The output tokens the usage reports; None: the words of the deltas."""


@dataclass(frozen=True)
class Raw:
    """``body`` as it is, with ``status`` and ``headers`` (a redirect's ``location``...)."""

    body: bytes
    status: int = 200
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


Reply = Answer | HttpError | Hang | Stream | Raw


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float = 0.0
    """``time.monotonic()`` when the request had arrived whole."""

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.body).hexdigest()


def _sse(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def _openai_answer(model: str, answer: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text}
    if answer.reasoning is not None:
        message["reasoning_content"] = answer.reasoning
    payload: dict[str, Any] = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "length" if answer.truncated else "stop",
            }
        ],
    }
    if answer.usage:
        payload["usage"] = {
            "prompt_tokens": answer.input_tokens,
            "completion_tokens": answer.output_tokens,
            "total_tokens": answer.input_tokens + answer.output_tokens,
        }
    return payload


def _anthropic_answer(model: str, answer: Answer) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if answer.reasoning is not None:
        content.append({"type": "thinking", "thinking": answer.reasoning, "signature": "s"})
    if answer.text is not None:
        content.append({"type": "text", "text": answer.text})
    payload: dict[str, Any] = {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "max_tokens" if answer.truncated else "end_turn",
        "stop_sequence": None,
    }
    if answer.usage:
        payload["usage"] = {
            "input_tokens": answer.input_tokens,
            "output_tokens": answer.output_tokens,
        }
    return payload


def _openai_stream(model: str, stream: Stream) -> tuple[list[bytes], list[bytes]]:
    """(one message per delta, the closing messages)."""

    def chunk(delta: dict[str, str], finish: str | None) -> bytes:
        return _sse(
            None,
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            },
        )

    deltas = [chunk({"content": text}, None) for text in stream.deltas]
    output_tokens = _output_tokens(stream)
    usage = _sse(
        None,
        {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [],
            "usage": {
                "prompt_tokens": stream.input_tokens,
                "completion_tokens": output_tokens,
                "total_tokens": stream.input_tokens + output_tokens,
            },
        },
    )
    closing = [
        chunk({}, "length" if stream.truncated else "stop"),
        *([usage] if stream.usage else []),
        _sse(None, "[DONE]"),
    ]
    return deltas, closing


def _output_tokens(stream: Stream) -> int:
    if stream.output_tokens is not None:
        return stream.output_tokens
    return sum(len(text.split()) for text in stream.deltas)


def _anthropic_stream(model: str, stream: Stream) -> tuple[list[bytes], list[bytes]]:
    opening = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_scripted",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": stream.input_tokens, "output_tokens": 1},
                },
            },
        ),
        _sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        ),
    ]
    deltas = [
        _sse(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}},
        )
        for t in stream.deltas
    ]
    # The opening events go out with the first delta.
    if deltas:
        deltas[0] = b"".join(opening) + deltas[0]
    closing = [
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "max_tokens" if stream.truncated else "end_turn"},
                "usage": {"output_tokens": _output_tokens(stream)},
            },
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]
    if not deltas:
        closing = opening + closing
    return deltas, closing


class _Cut(Exception):
    """The reply ends by cutting the connection."""


@dataclass
class ScriptedProvider:
    """The scripted provider server; use as an async context manager."""

    default: Reply | None = None
    """The reply when the script is empty; None answers 500."""
    default_stream: Reply | None = None
    """The reply to a stream request when both scripts are empty; None: ``default``."""
    record: bool = True
    requests: list[RecordedRequest] = field(default_factory=list)
    _script: deque[Reply] = field(default_factory=deque)
    _stream_script: deque[Reply] = field(default_factory=deque)
    _server: asyncio.Server | None = None
    _connections: set[asyncio.Task[None]] = field(default_factory=set)
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    port: int = 0

    def script(self, *replies: Reply) -> None:
        """Queue replies for the next requests, in order."""
        self._script.extend(replies)

    def script_stream(self, *replies: Reply) -> None:
        """Queue replies for the next requests that ask for a stream; they take these before
        the common script, so streamed and whole requests made at once get the right ones."""
        self._stream_script.extend(replies)

    def reset(self) -> None:
        """Forget the scripts and the request log."""
        self._script.clear()
        self._stream_script.clear()
        self.requests.clear()

    async def wait_for_requests(self, count: int) -> None:
        """Return once ``count`` requests have arrived since the last reset."""
        while len(self.requests) < count:
            self._arrived.clear()
            await self._arrived.wait()

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, port: int = 0) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> ScriptedProvider:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        connection = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await self._read_request(connection, reader)
                if request is None:
                    return
                await self._respond(connection, writer, *request)
                if connection.our_state is h11.MUST_CLOSE:
                    return
                connection.start_next_cycle()
        except (_Cut, ConnectionError, h11.ProtocolError):
            writer.transport.abort()
        finally:
            self._connections.discard(task)
            writer.close()

    async def _read_request(
        self, connection: h11.Connection, reader: asyncio.StreamReader
    ) -> tuple[h11.Request, bytes] | None:
        request: h11.Request | None = None
        body = bytearray()
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(_READ_SIZE)
                connection.receive_data(data)
                if not data and connection.their_state is h11.IDLE:
                    return None
                continue
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage) and request is not None:
                return request, bytes(body)
            elif isinstance(event, h11.ConnectionClosed):
                return None

    async def _respond(
        self,
        connection: h11.Connection,
        writer: asyncio.StreamWriter,
        request: h11.Request,
        body: bytes,
    ) -> None:
        path = request.target.decode()
        if self.record:
            headers = {k.decode().lower(): v.decode() for k, v in request.headers}
            self.requests.append(RecordedRequest(path, headers, body, time.monotonic()))
            self._arrived.set()
        try:
            payload = json.loads(body)
        except ValueError:
            payload = {}
        streamed = payload.get("stream") is True
        if streamed and self._stream_script:
            reply: Reply | None = self._stream_script.popleft()
        elif self._script:
            reply = self._script.popleft()
        else:
            reply = (self.default_stream if streamed else None) or self.default
        send = _Sender(connection, writer, _request_key(request))
        if path not in (OPENAI_PATH, ANTHROPIC_PATH):
            await _send_json(send, 404, {"error": "unknown path"})
        elif reply is None:
            await _send_json(send, 500, {"error": "no scripted reply"})
        else:
            model = str(payload.get("model", ""))
            await _send_reply(send, reply, model, anthropic=path == ANTHROPIC_PATH)


async def _send_reply(send: _Sender, reply: Reply, model: str, *, anthropic: bool) -> None:
    if isinstance(reply, HttpError):
        extra = list(reply.headers)
        if isinstance(reply.retry_after, str):
            extra.append(("retry-after", reply.retry_after))
        elif reply.retry_after is not None:
            extra.append(("retry-after", f"{reply.retry_after:g}"))
        await _send_json(send, reply.status, reply.body, extra)
    elif isinstance(reply, Hang):
        await asyncio.sleep(reply.seconds)
        raise _Cut
    elif isinstance(reply, Answer):
        answer = _anthropic_answer if anthropic else _openai_answer
        await _send_json(send, 200, answer(model, reply))
    elif isinstance(reply, Raw):
        await _send_body(
            send, reply.status, reply.body, [("content-type", reply.content_type), *reply.headers]
        )
    else:
        await _send_stream(send, reply, model, anthropic=anthropic)


def _request_key(request: h11.Request) -> str:
    """The key a request carried: its bearer token or its ``x-api-key``."""
    for name, value in request.headers:
        if name.lower() == b"authorization" and value.startswith(b"Bearer "):
            return value[len(b"Bearer ") :].decode()
        if name.lower() == b"x-api-key":
            return value.decode()
    return ""


@dataclass
class _Sender:
    """Writes one response, with :data:`ECHOED_KEY` replaced by the request's key."""

    connection: h11.Connection
    writer: asyncio.StreamWriter
    key: str

    async def __call__(self, event: Any) -> None:
        if isinstance(event, h11.Data):
            event = h11.Data(data=event.data.replace(ECHOED_KEY.encode(), self.key.encode()))
        data = self.connection.send(event)
        if data:
            self.writer.write(data)
            await self.writer.drain()


async def _send_json(
    send: _Sender,
    status: int,
    payload: Any,
    extra_headers: list[tuple[str, str]] | None = None,
) -> None:
    body = json.dumps(payload, ensure_ascii=False).encode()
    headers = [("content-type", "application/json"), *(extra_headers or [])]
    await _send_body(send, status, body, headers)


async def _send_body(
    send: _Sender, status: int, body: bytes, headers: list[tuple[str, str]]
) -> None:
    body = body.replace(ECHOED_KEY.encode(), send.key.encode())
    head = [("content-length", str(len(body))), *headers]
    await send(h11.Response(status_code=status, headers=head))
    await send(h11.Data(data=body))
    await send(h11.EndOfMessage())


async def _send_stream(send: _Sender, stream: Stream, model: str, *, anthropic: bool) -> None:
    deltas, closing = (_anthropic_stream if anthropic else _openai_stream)(model, stream)
    headers = [("content-type", "text/event-stream"), ("transfer-encoding", "chunked")]
    await send(h11.Response(status_code=200, headers=headers))
    for sent, message in enumerate(deltas):
        if stream.cut_after is not None and sent >= stream.cut_after:
            await _cut_after_delivery()
        await send(h11.Data(data=message))
        if stream.delta_delay:
            await asyncio.sleep(stream.delta_delay)
    if stream.cut_after is not None:
        await _cut_after_delivery()
    # An endless stream repeats its deltas (without the opening events) until the client goes.
    again = [_sse_repeat(message, anthropic) for message in deltas]
    while stream.endless and again:
        for message in again:
            await send(h11.Data(data=message))
        await asyncio.sleep(0)
    for message in closing:
        await send(h11.Data(data=message))
    await send(h11.EndOfMessage())


def _sse_repeat(message: bytes, anthropic: bool) -> bytes:
    """A delta message as it is sent again: without the opening events the first one carries."""
    if not anthropic:
        return message
    return b"event: content_block_delta" + message.rsplit(b"event: content_block_delta", 1)[-1]


CUT_PAUSE_SECONDS = 0.1


async def _cut_after_delivery() -> NoReturn:
    """Cut the connection once the deltas already sent have reached the client: a client whose
    reader sees the cut before reading what arrived just ahead of it may drop that data (aiohttp
    does), which would make "cut after N deltas" a race instead of a scenario."""
    await asyncio.sleep(CUT_PAUSE_SECONDS)
    raise _Cut


def _cut(text: str, pieces: int) -> tuple[str, ...]:
    """``text`` in ``pieces`` deltas of about equal size (at least one character each)."""
    size = max(1, -(-len(text) // max(1, pieces)))
    return tuple(text[start : start + size] for start in range(0, len(text), size))


async def _serve_forever(port: int, text: str, deltas: int) -> None:
    provider = ScriptedProvider(
        default=Answer(text), default_stream=Stream(_cut(text, deltas)), record=False
    )
    await provider.start(port)
    try:
        await asyncio.Event().wait()
    finally:
        await provider.close()


def main() -> None:
    """``python -m nemo_testing.providers PORT TEXT [DELTAS]``: answer every request with TEXT,
    streams in DELTAS deltas."""
    port, text = int(sys.argv[1]), sys.argv[2]
    deltas = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(port, text, deltas))


if __name__ == "__main__":
    main()
