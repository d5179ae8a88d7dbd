"""Token budget: a conservative token estimate and trimming that keeps what must stay.

No tokenizer can be shipped or downloaded here, so tokens are estimated from character classes,
erring high (an under-estimate could overflow a model's context window, an over-estimate only
drops an old message early):

- a run of ASCII letters and digits costs one token per 3 characters, rounded up (English BPE
  averages about 4 characters per token);
- any other visible ASCII character (punctuation, brackets, operators) costs one token;
- a non-ASCII character costs one token per 2 bytes of its UTF-8 form, rounded up: one for a
  Vietnamese letter with a diacritic ("ằ", "đ"), two for CJK characters and emoji, which
  byte-level vocabularies often split into several tokens;
- whitespace is free (BPE merges it into the following word).

Every rule rounds up and charges punctuation and diacritics in full: "Hằng đẳng thức" is counted
as 12 tokens, where byte-level BPE vocabularies spend about 6 to 9.

The estimate is taken over what the gateway sends a model from the bundle (``tutor.chat_reply``):
each history message and the current message as a chat message of their own (their text, plus
:data:`MESSAGE_OVERHEAD_TOKENS` for the role and separators a provider's chat template adds;
a tool result's summary is marked ``[tool]``), and the summary, state, grade and retrieved
knowledge as one JSON document inside a tag. Ids and the bundle's own bookkeeping are never
sent and cost nothing. Trimming drops, until the bundle fits: whole history turns, oldest
first; then retrieved knowledge, least relevant first; then the stored summary. The current
message, the structured state and the profile are never dropped; when they alone exceed the
budget the bundle is returned over budget, and ``estimated_tokens`` says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final

from google.protobuf import json_format

from nemo_protos.context.v1 import conversation_pb2 as pb

_PIECES: Final = re.compile(r"[A-Za-z0-9]+|[\x21-\x7e]|[^\x00-\x7f]")

MESSAGE_OVERHEAD_TOKENS: Final = 4
"""Tokens a chat template spends on one message's role and separators."""
TAG_TOKENS: Final = 16
"""The tag around the conversation data document, opening and closing, in either language."""
TOOL_MARK: Final = "[tool] "
"""How the gateway marks a tool result's summary in the history."""


def estimate_tokens(text: str) -> int:
    """Conservative token count of ``text`` (see the module docstring)."""
    total = 0
    for piece in _PIECES.findall(text):
        if piece.isascii():
            total += -(-len(piece) // 3) if piece.isalnum() else 1
        else:
            total += -(-len(piece.encode("utf-8")) // 2)
    return total


def _message_tokens(message: pb.ConversationMessage) -> int:
    mark = TOOL_MARK if message.type == pb.MESSAGE_TYPE_TOOL_RESULT else ""
    return estimate_tokens(mark + message.content) + MESSAGE_OVERHEAD_TOKENS


def conversation_data(bundle: pb.ConversationBundle) -> str:
    """The summary, state, grade and retrieved knowledge as the one JSON document a model reads
    beside the messages."""
    data: dict[str, Any] = {
        "summary": bundle.conversation_summary,
        "state": json_format.MessageToDict(bundle.state),
        "grade": bundle.profile.grade or None,
        "knowledge": [
            {"title": hit.node.title, "description": hit.node.description}
            for hit in bundle.retrieved_knowledge
        ],
    }
    return json.dumps(data, ensure_ascii=False, sort_keys=True)


def bundle_tokens(bundle: pb.ConversationBundle) -> int:
    """Estimated tokens of what a model is sent from ``bundle`` (see the module docstring)."""
    messages = sum(_message_tokens(message) for message in bundle.recent_messages)
    current = estimate_tokens(bundle.current_user_message) + MESSAGE_OVERHEAD_TOKENS
    return messages + current + estimate_tokens(conversation_data(bundle)) + TAG_TOKENS


def trim_to_budget(
    bundle: pb.ConversationBundle,
    budget: int,
    *,
    estimate: Callable[[pb.ConversationBundle], int] = bundle_tokens,
) -> tuple[int, int]:
    """Trim ``bundle`` in place until it fits ``budget``; returns (estimated tokens, history
    messages dropped)."""
    dropped = 0
    tokens = estimate(bundle)
    while tokens > budget and bundle.recent_messages:
        oldest_turn = bundle.recent_messages[0].turn_id
        while bundle.recent_messages and bundle.recent_messages[0].turn_id == oldest_turn:
            del bundle.recent_messages[0]
            dropped += 1
        tokens = estimate(bundle)
    while tokens > budget and bundle.retrieved_knowledge:
        # Hits are ordered best first: the last one is the least relevant.
        del bundle.retrieved_knowledge[-1]
        tokens = estimate(bundle)
    if tokens > budget and bundle.conversation_summary:
        bundle.conversation_summary = ""
        tokens = estimate(bundle)
    return tokens, dropped
