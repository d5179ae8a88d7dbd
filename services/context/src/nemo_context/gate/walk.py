"""The walk: what a finished message holds, and which rule it breaks.

One walk gathers a message's field names and every string in it — nested messages, repeated
fields, map keys, ``google.protobuf.Struct`` values — and judges them:

- a forbidden field name: a message field, a map or Struct key, or a key written into a string
  (``"email":``, ``'email':``, ``email:`` at the start of a line), judged by its words (see
  :mod:`.rules`, the list a privacy reviewer reads);
- one of the forbidden values (the learner's key, the keys linked to the learner) in any string,
  however it is spelled or encoded (see :mod:`.text`), on token boundaries, so ``L-2041-1`` is
  caught in "see l-2041-1." written with U+2010 hyphens but not inside ``L-2041-10``;
- an identifier of the child's circle or anyone's contact data (see :mod:`.identifiers`), rule
  ``identifier_<kind>``.

Speed: message types are planned once (numbers, enums and text-free messages are never
visited), and the strings are read as one text, joined by NUL (a token boundary no key
contains), in one folded pass with a substring pre-check.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import ListValue, Struct, Value

from nemo_context.gate.circle import Circle
from nemo_context.gate.identifiers import NO_CIRCLE, identifier_kind
from nemo_context.gate.names import is_forbidden_key, is_forbidden_name
from nemo_context.gate.rules import CURRICULUM_FIELDS
from nemo_context.gate.text import (
    MAX_DECODE_DEPTH,
    ValueMatcher,
    decodings,
    fold,
    text_keys,
    value_matcher,
)

__all__ = [
    "LeakFinding",
    "find_forbidden_name",
    "find_leak",
    "forbidden_names_in",
    "text_finding",
]


@dataclass(frozen=True)
class LeakFinding:
    """What the gate found, described without the data: which rule, and where in the schema."""

    rule: str
    """``field_name``, ``key_in_text``, ``value``, ``encoded_value`` or ``identifier_<kind>``
    (``identifier_phone``...)."""
    location: str
    """Type of the message holding it (never a key or a value of the data)."""


class _Kind(Enum):
    TEXT = 1
    BYTES = 2
    MESSAGE = 3
    MAP = 4
    STRUCT = 5


@dataclass(frozen=True)
class _FieldPlan:
    name: str
    kind: _Kind
    repeated: bool
    map_value: _Kind | None = None
    curriculum: bool = False


@dataclass(frozen=True)
class _MessagePlan:
    """What is worth looking at in one message type, worked out once per type."""

    forbidden_fields: frozenset[str]
    """Declared fields with a forbidden name (checked when present)."""
    fields: tuple[_FieldPlan, ...]
    """Fields that can hold text (strings, bytes, maps, messages that can hold text); numbers,
    booleans, enums and text-free messages such as Timestamp are never visited."""


_STRUCT_TYPES: Final = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
)
_PLANS: dict[str, _MessagePlan | None] = {}


def _field_kind(field: FieldDescriptor, visiting: set[str]) -> _Kind | None:
    if field.type == FieldDescriptor.TYPE_STRING:
        return _Kind.TEXT
    if field.type == FieldDescriptor.TYPE_BYTES:
        return _Kind.BYTES
    if field.message_type is None:
        return None
    if field.message_type.full_name in _STRUCT_TYPES:
        return _Kind.STRUCT
    return _Kind.MESSAGE if _plan_of(field.message_type, visiting) is not None else None


def _plan_of(descriptor: Any, visiting: set[str] | None = None) -> _MessagePlan | None:
    """The plan of a message type; None when it can never hold text or a forbidden name."""
    full_name = descriptor.full_name
    if full_name in _PLANS:
        return _PLANS[full_name]
    visiting = visiting if visiting is not None else set()
    if full_name in visiting:
        # A recursive type: assume it can hold text (its own plan decides when walked).
        return _MessagePlan(frozenset(), ())
    visiting.add(full_name)
    fields: list[_FieldPlan] = []
    for field in descriptor.fields:
        entry = field.message_type
        if field.is_repeated and entry is not None and entry.GetOptions().map_entry:
            value_kind = _field_kind(entry.fields_by_name["value"], visiting)
            fields.append(_FieldPlan(field.name, _Kind.MAP, True, value_kind))
            continue
        kind = _field_kind(field, visiting)
        if kind is not None:
            curriculum = field.full_name in CURRICULUM_FIELDS
            fields.append(_FieldPlan(field.name, kind, field.is_repeated, curriculum=curriculum))
    visiting.discard(full_name)
    forbidden = frozenset(
        field.name for field in descriptor.fields if is_forbidden_name(field.name)
    )
    plan = _MessagePlan(forbidden, tuple(fields)) if forbidden or fields else None
    _PLANS[full_name] = plan
    return plan


class Gathered:
    """Field names and strings of one value, in the order met."""

    __slots__ = ("curriculum", "names", "texts")

    def __init__(self) -> None:
        self.names: list[tuple[str, str]] = []
        """(name, type holding it)"""
        self.texts: list[str] = []
        self.curriculum: list[str] = []
        """Curriculum titles (:data:`.rules.CURRICULUM_FIELDS`), read apart from the texts."""

    def message(self, message: Message) -> None:
        descriptor = message.DESCRIPTOR
        full_name = descriptor.full_name
        if full_name in _STRUCT_TYPES:
            self.struct_like(message)
            return
        plan = _plan_of(descriptor)
        if plan is None:
            return
        if plan.forbidden_fields:
            for present, _ in message.ListFields():
                if present.name in plan.forbidden_fields:
                    self.names.append((present.name, full_name))
        for field in plan.fields:
            self._field(message, field, full_name)

    def _field(self, message: Message, field: _FieldPlan, location: str) -> None:
        kind = field.kind
        value = getattr(message, field.name)
        if kind is _Kind.TEXT:
            texts = self.curriculum if field.curriculum else self.texts
            if field.repeated:
                texts.extend(value)
            elif value:
                texts.append(value)
        elif kind is _Kind.MAP:
            for key, item in value.items():
                self._map_entry(key, item, field.map_value, location)
        elif kind is _Kind.BYTES:
            items = value if field.repeated else [value]
            self.texts.extend(item.decode("utf-8", "replace") for item in items)
        elif field.repeated:
            # message() hands Struct, Value and ListValue to struct_like itself.
            for item in value:
                self.message(item)
        elif message.HasField(field.name):
            self.message(value)

    def _map_entry(self, key: object, item: Any, kind: _Kind | None, location: str) -> None:
        if isinstance(key, str):
            # Map keys are data named like fields: checked both as names and as text.
            self.names.append((key, location))
            self.texts.append(key)
        if kind is _Kind.TEXT:
            self.texts.append(item)
        elif kind is _Kind.BYTES:
            self.texts.append(item.decode("utf-8", "replace"))
        elif kind in (_Kind.MESSAGE, _Kind.STRUCT):
            self.message(item)

    def struct_like(self, value: Message) -> None:
        """A Struct, Value or ListValue: JSON, whose keys are field names."""
        if isinstance(value, Struct):
            for key, item in value.fields.items():
                self.names.append((key, "google.protobuf.Struct"))
                self.texts.append(key)
                self.struct_like(item)
        elif isinstance(value, ListValue):
            for item in value.values:
                self.struct_like(item)
        elif isinstance(value, Value):
            kind = value.WhichOneof("kind")
            if kind == "string_value":
                self.texts.append(value.string_value)
            elif kind == "struct_value":
                self.struct_like(value.struct_value)
            elif kind == "list_value":
                self.struct_like(value.list_value)

    def plain(self, value: object, location: str) -> None:
        """JSON-like Python data: dict keys are field names, strings are read."""
        if isinstance(value, str):
            self.texts.append(value)
        elif isinstance(value, Message):
            self.message(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                key_text = str(key)
                self.names.append((key_text, location))
                self.texts.append(key_text)
                self.plain(item, location)
        elif isinstance(value, list | tuple | set | frozenset):
            for item in value:
                self.plain(item, location)
        elif isinstance(value, bytes):
            self.texts.append(value.decode("utf-8", "replace"))


# Reading text.


def text_finding(
    text: str,
    matcher: ValueMatcher | None,
    depth: int = 0,
    *,
    decode: bool = True,
    keys_anywhere: bool = True,
) -> str | None:
    """The rule ``text`` breaks (a forbidden key written in it, one of ``matcher``'s values in
    any spelling, either of them encoded), or None. ``matcher`` None checks names only;
    ``decode`` False reads the text as written, without decoding encodings; ``keys_anywhere``
    False reads only keys inside an object (``{"email": ...}``), as in curriculum titles."""
    if matcher is not None and matcher.search(fold(text)) is not None:
        return "value" if depth == 0 else "encoded_value"
    for key in text_keys(text):
        if (keys_anywhere or _in_object(text, key.start)) and is_forbidden_key(key):
            return "key_in_text"
    if decode and depth < MAX_DECODE_DEPTH:
        for decoded in decodings(text):
            # One level down, a value found is already "encoded_value".
            found = text_finding(decoded, matcher, depth + 1, keys_anywhere=keys_anywhere)
            if found is not None:
                return found
    return None


def _in_object(text: str, start: int) -> bool:
    """Whether the key starting at ``start`` follows an opening brace or bracket or a comma."""
    position = start - 1
    while position >= 0 and text[position].isspace():
        position -= 1
    return position >= 0 and text[position] in "{[,"


def _judge(
    gathered: Gathered,
    matcher: ValueMatcher | None,
    location: str,
    *,
    decode: bool = True,
    circle: Circle = NO_CIRCLE,
) -> LeakFinding | None:
    for name, holder in gathered.names:
        if is_forbidden_name(name):
            return LeakFinding("field_name", holder)
    if not gathered.texts and not gathered.curriculum:
        return None
    # NUL is a token boundary and a line start for keys written in text, and no key holds it, so
    # the joined text breaks a rule exactly when one of its strings does.
    joined = "\0".join(gathered.texts)
    titles = "\0".join(gathered.curriculum)
    # Curriculum titles may read like keys ("Email: gửi và nhận thư"); where another text quotes
    # them (the rendered text), they are read for values and identifiers, not for keys.
    keyed = {title for title in gathered.curriculum if ":" in title or "=" in title}
    for title in sorted(keyed, key=len, reverse=True):
        joined = joined.replace(title, _QUOTED_TITLE)
    rule = text_finding(joined, matcher, decode=decode) or text_finding(
        titles, matcher, decode=decode, keys_anywhere=False
    )
    if rule is None and matcher is not None:
        kind = identifier_kind(f"{joined}\0{titles}", circle)
        rule = f"identifier_{kind}" if kind is not None else None
    return LeakFinding(rule, location) if rule is not None else None


_QUOTED_TITLE: Final = "\u201ctitle\u201d"
"""What a curriculum title stands as in other texts while keys are read."""


def find_leak(
    value: object, *, forbidden_values: Collection[str], circle: Circle = NO_CIRCLE
) -> LeakFinding | None:
    """What the gate would block in ``value`` (a message or JSON-like data), or None.
    ``circle`` holds the fingerprints of the learner's circle (none: contact shapes only)."""
    if isinstance(forbidden_values, str):
        raise TypeError("forbidden_values must be a collection of strings, not a string")
    gathered = Gathered()
    location = type(value).__name__
    gathered.plain(value, location)
    return _judge(gathered, value_matcher(tuple(sorted(forbidden_values))), location, circle=circle)


def find_forbidden_name(value: object) -> LeakFinding | None:
    """A forbidden field name in JSON-like data (keys at any depth, keys written in strings).

    Names only, as written, and in strings only JSON or Python keys: the rows a repository
    returns carry the learner's own keys for binding, so their values (and anything encoded or
    written as ``key: value`` in them) are judged where they end up, in the finished bundle.
    This check is for a query that selects the wrong column.
    """
    names: set[str] = set()
    texts: list[str] = []
    _names_and_key_texts(value, names, texts)
    location = type(value).__name__
    if any(is_forbidden_name(name) for name in names):
        return LeakFinding("field_name", location)
    if texts and text_finding("\0".join(texts), None, decode=False) is not None:
        return LeakFinding("key_in_text", location)
    return None


def _names_and_key_texts(value: object, names: set[str], texts: list[str]) -> None:
    """Collect the keys of JSON-like data and its strings that may hold a quoted key (JSON or
    Python text): rows are walked on every build, so only what such names hide in is kept."""
    if isinstance(value, dict):
        names.update(str(key) for key in value)
        items: Iterable[object] = value.values()
    elif isinstance(value, list | tuple):
        items = value
    elif isinstance(value, str):
        if '"' in value or "'" in value:
            texts.append(value)
        return
    elif type(value) in _SCALARS:
        return
    else:
        gathered = Gathered()
        gathered.plain(value, type(value).__name__)
        names.update(name for name, _ in gathered.names)
        texts.extend(gathered.texts)
        return
    for item in items:
        # Scalars and plain strings, most of a row, are settled here without a call.
        if isinstance(item, str):
            if '"' in item or "'" in item:
                texts.append(item)
        elif type(item) not in _SCALARS:
            _names_and_key_texts(item, names, texts)


_SCALARS: Final = frozenset({int, float, bool, type(None)})


def forbidden_names_in(names: Iterable[str]) -> list[str]:
    """The forbidden names among ``names`` (for checks of schemas and purpose tables)."""
    return [name for name in names if is_forbidden_name(name)]
