"""Anthropic messages API.

The output schema goes into the system prompt, after the prompt's own system text, as compact
JSON (the prompts ask for JSON that follows it and the pipeline validates it); the API's own
structured-output option is a beta this gateway does not depend on.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import SecretStr

from nemo_gateway.providers.base import (
    ModelRequest,
    StreamEnd,
    StreamEvent,
    TextDelta,
    Usage,
)
from nemo_gateway.providers.http import ParsedAnswer, parsed_answer, token_count

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
TRUNCATED_STOP_REASON = "max_tokens"
USAGE_KEYS = ("input_tokens", "output_tokens")


class AnthropicMessagesFormat:
    """Request and answer shapes of ``POST {base}/v1/messages``."""

    name = "anthropic"
    path = "/v1/messages"

    def headers(self, api_key: SecretStr | None) -> dict[str, str]:
        headers = {"content-type": "application/json", "anthropic-version": API_VERSION}
        if api_key is not None:
            headers["x-api-key"] = api_key.get_secret_value()
        return headers

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        parts = [m.content for m in request.messages if m.role == "system"]
        if request.output_schema is not None:
            parts.append(request.output_schema.instruction)
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
        if stream:
            body["stream"] = True
        return body

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
