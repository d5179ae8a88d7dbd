"""What a provider sends is untrusted: the strings the gateway keeps from it are filtered, its key
is redacted wherever it is echoed, and its bodies are read with a bound.

- **Labels** (the answering model's name, finish reasons, error types and codes) reach run
  records, spans and logs: they keep only the characters model names and codes are made of, at
  most :data:`MAX_LABEL_CHARS`, with the key redacted.
- **Text** (answers and deltas) keeps what it says, with the key redacted; what a learner may see
  of it is the guardrails' business.
- **Bodies**: a whole answer or a stream is read up to :func:`answer_byte_limit` bytes, derived
  from the request's own output token limit, however much the provider sends.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Final

import httpx
from pydantic import SecretStr

MAX_LABEL_CHARS: Final = 128
REDACTED: Final = "[redacted]"
BYTES_PER_OUTPUT_TOKEN: Final = 1024
"""Room per output token in a body: a token's text, JSON-escaped, in an SSE chunk with its
envelope, is far less."""
BASE_BODY_BYTES: Final = 64 * 1024
"""Room for the envelope of an answer (usage, ids, a reasoning block's start)."""
_NOT_LABEL: Final = re.compile(r"[^A-Za-z0-9._:/@+-]")


def answer_byte_limit(max_output_tokens: int) -> int:
    """How many bytes of a provider's body are read for an answer of this token limit."""
    return BASE_BODY_BYTES + BYTES_PER_OUTPUT_TOKEN * max_output_tokens


class BodyTooLarge(Exception):
    """A provider's body ran past its byte limit."""


@dataclass(frozen=True)
class Redactor:
    """Removes a provider key from what the provider sends back."""

    key: SecretStr | None

    def text(self, value: str) -> str:
        secret = self.key.get_secret_value() if self.key is not None else ""
        return value.replace(secret, REDACTED) if secret and secret in value else value

    def label(self, value: object) -> str:
        """``value`` as a label: label characters only, bounded, key redacted."""
        return self.text(_NOT_LABEL.sub("", str(value))[:MAX_LABEL_CHARS])


class BoundedStream(httpx.AsyncByteStream):
    """A response body that raises :class:`BodyTooLarge` past ``limit`` bytes."""

    def __init__(self, stream: httpx.AsyncByteStream, limit: int) -> None:
        self._stream = stream
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        async for chunk in self._stream:
            total += len(chunk)
            if total > self._limit:
                raise BodyTooLarge
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()
