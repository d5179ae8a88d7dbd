"""Masking text a person wrote, so a build can go on where the gate would refuse it.

A chat message, a goal's title or an engine's reason is written by a person (or by a model from
what a person wrote). What must not leave the service is replaced where it stands and counted by
kind, never by value:

- a forbidden value (the learner's key, the keys linked to it), in any spelling the gate reads,
  becomes :data:`ID_MASK`; an encoded chunk (base64, percent, HTML references, escapes) that
  decodes to one, or to a forbidden field name, becomes :data:`ENCODED_MASK`;
- a forbidden field name in a key position (``"email":``, ``'phone':``, ``email:`` at the start
  of a line) becomes :data:`FIELD_MASK` and the value written after it :data:`VALUE_MASK`;
- a name, e-mail, phone number, address, school or birth date of the child's circle, and anyone's
  contact data by its shape (:mod:`.identifiers`), becomes its typed placeholder (``[name]``,
  ``[phone]``, see :data:`.rules.PLACEHOLDERS`).

Text the gate would still refuse after all that is replaced whole by :data:`OMITTED`. The gate
runs on the whole bundle afterwards and has the last word.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Final

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import ListValue, Struct, Value

from nemo_context.gate.circle import Circle
from nemo_context.gate.identifiers import identifier_spans
from nemo_context.gate.names import is_forbidden_key, is_forbidden_name
from nemo_context.gate.reading import Reading, key_rule, passes, read
from nemo_context.gate.rules import PLACEHOLDERS
from nemo_context.gate.text import (
    ValueMatcher,
    decode_all,
    encoded_chunks,
    fold_with_offsets,
    text_keys,
)
from nemo_protos.context.v1 import learner_context_pb2 as pb

ID_MASK: Final = "[id removed]"
ENCODED_MASK: Final = "[encoded id removed]"
FIELD_MASK: Final = "[field removed]"
VALUE_MASK: Final = "[value removed]"
OMITTED: Final = "[message removed: it could not be shown safely]"

KEY: Final = "key"
FIELD: Final = "field"
OMITTED_KIND: Final = "whole_text"

_KINDS: Final = {
    KEY: pb.IDENTIFIER_KIND_KEY,
    FIELD: pb.IDENTIFIER_KIND_FIELD,
    OMITTED_KIND: pb.IDENTIFIER_KIND_WHOLE_TEXT,
    "name": pb.IDENTIFIER_KIND_NAME,
    "email": pb.IDENTIFIER_KIND_EMAIL,
    "phone": pb.IDENTIFIER_KIND_PHONE,
    "address": pb.IDENTIFIER_KIND_ADDRESS,
    "school": pb.IDENTIFIER_KIND_SCHOOL,
    "birth_date": pb.IDENTIFIER_KIND_BIRTH_DATE,
}

_VALUE_ENDS: Final = frozenset(",;}]|\n\x00")
_KEY_ENDS: Final = ":=\uff1a\uff1d"
"""What ends a key, in full-width forms too (as :func:`.text.text_keys` reads them)."""
VALUE: Final = ""
"""The value after a masked field: masked with it, counted with it."""
_FIRST: Final = frozenset({KEY, FIELD, VALUE})

Spans = list[tuple[int, int, str, str]]
"""(start, end, mask, kind)"""


def _value_end(text: str, start: int) -> int:
    """Where the value written from ``start`` ends: its closing quote, or the next separator."""
    position = start
    if position < len(text) and text[position] in "\"'":
        quote = text[position]
        position += 1
        while position < len(text) and text[position] != quote and text[position] != "\n":
            position += 2 if text[position] == "\\" else 1
        # The closing quote goes with the value; a line break that cut it short stays.
        closed = position < len(text) and text[position] == quote
        return position + 1 if closed else min(position, len(text))
    while position < len(text) and text[position] not in _VALUE_ENDS:
        position += 1
    return position


def _apply(text: str, spans: Spans, counts: Counter[str]) -> str:
    """``text`` with each span replaced by its mask; overlapping spans become one mask."""
    pieces: list[str] = []
    position = 0
    # At one start, the longest span first, and a field's mask before an identifier's.
    for start, end, mask, kind in sorted(spans, key=lambda s: (s[0], -s[1], s[3] not in _FIRST)):
        if start < position:  # inside the previous mask: it grows
            position = max(position, end)
            continue
        pieces.extend((text[position:start], mask))
        if kind != VALUE:
            counts[kind] += 1
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def _spans(text: str, matcher: ValueMatcher, circle: Circle) -> Spans:
    spans: Spans = []
    folded, origins = fold_with_offsets(text)
    for match in matcher.finditer(folded):
        spans.append((origins[match.start()], origins[match.end() - 1] + 1, ID_MASK, KEY))
    for key in text_keys(text):
        if is_forbidden_key(key):
            spans.append((key.start, key.end, FIELD_MASK, FIELD))
            start = key.value_start
            while start < len(text) and text[start] in " \t":
                start += 1
            end = _value_end(text, start)
            if end > start:
                spans.append((start, end, VALUE_MASK, VALUE))
    for start, end, decoded in encoded_chunks(text):
        if key_rule(Reading(decoded, depth=1), matcher) is not None:
            spans.append((start, end, ENCODED_MASK, KEY))
            spans.extend(_value_after_encoded_key(text, end, decoded))
    spans.extend(
        (start, end, PLACEHOLDERS[kind], kind)
        for start, end, kind in identifier_spans(text, circle)
    )
    return spans


def _value_after_encoded_key(text: str, end: int, decoded: str) -> Spans:
    """The value written after an encoded chunk that decodes to a forbidden key ("%65mail: x"):
    masked with it, as the value of a key written plainly is."""
    if not any(is_forbidden_key(key) for key in text_keys(decoded)):
        return []
    position = end
    while position < len(text) and text[position] in " \t":
        position += 1
    if not decoded.rstrip().endswith(tuple(_KEY_ENDS)):
        if position >= len(text) or text[position] not in _KEY_ENDS:
            return []
        position += 1
    while position < len(text) and text[position] in " \t":
        position += 1
    value_end = _value_end(text, position)
    return [(position, value_end, VALUE_MASK, VALUE)] if value_end > position else []


def _clean(text: str, matcher: ValueMatcher, circle: Circle) -> bool:
    return passes(read(text), matcher, circle)


def mask_text(text: str, matcher: ValueMatcher, circle: Circle) -> tuple[str, Counter[str]]:
    """``text`` as a bundle may carry it, and what was masked, counted by kind."""
    counts: Counter[str] = Counter()
    if _clean(text, matcher, circle):
        return text, counts
    masked = _apply(text, _spans(text, matcher, circle), counts)
    if _clean(masked, matcher, circle):
        return masked, counts
    # A key or a name split across encoded chunks: masked in the decoded text instead.
    decoded = decode_all(text)
    if decoded != text:
        counts.clear()
        masked = _apply(decoded, _spans(decoded, matcher, circle), counts)
        if _clean(masked, matcher, circle):
            return masked, counts
    return OMITTED, Counter({OMITTED_KIND: 1})


_PLANS: dict[tuple[str, frozenset[str]], tuple[tuple[FieldDescriptor, bool], ...]] = {}


def _plan(descriptor: Any, wanted: frozenset[str]) -> tuple[tuple[FieldDescriptor, bool], ...]:
    """The fields of a message type that are a ``wanted`` string field, ``(field, True)``, or a
    message that can hold one, ``(field, False)``; worked out once per type (maps are not
    read)."""
    key = (descriptor.full_name, wanted)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = _steps(descriptor, wanted, set())
    return plan


def _steps(
    descriptor: Any, wanted: frozenset[str], visiting: set[str]
) -> tuple[tuple[FieldDescriptor, bool], ...]:
    visiting.add(descriptor.full_name)
    steps: list[tuple[FieldDescriptor, bool]] = []
    for field in descriptor.fields:
        inner = field.message_type
        if field.type == FieldDescriptor.TYPE_STRING and field.full_name in wanted:
            steps.append((field, True))
        elif (
            inner is not None
            and not inner.GetOptions().map_entry
            # A type met again inside itself may hold one at any depth.
            and (inner.full_name in visiting or _steps(inner, wanted, visiting))
        ):
            steps.append((field, False))
    visiting.discard(descriptor.full_name)
    return tuple(steps)


class TextMasker:
    """Masks text a person wrote for one build, and counts what it masked."""

    def __init__(self, matcher: ValueMatcher, circle: Circle) -> None:
        self._matcher = matcher
        self._circle = circle
        self.counts: Counter[str] = Counter()

    def redactions(self) -> list[pb.Redaction]:
        """What was masked so far, counted by kind in the order of the kinds."""
        return [
            pb.Redaction(kind=_KINDS[kind], count=count)
            for kind, count in sorted(self.counts.items(), key=lambda item: _KINDS[item[0]])
        ]

    def text(self, text: str) -> str:
        """``text`` masked (see :func:`mask_text`)."""
        masked, counts = mask_text(text, self._matcher, self._circle)
        self.counts.update(counts)
        return masked

    def fields(self, message: Message, names: Iterable[str]) -> None:
        """Mask, in place and at any depth, the string fields of ``message`` whose full names
        (``nemo.context.v1.Goal.title``) are in ``names``."""
        self._fields(message, frozenset(names))

    def _fields(self, message: Message, wanted: frozenset[str]) -> None:
        for field, text in _plan(message.DESCRIPTOR, wanted):
            value = getattr(message, field.name)
            if text and field.is_repeated:
                value[:] = [self.text(item) for item in value]
            elif text:
                if value:
                    setattr(message, field.name, self.text(value))
            elif field.is_repeated:
                for item in value:
                    self._fields(item, wanted)
            elif message.HasField(field.name):
                self._fields(value, wanted)

    def struct(self, struct: Struct) -> None:
        """Mask, in place, every string of ``struct`` (a conversation state); an entry whose key
        is a forbidden name or holds an identifier is removed and counted as a field."""
        for key in list(struct.fields):
            if is_forbidden_name(key) or not _clean(key, self._matcher, self._circle):
                del struct.fields[key]
                self.counts[FIELD] += 1
            else:
                self._value(struct.fields[key])

    def _value(self, value: Value) -> None:
        kind = value.WhichOneof("kind")
        if kind == "string_value":
            value.string_value = self.text(value.string_value)
        elif kind == "struct_value":
            self.struct(value.struct_value)
        elif kind == "list_value":
            self._list(value.list_value)

    def _list(self, values: ListValue) -> None:
        for item in values.values:
            self._value(item)
