"""Token estimates of what is sent to a model: a text, and a whole rendered prompt.

No tokenizer ships with the gateway, so tokens are estimated at :data:`CHARS_PER_TOKEN`
characters each, erring high for Vietnamese. A prompt's estimate counts every message (system
rules, data blocks with their headers and ids, history, the question), a few tokens per message
for its role and separators, and the output schema as text, which providers that cannot
constrain output add to the system prompt: what a prompt's ``max_input_tokens`` bounds is all
of it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from nemo_gateway.providers.base import ChatMessage, OutputSchema

CHARS_PER_TOKEN = 3
MESSAGE_OVERHEAD_TOKENS = 4


def estimate_tokens(text: str) -> int:
    """A conservative token estimate of ``text``."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def prompt_tokens(messages: Iterable[ChatMessage], schema: OutputSchema | None = None) -> int:
    """Estimated input tokens of a model request with these messages and output schema."""
    total = sum(estimate_tokens(m.content) + MESSAGE_OVERHEAD_TOKENS for m in messages)
    return total + (estimate_tokens(schema.instruction) if schema is not None else 0)
