"""OpenAI-compatible chat completions (OpenAI, NVIDIA NIM, vLLM, Ollama, llama.cpp's servers).

The request speaks the dialect of the server behind the base URL (:mod:`.servers`): how the
output schema is sent (``json_schema``, llama-cpp-python's ``json_object`` with ``schema``, or
the schema in the system prompt, after the prompt's own system text), the name of the token
limit, and how a prompt's reasoning is switched. Answers are read from ``content`` only:
reasoning fields are never the answer, and a leading ``<think>`` block is dropped.
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
from nemo_gateway.providers.reasoning import ReasoningFilter, strip_reasoning
from nemo_gateway.providers.schemas import OPENAI_STRICT, constrained_schema
from nemo_gateway.providers.servers import (
    OPENAI_REASONING_EFFORT,
    Dialect,
    ServerProfile,
    openai_reasons,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
TRUNCATED_FINISH_REASON = "length"
USAGE_KEYS = ("prompt_tokens", "completion_tokens")
_DONE = "[DONE]"
_JSON_OBJECT = RawJson('{"type":"json_object"}')


class OpenAIChatFormat:
    """Request and answer shapes of ``POST {base}/chat/completions`` for one kind of server."""

    path = "/chat/completions"

    def __init__(
        self, profile: ServerProfile, *, dialect: Dialect | None = None, name: str = "openai"
    ) -> None:
        self.name = name
        """Provider name on spans and run records: "openai", or "local" for the local model."""
        self._profile = profile
        self._dialect = dialect or profile.dialect
        # Encoded once per output schema: the schema's JSON text -> its response_format.
        self._formats: dict[str, RawJson | None] = {}

    def headers(self, api_key: SecretStr | None) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if api_key is not None:
            headers["authorization"] = f"Bearer {api_key.get_secret_value()}"
        return headers

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        schema = request.output_schema
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        if schema is not None and self._dialect in ("json_object", "prompt"):
            _add_to_system(messages, schema.instruction)
        body: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "temperature": request.temperature,
            self._profile.token_limit_field: request.max_output_tokens,
        }
        if schema is not None:
            response_format = self._response_format(schema)
            if response_format is not None:
                body["response_format"] = response_format
        self._switch_reasoning(body, request)
        if stream:
            body["stream"] = True
            if self._profile.stream_usage:
                body["stream_options"] = {"include_usage": True}
        return body

    def _response_format(self, schema: OutputSchema) -> RawJson | None:
        key = schema.encoded
        if key not in self._formats:
            self._formats[key] = self._encode_format(schema)
        return self._formats[key]

    def _encode_format(self, schema: OutputSchema) -> RawJson | None:
        if self._dialect == "prompt":
            return None
        if self._dialect == "json_object":
            return _JSON_OBJECT
        if self._dialect == "json_object_schema":
            return RawJson(f'{{"type":"json_object","schema":{schema.encoded}}}')
        strict = (
            constrained_schema(schema.schema, OPENAI_STRICT)
            if self._profile.strict_schema
            else None
        )
        if strict is not None:
            return RawJson(
                '{"type":"json_schema","json_schema":{"name":'
                f'{encode_json(schema.name)},"strict":true,"schema":{encode_json(strict)}}}}}'
            )
        return RawJson(
            '{"type":"json_schema","json_schema":{"name":'
            f'{encode_json(schema.name)},"schema":{schema.encoded}}}}}'
        )

    def _switch_reasoning(self, body: dict[str, Any], request: ModelRequest) -> None:
        switch = self._profile.reasoning
        if switch == "chat_template_kwargs":
            body["chat_template_kwargs"] = {"enable_thinking": request.reasoning}
        elif switch == "reasoning_effort" and openai_reasons(request.model):
            body["reasoning_effort"] = OPENAI_REASONING_EFFORT[request.reasoning]

    def parse(self, payload: Any) -> ParsedAnswer:
        try:
            choice = payload["choices"][0]
            message = choice["message"]
            finish_reason = choice.get("finish_reason") or ""
        except (KeyError, IndexError, TypeError):
            raise ValueError("no choices[0].message") from None
        text = message.get("content") if isinstance(message, dict) else None
        if text is None:
            # A reasoning model that spent its whole limit thinking answers with no content.
            text = ""
        if not isinstance(text, str):
            raise ValueError("choices[0].message.content is not text")
        return parsed_answer(
            payload,
            text=strip_reasoning(text),
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
    """Chunks ``data: {...}`` until ``data: [DONE]``; usage comes in a last chunk when the
    server sends it (servers that do not leave it unknown)."""

    def __init__(self) -> None:
        self._finish_reason = ""
        self._usage = Usage()
        self._model = ""
        self._done = False
        self._reasoning = ReasoningFilter()

    @property
    def finished(self) -> bool:
        return self._done

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        if data == _DONE:
            self._done = True
            events: list[StreamEvent] = []
            if rest := self._reasoning.flush():
                events.append(TextDelta(rest))
            events.append(
                StreamEnd(
                    finish_reason=self._finish_reason,
                    truncated=self._finish_reason == TRUNCATED_FINISH_REASON,
                    usage=self._usage,
                    response_model=self._model,
                )
            )
            return events
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
        events = []
        for choice in chunk.get("choices") or ():
            content = (choice.get("delta") or {}).get("content")
            if isinstance(content, str) and content and (text := self._reasoning.feed(content)):
                events.append(TextDelta(text))
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])
        return events
