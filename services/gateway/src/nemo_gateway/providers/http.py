"""Model calls over HTTP: timeouts, retries with backoff and jitter, deadlines, streams.

The wire formats (OpenAI-compatible chat completions, Anthropic messages) only build bodies and
read answers; everything about sending them lives here. The HTTP clients' own retries stay off:
a request is retried only here, on 408, 429, 5xx and connection errors, and never past the
caller's deadline. A request the provider refused as invalid (400, 422, another 4xx, or a 500
whose body says the request was invalid) is not retried: the same body would be refused again.
A provider's Retry-After is honoured as it is: the retry waits that long when the wait ends
before the deadline, otherwise the call fails at once with the reason; one that is not a finite
number of seconds (``nan``, ``inf``) names no wait. A redirect is never followed (the key would
go with it) and never retried: it fails as :class:`ProviderRedirected`. Bodies are read with a
bound (:mod:`.untrusted`), and what the provider says back is filtered there too. Timeouts are
not retried: a provider that did not answer in time would not answer in the time that is left
either.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import json
import logging
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport
from httpx_sse import EventSource, SSEError
from pydantic import SecretStr

from nemo_gateway.providers.answers import ParsedAnswer
from nemo_gateway.providers.base import (
    AnswerTooLong,
    Completion,
    ModelRequest,
    ProviderFailure,
    ProviderRateLimited,
    ProviderRedirected,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnavailable,
    StreamBroken,
    StreamEvent,
    TextDelta,
    Usage,
    encode_body,
)
from nemo_gateway.providers.untrusted import (
    BodyTooLarge,
    BoundedStream,
    Redactor,
    answer_byte_limit,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

KEEPALIVE_SECONDS = 5.0
"""How long an idle provider connection is kept for the next request."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long requests may take and how they are retried."""

    request_timeout: float
    connect_timeout: float
    max_retries: int
    backoff: float
    backoff_max: float

    def delay(self, retry: int) -> float:
        """Backoff before retry number ``retry`` (0-based) when the provider named no wait:
        exponential with jitter, never above ``backoff_max``."""
        ceiling: float = min(self.backoff * 2.0**retry, self.backoff_max)
        # "Equal jitter": at least half the backoff, so callers that failed together spread out
        # without retrying at once.
        return ceiling / 2 + random.uniform(0, ceiling / 2)  # noqa: S311  jitter, not a secret


class StreamDecoder(Protocol):
    """Turns a provider's server-sent events into stream events; one per stream."""

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        """Events for one SSE message; raises ``ValueError`` on an error event or a malformed
        message."""
        ...

    @property
    def finished(self) -> bool:
        """Whether the terminal message arrived."""
        ...


class WireFormat(Protocol):
    """One provider API's request and answer shapes."""

    name: str
    path: str

    def headers(self, api_key: SecretStr | None) -> dict[str, str]:
        """Request headers, including the key."""
        ...

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON request body."""
        ...

    def parse(self, payload: Any) -> ParsedAnswer:
        """A whole answer; raises ``ValueError`` when its shape is wrong."""
        ...

    def stream_decoder(self) -> StreamDecoder:
        """A decoder for one streamed answer."""
        ...


@dataclass(frozen=True, slots=True)
class _Refused:
    """An HTTP error status or a redirect instead of an answer."""

    status: int
    retry_after: float | None
    body: bytes
    """The start of the error body (at most :data:`ERROR_BODY_BYTES`)."""


ERROR_BODY_BYTES = 4096
"""How much of an error body is read to tell an invalid request from a failing server."""

#: Statuses retried: a timeout the server reported, rate limiting, server errors.
RETRIED_STATUSES = frozenset({408, 429})

#: Error types and codes (OpenAI style ``{"error": {"type", "code"}}``) that say the request
#: itself was invalid, whatever the status.
INVALID_REQUEST_ERRORS = frozenset(
    {"invalid_request_error", "invalid_request", "context_length_exceeded", "bad_request"}
)

#: Text of an error message that says the request failed validation: servers built on
#: FastAPI and pydantic (llama-cpp-python among them) answer 500 with it for a body they could
#: not validate.
INVALID_REQUEST_MARKERS: tuple[str, ...] = (
    "validation error",
    "RequestValidationError",
    "'loc': ('body'",
    "literal_error",
    "extra_forbidden",
)


def refused_as_invalid(status: int, body: bytes) -> bool:
    """Whether an error status means the request was invalid (not retried), rather than a
    server, gateway or rate limit in the way (retried)."""
    if status in RETRIED_STATUSES:
        return False
    if status < 500:
        return True
    try:
        payload = json.loads(body)
    except ValueError:
        return False
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        if {str(error.get("type")), str(error.get("code"))} & INVALID_REQUEST_ERRORS:
            return True
        message = str(error.get("message") or "")
    else:
        message = str(error or payload.get("detail") or "") if isinstance(payload, dict) else ""
    return any(marker in message for marker in INVALID_REQUEST_MARKERS)


def error_summary(body: bytes) -> str:
    """The error type or code of an error body, for the log: never its message, which may
    quote the request."""
    try:
        payload = json.loads(body)
    except ValueError:
        return ""
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        return ""
    parts = [str(error[key]) for key in ("type", "code") if error.get(key)]
    return "/".join(parts)[:80]


# Transport failures: as the httpx transport reports them (streams) and as aiohttp raises them
# (whole answers); the httpx transport maps exactly these aiohttp errors to its own.
_CONNECTION_ERRORS = (
    httpx.TransportError,
    aiohttp.ClientConnectionError,
    aiohttp.ClientPayloadError,
    aiohttp.InvalidURL,
)


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the provider asked to wait: ``retry-after-ms`` (OpenAI's), then
    ``Retry-After`` as seconds or as an HTTP date; None when it named no (readable, finite)
    wait."""
    millis = headers.get("retry-after-ms")
    if millis is not None and (seconds := _finite(millis)) is not None:
        return max(0.0, seconds / 1000)
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        float(value)
    except ValueError:
        return _seconds_until(value, now)
    seconds = _finite(value)
    return None if seconds is None else max(0.0, seconds)


def _seconds_until(value: str, now: float | None) -> float | None:
    """Seconds until an HTTP date, or None when ``value`` is none."""
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _finite(value: str) -> float | None:
    """``value`` as a finite number, or None."""
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


async def _read_start(content: aiohttp.StreamReader, limit: int) -> bytes:
    """Up to ``limit`` bytes of a body, fewer when it ends first."""
    data = bytearray()
    while len(data) < limit:
        chunk = await content.read(limit - len(data))
        if not chunk:
            break
        data += chunk
    return bytes(data)


def _refusal(
    refused: _Refused, failure: _Failure
) -> tuple[str, float | None, type[ProviderFailure]]:
    """The problem, the wait the provider asked for and the failure kind of an error status
    worth retrying; raises :class:`ProviderRejected` for a request refused as invalid."""
    status = refused.status
    if status < 400:
        raise failure(ProviderRedirected, f"the provider answered with a redirect: HTTP {status}")
    if refused_as_invalid(status, refused.body):
        summary = failure.redactor.label(error_summary(refused.body))
        detail = f" ({summary})" if summary else ""
        raise failure(ProviderRejected, f"the provider refused the request: HTTP {status}{detail}")
    kind = ProviderRateLimited if status == 429 else ProviderUnavailable
    return f"HTTP {status}", refused.retry_after, kind


class _Failure:
    """Builds failures that carry the request count and body digest."""

    def __init__(self, sha256: str, redactor: Redactor) -> None:
        self.sha256 = sha256
        self.redactor = redactor
        self.requests = 0

    def __call__(self, kind: type[ProviderFailure], message: str) -> ProviderFailure:
        # The digest names a body the provider received; none was sent before the first request.
        sha256 = self.sha256 if self.requests else ""
        return kind(message, requests=self.requests, request_sha256=sha256)


@dataclass(slots=True)
class HttpModelStream:
    """A started streamed answer over SSE."""

    response: httpx.Response
    decoder: StreamDecoder
    deadline: float | None
    request_sha256: str
    requests: int
    redactor: Redactor
    byte_limit: int

    async def events(self) -> AsyncIterator[StreamEvent]:
        failure = _Failure(self.request_sha256, self.redactor)
        failure.requests = self.requests
        body = self.response.stream
        if isinstance(body, httpx.AsyncByteStream):
            self.response.stream = BoundedStream(body, self.byte_limit)
        try:
            async with asyncio.timeout_at(self.deadline):
                async for message in EventSource(self.response).aiter_sse():
                    for event in self.decoder.feed(message.event, message.data):
                        yield self._cleaned(event)
        except (TimeoutError, httpx.TimeoutException):
            raise failure(ProviderTimeout, "the stream stalled past its timeout") from None
        except BodyTooLarge:
            raise failure(AnswerTooLong, "the stream ran past its byte limit") from None
        except (httpx.TransportError, SSEError, ValueError, RecursionError) as exc:
            raise failure(StreamBroken, f"the stream broke: {type(exc).__name__}") from None
        if not self.decoder.finished:
            raise failure(StreamBroken, "the stream ended without its terminal event")

    def _cleaned(self, event: StreamEvent) -> StreamEvent:
        redactor = self.redactor
        if isinstance(event, TextDelta):
            return TextDelta(redactor.text(event.text))
        return dataclasses.replace(
            event,
            finish_reason=redactor.label(event.finish_reason),
            response_model=redactor.label(event.response_model),
        )


class HttpProvider:
    """A :class:`~nemo_gateway.providers.base.ModelProvider` over HTTP in one wire format.

    Both kinds of request share one aiohttp session (aiohttp's C-accelerated HTTP/1.1 and its
    connection pool). Whole answers go through aiohttp directly: httpx's request and response
    types cost more CPU than the rest of a gateway call. Streams go through the httpx transport
    over the same session, since the SSE reader works on httpx responses.
    """

    def __init__(
        self,
        wire: WireFormat,
        *,
        base_url: str,
        api_key: SecretStr | None,
        policy: RetryPolicy,
        max_connections: int,
    ) -> None:
        self._wire = wire
        self._url = httpx.URL(base_url.rstrip("/") + wire.path)
        self._url_text = str(self._url)
        self._api_key = api_key
        self._redactor = Redactor(api_key)
        self._policy = policy
        self._max_connections = max_connections
        self._timeouts = httpx.Timeout(
            policy.request_timeout, connect=policy.connect_timeout
        ).as_dict()
        # The same limits the httpx transport gives a session it builds itself.
        self._client_timeout = aiohttp.ClientTimeout(
            sock_connect=policy.connect_timeout,
            sock_read=policy.request_timeout,
            connect=policy.request_timeout,
        )
        self._client: aiohttp.ClientSession | None = None
        self._transport = AiohttpTransport(client=self._session)

    @property
    def name(self) -> str:
        return self._wire.name

    def __repr__(self) -> str:
        # Scheme, host and path only: a base URL may carry credentials or a key parameter.
        shown = self._url.copy_with(username=None, password=None, query=None)
        return f"HttpProvider({self._wire.name!r}, {str(shown)!r})"

    def _session(self) -> aiohttp.ClientSession:
        # Created on first use: a session belongs to the event loop that runs the requests.
        if self._client is None:
            self._client = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self._max_connections,
                    keepalive_timeout=KEEPALIVE_SECONDS,
                    ssl=httpx.create_ssl_context(trust_env=False),
                ),
                # Proxies come from the deployment's network, never from stray variables.
                trust_env=False,
            )
        return self._client

    def echoes_key(self, text: str) -> bool:
        return self._redactor.text(text) != text

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def complete(self, request: ModelRequest, deadline: float | None) -> Completion:
        raw, sha256 = encode_body(self._wire.body(request, stream=False))
        failure = _Failure(sha256, self._redactor)
        limit = answer_byte_limit(request.max_output_tokens)
        try:
            content = await self._with_retries(
                lambda: self._post_whole(raw, limit), deadline, failure
            )
        except BodyTooLarge:
            raise failure(AnswerTooLong, f"the answer ran past {limit} bytes") from None
        try:
            answer = self._wire.parse(json.loads(content))
        except (ValueError, RecursionError) as exc:
            # Nested past the parser's recursion limit is a wrong shape too, never INTERNAL.
            problem = self._redactor.label(type(exc).__name__)
            raise failure(ProviderRejected, f"unexpected answer shape ({problem})") from None
        redactor = self._redactor
        return Completion(
            text=redactor.text(answer.text),
            finish_reason=redactor.label(answer.finish_reason),
            truncated=answer.truncated,
            usage=Usage(answer.input_tokens, answer.output_tokens),
            response_model=redactor.label(answer.response_model),
            request_sha256=sha256,
            requests=failure.requests,
        )

    @asynccontextmanager
    async def open_stream(
        self, request: ModelRequest, deadline: float | None
    ) -> AsyncIterator[HttpModelStream]:
        raw, sha256 = encode_body(self._wire.body(request, stream=True))
        failure = _Failure(sha256, self._redactor)
        response = await self._with_retries(lambda: self._open_response(raw), deadline, failure)
        try:
            yield HttpModelStream(
                response,
                self._wire.stream_decoder(),
                deadline,
                sha256,
                failure.requests,
                self._redactor,
                answer_byte_limit(request.max_output_tokens),
            )
        finally:
            await response.aclose()

    async def _post_whole(self, raw: bytes, limit: int) -> bytes | _Refused:
        """One request whose answer is read whole, up to ``limit`` bytes."""
        async with self._session().post(
            self._url_text,
            data=raw,
            # Built per request so the key stays wrapped in its SecretStr between requests.
            headers=self._wire.headers(self._api_key),
            timeout=self._client_timeout,
            allow_redirects=False,
        ) as response:
            if response.status >= 300:
                body = await _read_start(response.content, ERROR_BODY_BYTES)
                return _Refused(response.status, retry_after(response.headers), body)
            content = await _read_start(response.content, limit + 1)
            if len(content) > limit:
                raise BodyTooLarge
            return content

    async def _open_response(self, raw: bytes) -> httpx.Response | _Refused:
        """One request whose answer is left open to be streamed."""
        response = await self._transport.handle_async_request(
            httpx.Request(
                "POST",
                self._url,
                headers=self._wire.headers(self._api_key),
                content=raw,
                extensions={"timeout": self._timeouts},
            )
        )
        if response.status_code >= 300:
            body = bytearray()
            try:
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) >= ERROR_BODY_BYTES:
                        break
            finally:
                await response.aclose()
            return _Refused(
                response.status_code,
                retry_after(response.headers),
                bytes(body[:ERROR_BODY_BYTES]),
            )
        return response

    def _timeout(self, deadline: float | None) -> float:
        if deadline is None:
            return self._policy.request_timeout
        return min(self._policy.request_timeout, deadline - time.monotonic())

    def _wait(
        self,
        problem: str,
        wait: float | None,
        unavailable: type[ProviderFailure],
        deadline: float | None,
        retry: int,
        failure: _Failure,
    ) -> float:
        """How long to wait before retry number ``retry``: the provider's Retry-After as it is,
        or the backoff; raises when the wait would not end before the deadline."""
        delay = self._policy.delay(retry) if wait is None else wait
        if deadline is None and wait is not None and wait > self._policy.request_timeout:
            raise failure(unavailable, f"{problem}; Retry-After {wait:g} s is too long")
        if deadline is not None and time.monotonic() + delay >= deadline:
            asked = "" if wait is None else f" (Retry-After {wait:g} s)"
            raise failure(unavailable, f"{problem}; no time left to retry{asked}")
        return delay

    async def _with_retries(
        self,
        attempt: Callable[[], Awaitable[T | _Refused]],
        deadline: float | None,
        failure: _Failure,
    ) -> T:
        retry = 0
        while True:
            timeout = self._timeout(deadline)
            if timeout <= 0:
                raise failure(ProviderTimeout, "no time left before the deadline")
            failure.requests += 1
            wait: float | None = None
            unavailable: type[ProviderFailure] = ProviderUnavailable
            try:
                async with asyncio.timeout(timeout):
                    result = await attempt()
            except aiohttp.ConnectionTimeoutError as exc:
                # No connection in time: like any connection failure, a new one can succeed.
                problem = f"connection error ({type(exc).__name__})"
            except (TimeoutError, httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout):
                raise failure(ProviderTimeout, "the provider did not answer in time") from None
            except _CONNECTION_ERRORS as exc:
                # Connection failures, including a keep-alive connection the provider closed
                # (reported as a connect error): a new request on a new connection can succeed.
                problem = f"connection error ({type(exc).__name__})"
            else:
                if not isinstance(result, _Refused):
                    return result
                problem, wait, unavailable = _refusal(result, failure)
            if retry >= self._policy.max_retries:
                raise failure(unavailable, f"{problem}; no retries left")
            delay = self._wait(problem, wait, unavailable, deadline, retry, failure)
            logger.info(
                "retrying model request",
                extra={"provider": self._wire.name, "problem": problem, "delay_seconds": delay},
            )
            await asyncio.sleep(delay)
            retry += 1
