"""Chat text is made safe for the identifier gate before the gate sees the bundle.

Chat messages and summaries are free text: a learner may type their own account key, a parent may
paste one (perhaps percent-encoded from a link), a tutor reply may teach the English words "name"
and "address" as ``"name": tên``, a lesson on JSON may quote ``{"email": "x@example.com"}``. Such
text is stored as written. If the gate simply blocked it, every later turn of that session would
fail for good, since the message stays in the history. So the conversation builder redacts free
text first (:func:`redact_chat_text`), with the gate's own matcher, and says what it removed:

- a forbidden value (the learner's key, the keys linked to it), in any spelling the gate reads,
  becomes :data:`ID_MASK`; an encoded chunk (base64, percent, HTML references, escapes) that
  decodes to one, or to a forbidden field name, becomes :data:`ENCODED_MASK`;
- a forbidden field name in a key position (``"email":``, ``'phone':``, ``email:`` at the start of
  a line) becomes :data:`FIELD_MASK` and the value written after it :data:`VALUE_MASK`.

The rest of the message stays as written. Only text the gate would still refuse after all that (it
cannot happen with the rules above, but the gate has the last word) is replaced by
:data:`OMITTED`. The gate still runs on the whole bundle afterwards; everything that is not free
text (state, profile, knowledge, ids of the bundle) is not redacted: a key there is a bug and is
blocked.

Names written in chat are passed through. The context service cannot know them (its database role
has no privilege on name columns, by design), and a learner telling a tutor their name is part of
the conversation the learner chose to have; the gate's guarantee is about what the platform adds,
not about what the learner writes.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from google.protobuf.struct_pb2 import Struct, Value

from nemo_context.gate import is_forbidden_name, text_finding
from nemo_context.gate.text import (
    decode_all,
    encoded_chunks,
    fold_with_offsets,
    text_keys,
    value_matcher,
)

ID_MASK: Final = "[id removed]"
ENCODED_MASK: Final = "[encoded id removed]"
FIELD_MASK: Final = "[field removed]"
VALUE_MASK: Final = "[value removed]"
OMITTED: Final = "[message removed: it could not be shown safely]"

_VALUE_ENDS: Final = frozenset(",;}]|\n\x00")


def _value_end(text: str, start: int) -> int:
    """Where the value written from ``start`` ends: its closing quote, or the next separator."""
    position = start
    if position < len(text) and text[position] in "\"'":
        quote = text[position]
        position += 1
        while position < len(text) and text[position] != quote and text[position] != "\n":
            position += 2 if text[position] == "\\" else 1
        return min(position + 1, len(text))
    while position < len(text) and text[position] not in _VALUE_ENDS:
        position += 1
    return position


def _apply(text: str, spans: list[tuple[int, int, str]]) -> str:
    """``text`` with each span replaced by its mask; overlapping spans become one mask."""
    pieces: list[str] = []
    position = 0
    for start, end, mask in sorted(spans):
        if start < position:  # inside the previous mask: it grows
            position = max(position, end)
            continue
        pieces.extend((text[position:start], mask))
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def redact_chat_text(text: str, forbidden_values: Collection[str]) -> str:
    """``text`` as the conversation bundle may carry it; see the module docstring."""
    matcher = value_matcher(tuple(sorted(forbidden_values)))
    if text_finding(text, matcher) is None:
        return text
    spans: list[tuple[int, int, str]] = []
    folded, origins = fold_with_offsets(text)
    for match in matcher.finditer(folded):
        spans.append((origins[match.start()], origins[match.end() - 1] + 1, ID_MASK))
    for key in text_keys(text):
        if is_forbidden_name(key.name):
            spans.append((key.start, key.end, FIELD_MASK))
            start = key.value_start
            while start < len(text) and text[start] in " \t":
                start += 1
            end = _value_end(text, start)
            if end > start:
                spans.append((start, end, VALUE_MASK))
    for start, end, decoded in encoded_chunks(text):
        if text_finding(decoded, matcher, depth=1) is not None:
            spans.append((start, end, ENCODED_MASK))
    redacted = _apply(text, spans)
    if text_finding(redacted, matcher) is None:
        return redacted
    # A key or a name split across encoded chunks: masked in the decoded text instead.
    decoded = decode_all(text)
    if decoded != text:
        redacted = redact_chat_text(decoded, forbidden_values)
        if text_finding(redacted, matcher) is None:
            return redacted
    return OMITTED


def redact_struct(struct: Struct, forbidden_values: Collection[str]) -> None:
    """Redact, in place, every string value of ``struct`` (a conversation state) as chat text;
    keys are left as they are (a forbidden key there is a bug, and the gate blocks it)."""
    for value in struct.fields.values():
        _redact_value(value, forbidden_values)


def _redact_value(value: Value, forbidden_values: Collection[str]) -> None:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        value.string_value = redact_chat_text(value.string_value, forbidden_values)
    elif kind == "struct_value":
        redact_struct(value.struct_value, forbidden_values)
    elif kind == "list_value":
        for item in value.list_value.values:
            _redact_value(item, forbidden_values)
