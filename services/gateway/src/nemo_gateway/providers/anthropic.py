"""Anthropic messages API.

Models with structured outputs get the output schema as ``output_config.format`` (rewritten to
the subset it accepts, :mod:`.schemas`); for the others it goes into the system prompt, after the
prompt's own system text, as compact JSON. Either way the pipeline validates the answer. Only
``text`` blocks are the answer: ``thinking`` blocks and deltas are never read.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import SecretStr

from nemo_gateway.providers.answers import ParsedAnswer, parsed_answer, token_count
from nemo_gateway.providers.base import (
    ModelRequest,
    OutputSchema,
    RawJson,
    StreamEnd,
    StreamEvent,
    TextDelta,
    Usage,
    encode_json,
)
from nemo_gateway.providers.schemas import ANTHROPIC, constrained_schema

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
TRUNCATED_STOP_REASON = "max_tokens"
USAGE_KEYS = ("input_tokens", "output_tokens")

#: Model families with structured outputs (Claude Opus 4.1, the 4.5 generation and later); any
#: other model gets the schema in the system prompt.
STRUCTURED_OUTPUT_MODELS: tuple[str, ...] = (
    "claude-opus-4-1", "claude-opus-4-5", "claude-sonnet-4-5", "claude-haiku-4-5",
    "claude-opus-4-6", "claude-sonnet-4-6", "claude-opus-4-7", "claude-opus-4-8",
    "claude-opus-5", "claude-sonnet-5", "claude-haiku-5",
)  # fmt: skip


def has_structured_output(model: str) -> bool:
    """Whether ``model`` takes ``output_config.format`` (``claude-sonnet-4.5`` spelled with a dot
    and provider prefixes count too)."""
    name = model.rsplit("/", 1)[-1].lower().replace(".", "-")
    return any(name.startswith(family) for family in STRUCTURED_OUTPUT_MODELS)


class AnthropicMessagesFormat:
    """Request and answer shapes of ``POST {base}/v1/messages``."""

    name = "anthropic"
    path = "/v1/messages"

    def __init__(self) -> None:
        # Encoded once per output schema: the schema's JSON text -> its output_config.
        self._formats: dict[str, RawJson | None] = {}

    def headers(self, api_key: SecretStr | None) -> dict[str, str]:
        headers = {"content-type": "application/json", "anthropic-version": API_VERSION}
        if api_key is not None:
            headers["x-api-key"] = api_key.get_secret_value()
        return headers

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        parts = [m.content for m in request.messages if m.role == "system"]
        schema = request.output_schema
        output_config = (
            self._output_config(schema)
            if schema is not None and has_structured_output(request.model)
            else None
        )
        if schema is not None and output_config is None:
            parts.append(schema.instruction)
        system = "\n\n".join(parts)
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_output_tokens,
            "temperature": request.temperature,
            "messages": [
                {"role": m.role, "content": m.content}
                for m in request.messages
                if m.role != "system"
            ],
        }
        if system:
            body["system"] = system
        if output_config is not None:
            body["output_config"] = output_config
        if stream:
            body["stream"] = True
        return body

    def _output_config(self, schema: OutputSchema) -> RawJson | None:
        """``output_config`` for ``schema``; None when its root is not an object."""
        key = schema.encoded
        if key not in self._formats:
            rewritten = constrained_schema(schema.schema, ANTHROPIC)
            self._formats[key] = (
                None
                if rewritten is None
                else RawJson(
                    f'{{"format":{{"type":"json_schema","schema":{encode_json(rewritten)}}}}}'
                )
            )
        return self._formats[key]

    def parse(self, payload: Any) -> ParsedAnswer:
        try:
            blocks = payload["content"]
            text = "".join(b["text"] for b in blocks if b.get("type") == "text")
        except (KeyError, TypeError):
            raise ValueError("no text content blocks") from None
        return parsed_answer(
            payload,
            text=text,
            finish_reason=str(payload.get("stop_reason") or ""),
            truncated_reason=TRUNCATED_STOP_REASON,
            usage_keys=USAGE_KEYS,
        )

    def stream_decoder(self) -> AnthropicStreamDecoder:
        return AnthropicStreamDecoder()


class AnthropicStreamDecoder:
    """Events message_start, content_block_delta, message_delta, then message_stop."""

    def __init__(self) -> None:
        self._stop_reason = ""
        self._input_tokens: int | None = None
        self._output_tokens: int | None = None
        self._model = ""
        self._done = False

    @property
    def finished(self) -> bool:
        return self._done

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        if event == "ping":
            return []
        if event == "error":
            raise ValueError("the provider sent an error event")
        try:
            payload = json.loads(data)
        except ValueError:
            raise ValueError("an event is not JSON") from None
        if event == "message_start":
            message = payload.get("message") or {}
            self._model = str(message.get("model") or "")
            self._input_tokens = token_count(message.get("usage"), "input_tokens")
        elif event == "content_block_delta":
            delta = payload.get("delta") or {}
            if delta.get("type") == "text_delta" and delta.get("text"):
                return [TextDelta(str(delta["text"]))]
        elif event == "message_delta":
            self._stop_reason = str((payload.get("delta") or {}).get("stop_reason") or "")
            self._output_tokens = token_count(payload.get("usage"), "output_tokens")
        elif event == "message_stop":
            self._done = True
            return [
                StreamEnd(
                    finish_reason=self._stop_reason,
                    truncated=self._stop_reason == TRUNCATED_STOP_REASON,
                    usage=Usage(self._input_tokens, self._output_tokens),
                    response_model=self._model,
                )
            ]
        return []
