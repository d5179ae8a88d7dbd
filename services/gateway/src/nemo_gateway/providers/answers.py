"""What the wire formats read from a whole answer, independent of how it was sent: its text,
finish reason, token counts and the model that answered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """The parts of a whole answer the gateway uses."""

    text: str
    finish_reason: str
    truncated: bool
    input_tokens: int | None
    output_tokens: int | None
    response_model: str


def token_count(usage: Any, key: str) -> int | None:
    """``usage[key]`` when the provider reported it as a whole number."""
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) else None


def parsed_answer(
    payload: Any,
    *,
    text: str,
    finish_reason: str,
    truncated_reason: str,
    usage_keys: tuple[str, str],
) -> ParsedAnswer:
    """A whole answer from its text and finish reason, with the token counts the provider names
    ``usage_keys`` (input, output) in ``payload["usage"]`` and the model that answered."""
    usage = payload.get("usage")
    return ParsedAnswer(
        text=text,
        finish_reason=finish_reason,
        truncated=finish_reason == truncated_reason,
        input_tokens=token_count(usage, usage_keys[0]),
        output_tokens=token_count(usage, usage_keys[1]),
        response_model=str(payload.get("model") or ""),
    )
