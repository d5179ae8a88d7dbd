"""OpenAI-compatible chat completions (OpenAI, NVIDIA NIM, vLLM, Ollama, llama.cpp server).

With ``json_schema_mode`` the output schema goes into ``response_format`` and the server
constrains the answer to it. Without it (servers that only know JSON mode) the request asks for
a JSON object and the schema goes into the system prompt as compact JSON, after the prompt's
own system text.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import SecretStr

from nemo_gateway.providers.base import (
    ModelRequest,
    RawJson,
    StreamEnd,
    StreamEvent,
    TextDelta,
    Usage,
    encode_json,
)
from nemo_gateway.providers.http import ParsedAnswer, parsed_answer, token_count

DEFAULT_BASE_URL = "https://api.openai.com/v1"
TRUNCATED_FINISH_REASON = "length"
USAGE_KEYS = ("prompt_tokens", "completion_tokens")
_DONE = "[DONE]"
_JSON_OBJECT = RawJson('{"type":"json_object"}')


class OpenAIChatFormat:
    """Request and answer shapes of ``POST {base}/chat/completions``."""

    name = "openai"
    path = "/chat/completions"

    def __init__(self, *, json_schema_mode: bool) -> None:
        self._json_schema_mode = json_schema_mode

    def headers(self, api_key: SecretStr | None) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if api_key is not None:
            headers["authorization"] = f"Bearer {api_key.get_secret_value()}"
        return headers

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        schema = request.output_schema
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        if schema is not None and not self._json_schema_mode:
            _add_to_system(messages, schema.instruction)
        body: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "temperature": request.temperature,
            "max_tokens": request.max_output_tokens,
        }
        if schema is not None:
            # {"type": "json_schema", "json_schema": {"name": ..., "schema": ...}}, with the
            # schema's JSON encoded once per prompt.
            body["response_format"] = (
                RawJson(
                    '{"type":"json_schema","json_schema":{"name":'
                    f"{encode_json(schema.name)},"
                    f'"schema":{schema.encoded}}}}}'
                )
                if self._json_schema_mode
                else _JSON_OBJECT
            )
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def parse(self, payload: Any) -> ParsedAnswer:
        try:
            choice = payload["choices"][0]
            text = choice["message"]["content"]
            finish_reason = choice.get("finish_reason") or ""
        except (KeyError, IndexError, TypeError):
            raise ValueError("no choices[0].message.content") from None
        if not isinstance(text, str):
            raise ValueError("choices[0].message.content is not text")
        return parsed_answer(
            payload,
            text=text,
            finish_reason=finish_reason,
            truncated_reason=TRUNCATED_FINISH_REASON,
            usage_keys=USAGE_KEYS,
        )

    def stream_decoder(self) -> OpenAIStreamDecoder:
        return OpenAIStreamDecoder()


def _add_to_system(messages: list[dict[str, str]], text: str) -> None:
    """Append ``text`` to the first system message, or open the conversation with it."""
    for message in messages:
        if message["role"] == "system":
            message["content"] = f"{message['content']}\n\n{text}"
            return
    messages.insert(0, {"role": "system", "content": text})


class OpenAIStreamDecoder:
    """Chunks ``data: {...}`` until ``data: [DONE]``; usage comes in a last chunk."""

    def __init__(self) -> None:
        self._finish_reason = ""
        self._usage = Usage()
        self._model = ""
        self._done = False

    @property
    def finished(self) -> bool:
        return self._done

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        if data == _DONE:
            self._done = True
            return [
                StreamEnd(
                    finish_reason=self._finish_reason,
                    truncated=self._finish_reason == TRUNCATED_FINISH_REASON,
                    usage=self._usage,
                    response_model=self._model,
                )
            ]
        try:
            chunk = json.loads(data)
        except ValueError:
            raise ValueError("a chunk is not JSON") from None
        if not isinstance(chunk, dict):
            raise ValueError("a chunk is not an object")
        if "error" in chunk:
            raise ValueError("the provider sent an error chunk")
        self._model = str(chunk.get("model") or self._model)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = Usage(*(token_count(usage, key) for key in USAGE_KEYS))
        events: list[StreamEvent] = []
        for choice in chunk.get("choices") or ():
            content = (choice.get("delta") or {}).get("content")
            if isinstance(content, str) and content:
                events.append(TextDelta(content))
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])
        return events
