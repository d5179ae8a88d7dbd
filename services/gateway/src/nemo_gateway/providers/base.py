"""What every model provider takes and returns, independent of its wire format."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One chat message of a model request."""

    role: Role
    content: str


class RawJson(str):
    """JSON text encoded beforehand; :func:`encode_body` writes it into a body as it is."""

    __slots__ = ()


@dataclass(frozen=True)
class OutputSchema:
    """The JSON Schema an answer must follow, named for the provider. A prompt builds it once,
    so the schema's JSON text is encoded once, not on every request."""

    name: str
    schema: dict[str, Any]

    @cached_property
    def encoded(self) -> RawJson:
        return RawJson(encode_json(self.schema))

    @cached_property
    def instruction(self) -> str:
        """The schema as system-prompt text, for a provider that cannot be asked for
        schema-constrained output: the prompts' "follows the given schema" must have it."""
        return f"JSON Schema of the answer:\n{self.encoded}"


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """A model call, before it is put into a provider's wire format."""

    model: str
    messages: tuple[ChatMessage, ...]
    max_output_tokens: int
    temperature: float
    output_schema: OutputSchema | None
    """What the answer must follow; None for free text (chat)."""
    reasoning: bool = False
    """Whether the model may reason before it answers, where the server can switch it."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens a provider reported; None where it reported nothing (never guessed as 0)."""

    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Completion:
    """A whole (non-streamed) model answer."""

    text: str
    finish_reason: str
    truncated: bool
    """The provider stopped at the output token limit (finish reason length / max_tokens)."""
    usage: Usage
    response_model: str
    request_sha256: str
    requests: int
    """HTTP requests made for this answer, retries included."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """The next piece of a streamed answer."""

    text: str


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The clean end of a streamed answer."""

    finish_reason: str
    truncated: bool
    usage: Usage
    response_model: str


StreamEvent = TextDelta | StreamEnd


class ProviderFailure(Exception):
    """A model call that produced no usable answer; ``code`` is the run record's reason."""

    code = "PROVIDER_ERROR"

    def __init__(self, message: str, *, requests: int, request_sha256: str) -> None:
        super().__init__(message)
        self.requests = requests
        self.request_sha256 = request_sha256


class ProviderTimeout(ProviderFailure):
    """The provider did not answer within the request timeout or the caller's deadline."""

    code = "PROVIDER_TIMEOUT"


class ProviderUnavailable(ProviderFailure):
    """429, 5xx or connection errors until the retries or the deadline ran out."""

    code = "PROVIDER_UNAVAILABLE"


class ProviderRateLimited(ProviderUnavailable):
    """429 until the retries or the deadline ran out, or a Retry-After that ends past the
    deadline."""

    code = "PROVIDER_RATE_LIMITED"


class ProviderRejected(ProviderFailure):
    """The provider refused the request as invalid (400, 422, another 4xx other than 408 and
    429, or a 500 whose body says the request was invalid) or answered in a shape it should not;
    sending the same request again cannot help, so it is never retried."""

    code = "PROVIDER_REJECTED"


class ProviderRedirected(ProviderFailure):
    """The provider answered with a redirect; it is never followed (the key would go with the
    request) nor retried: the base URL is wrong."""

    code = "PROVIDER_REDIRECTED"


class AnswerTooLong(ProviderFailure):
    """The answer's body ran past its byte limit, derived from the request's output token
    limit, however much the provider sent."""

    code = "ANSWER_TOO_LONG"


class StreamBroken(ProviderFailure):
    """A started stream ended without its terminal event (connection cut, error event)."""

    code = "PROVIDER_STREAM_BROKEN"


class ModelStream(Protocol):
    """A started streamed answer."""

    @property
    def request_sha256(self) -> str:
        """SHA-256 of the exact request body sent."""
        ...

    @property
    def requests(self) -> int:
        """HTTP requests made to start the stream, retries included."""
        ...

    def events(self) -> AsyncIterator[StreamEvent]:
        """Deltas as the provider sends them, then one :class:`StreamEnd`; a stream that ends
        any other way raises :class:`StreamBroken` or :class:`ProviderTimeout`."""
        ...


class ModelProvider(Protocol):
    """A model endpoint: one wire format, one base URL, one key."""

    @property
    def name(self) -> str:
        """Provider name as on GenAI spans, for example "openai" or "anthropic"."""
        ...

    async def complete(self, request: ModelRequest, deadline: float | None) -> Completion:
        """One answer; ``deadline`` is a ``time.monotonic()`` instant to give up at."""
        ...

    def open_stream(
        self, request: ModelRequest, deadline: float | None
    ) -> AbstractAsyncContextManager[ModelStream]:
        """Start a streamed answer; entering fails with :class:`ProviderFailure` when the
        response cannot be started (after the retries)."""
        ...

    def echoes_key(self, text: str) -> bool:
        """Whether ``text`` (that the provider wrote) holds the provider's key."""
        ...

    async def aclose(self) -> None:
        """Close the provider's connections."""
        ...


# One encoder for every request: json.dumps with options builds a new encoder on each call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def encode_json(value: Any) -> str:
    """``value`` as compact JSON text, non-ASCII characters as they are."""
    return _ENCODER.encode(value)


def encode_body(body: dict[str, Any]) -> tuple[bytes, str]:
    """The exact request bytes and their lower-case hex SHA-256.

    Top-level :class:`RawJson` values go in as they are; every other value is encoded here.
    The bytes are the same as encoding the whole decoded body in one go.
    """
    members = (
        f"{encode_json(key)}:{value if isinstance(value, RawJson) else encode_json(value)}"
        for key, value in body.items()
    )
    raw = ("{" + ",".join(members) + "}").encode()
    return raw, hashlib.sha256(raw).hexdigest()
