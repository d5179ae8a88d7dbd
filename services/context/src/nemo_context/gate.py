"""The identifier gate: the last check on every finished bundle before it leaves the service.

Columns that describe a person are never selected (the database role cannot), but a query can
still grow a column or a builder can copy a key into free text. The gate walks the finished
message — nested messages, repeated fields, map keys, ``google.protobuf.Struct`` values and JSON
held anywhere inside strings, even cut short — and refuses it when it finds

- a forbidden field name (see :data:`FORBIDDEN_FIELD_NAMES`), compared after camelCase is turned
  into snake_case and the name is lower-cased, matched as a whole name so ``node_title`` passes;
- one of the forbidden values (the learner's raw id, the ids of users linked to the learner)
  inside any string, case-insensitively and on token boundaries, so ``L-1`` is caught in
  "see L-1." but not inside ``L-10``;
- text whose embedded JSON cannot be read in linear time (thousands of nested ``[[``): it
  cannot be shown clean, so it is refused too.

Only the gate constructs a :class:`Gated` value, and handlers that return learner data take
it from one, so an ungated bundle cannot be returned by construction rather than by discipline.
A blocked bundle raises INTERNAL / ``CONTEXT_LEAK_BLOCKED``; the event is logged and counted
without the offending data.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Any, Final, Generic, TypeVar, final

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import ListValue, Struct, Value
from opentelemetry import metrics

from nemo_core.errors import ServiceError

logger = logging.getLogger(__name__)

CONTEXT_LEAK_BLOCKED: Final = "CONTEXT_LEAK_BLOCKED"

FORBIDDEN_FIELD_NAMES: Final = frozenset(
    {
        "display_name",
        "full_name",
        "name",
        "first_name",
        "last_name",
        "email",
        "phone",
        "address",
        "dob",
        "birth",
        "birth_date",
        "user_id",
        "learner_id",
        "family_id",
        "guardian",
        "parent_name",
        "school_name",
        "avatar_url",
        "facebook_url",
        "links_json",
    }
)
"""Whole field names that describe a person or carry an internal key."""

PHOTO_WORDS: Final = frozenset({"photo", "photos"})
"""A name with one of these words (``photo``, ``photo_url``, ``profile_photo``) is a photo field."""

_blocked_counter = metrics.get_meter("nemo_context.gate").create_counter(
    "nemo.context.gate.blocked",
    unit="{bundle}",
    description="Bundles the identifier gate refused to return.",
)

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[\s\-.]+")

_M = TypeVar("_M", bound=Message)


def normalize_field_name(name: str) -> str:
    """``displayName``, ``DisplayName``, ``DISPLAY_NAME``, ``display-name`` → ``display_name``."""
    return _SEPARATORS.sub("_", _CAMEL_BOUNDARY.sub("_", name.strip())).lower()


@lru_cache(maxsize=4096)
def is_forbidden_field_name(name: str) -> bool:
    """Whether ``name`` (any casing) is a forbidden field name, as a whole name."""
    normalized = normalize_field_name(name)
    if normalized in FORBIDDEN_FIELD_NAMES:
        return True
    return not PHOTO_WORDS.isdisjoint(normalized.split("_"))


@lru_cache(maxsize=1024)
def value_pattern(values: tuple[str, ...]) -> re.Pattern[str] | None:
    """The pattern matching any of ``values`` as the gate does; None when there are none."""
    # Boundaries are "not a letter or digit on either side": "L-1." and "(L-1)" match, "L-10",
    # "XL-1" do not. Longest first, so a shorter id never shadows a longer one in the alternation.
    alternatives = sorted({value for value in values if value}, key=len, reverse=True)
    if not alternatives:
        return None
    body = "|".join(re.escape(value) for value in alternatives)
    return re.compile(rf"(?<![^\W_])(?:{body})(?![^\W_])", re.IGNORECASE)


@dataclass(frozen=True)
class LeakFinding:
    """What the gate found, described without the data: which rule, and where in the schema."""

    rule: str
    """``field_name`` or ``value``."""
    location: str
    """Type of the message holding it (never a key or a value of the data)."""


class _Kind(Enum):
    TEXT = 1
    BYTES = 2
    MESSAGE = 3
    MAP = 4


@dataclass(frozen=True)
class _FieldPlan:
    name: str
    kind: _Kind
    repeated: bool
    map_value: _Kind | None = None


@dataclass(frozen=True)
class _MessagePlan:
    """What is worth looking at in one message type, worked out once per type."""

    declares_forbidden_name: bool
    fields: tuple[_FieldPlan, ...]
    """Fields that can hold text (strings, bytes, maps, messages that can hold text); numbers,
    booleans, enums and text-free messages such as Timestamp are never visited."""


_PLANS: dict[str, _MessagePlan] = {}


def _field_kind(field: FieldDescriptor, visiting: set[str]) -> _Kind | None:
    if field.type == FieldDescriptor.TYPE_STRING:
        return _Kind.TEXT
    if field.type == FieldDescriptor.TYPE_BYTES:
        return _Kind.BYTES
    if field.message_type is not None:
        if _plan_of(field.message_type, visiting) is None:
            return None
        return _Kind.MESSAGE
    return None


def _plan_of(descriptor: Any, visiting: set[str] | None = None) -> _MessagePlan | None:
    """The plan of a message type; None when it can never hold text or a forbidden name."""
    full_name = descriptor.full_name
    if full_name in _STRUCT_TYPES:
        return _MessagePlan(False, ())
    cached = _PLANS.get(full_name)
    if cached is not None:
        return cached if cached.declares_forbidden_name or cached.fields else None
    visiting = visiting if visiting is not None else set()
    if full_name in visiting:
        # A recursive type: assume it can hold text (checked for real when walked).
        return _MessagePlan(False, ())
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
            fields.append(_FieldPlan(field.name, kind, field.is_repeated))
    visiting.discard(full_name)
    plan = _MessagePlan(
        declares_forbidden_name=any(is_forbidden_field_name(f.name) for f in descriptor.fields),
        fields=tuple(fields),
    )
    _PLANS[full_name] = plan
    return plan if plan.declares_forbidden_name or plan.fields else None


class _Scanner:
    """One walk over a message or a plain structure; stops at the first finding."""

    def __init__(self, pattern: re.Pattern[str] | None) -> None:
        self._pattern = pattern

    def message(self, message: Message) -> LeakFinding | None:
        descriptor = message.DESCRIPTOR
        full_name = descriptor.full_name
        to_python = _STRUCT_TYPES.get(full_name)
        if to_python is not None:
            return self.plain(to_python(message), full_name)
        plan = _plan_of(descriptor)
        if plan is None:
            return None
        if plan.declares_forbidden_name:
            for present, _ in message.ListFields():
                if is_forbidden_field_name(present.name):
                    return LeakFinding("field_name", full_name)
        for field in plan.fields:
            finding = self._field(message, field, full_name)
            if finding is not None:
                return finding
        return None

    def _field(self, message: Message, field: _FieldPlan, location: str) -> LeakFinding | None:
        if field.kind is _Kind.MESSAGE and not field.repeated:
            return (
                self.message(getattr(message, field.name)) if message.HasField(field.name) else None
            )
        value = getattr(message, field.name)
        if field.kind is _Kind.MAP:
            for key, item in value.items():
                # Map keys are data named like fields: checked both as names and as text.
                if isinstance(key, str):
                    finding = self.name(key, location) or self.text(key, location)
                    if finding is not None:
                        return finding
                if field.map_value is not None:
                    finding = self._value(field.map_value, item, location)
                    if finding is not None:
                        return finding
            return None
        if field.repeated:
            for item in value:
                finding = self._value(field.kind, item, location)
                if finding is not None:
                    return finding
            return None
        return self._value(field.kind, value, location) if value else None

    def _value(self, kind: _Kind, value: Any, location: str) -> LeakFinding | None:
        if kind is _Kind.TEXT:
            return self.text(value, location)
        if kind is _Kind.BYTES:
            return self.text(value.decode("utf-8", "replace"), location)
        return self.message(value)

    def name(self, name: str, location: str) -> LeakFinding | None:
        return LeakFinding("field_name", location) if is_forbidden_field_name(name) else None

    def text(self, text: str, location: str) -> LeakFinding | None:
        if self._pattern is not None and self._pattern.search(text):
            return LeakFinding("value", location)
        if '"' not in text:  # no JSON key or string without one
            return None
        try:
            embedded = embedded_json(text)
        except UndecidableTextError:
            return LeakFinding("undecidable", location)
        return self.plain(embedded, location)

    def plain(self, value: object, location: str) -> LeakFinding | None:
        """Walk JSON-like Python data: dict keys are field names, strings are scanned."""
        if isinstance(value, str):
            return self.text(value, location)
        if isinstance(value, Message):
            return self.message(value)
        if isinstance(value, dict):
            for key, item in value.items():
                key_text = str(key)
                finding = self.name(key_text, location) or self.text(key_text, location)
                if finding is None:
                    finding = self.plain(item, location)
                if finding is not None:
                    return finding
            return None
        if isinstance(value, list | tuple | set | frozenset):
            for item in value:
                finding = self.plain(item, location)
                if finding is not None:
                    return finding
            return None
        if isinstance(value, bytes):
            return self.text(value.decode("utf-8", "replace"), location)
        return None


_JSON_START: Final = re.compile(r'\{\s*"|\[\s*["{\[]')
"""Where a JSON object or array that can hold a key or a string may start: ``{"`` or ``["``,
``[{``, ``[[``. LaTeX such as ``\\frac{a}{b}`` and intervals such as ``[a; b]`` never do."""

JSON_KEY: Final = re.compile(r'"(?P<name>(?:[^"\\\n]|\\.)*)"(?P<colon>\s*:)')
"""A quoted name followed by a colon: a JSON key, even in JSON that is cut short or broken."""

_JSON_DECODER: Final = json.JSONDecoder()

_DECODE_BUDGET_PER_CHARACTER: Final = 4
"""Characters that failed parse attempts may read, per character of the text, before the text
is judged undecidable (a string of thousands of ``[[`` would otherwise cost quadratic time)."""


class UndecidableTextError(Exception):
    """A string whose embedded JSON cannot be read within bounds; the gate treats it as a leak."""


def embedded_json(text: str) -> list[object]:
    """Every JSON object or array held anywhere in ``text`` that can carry a key or a string,
    plus, as one object, the keys of JSON too broken to parse (a cut-short ``{"email": "x``).

    Raises :class:`UndecidableTextError` when reading the text would take more than linear work
    or nest deeper than the parser can go; the gate then blocks rather than guess.
    """
    found: list[object] = []
    budget = _DECODE_BUDGET_PER_CHARACTER * len(text) + 1024
    position = 0
    while (start := _JSON_START.search(text, position)) is not None:
        begin = start.start()
        try:
            value, position = _JSON_DECODER.raw_decode(text, begin)
        except json.JSONDecodeError as error:
            budget -= error.pos - begin
            if budget < 0:
                raise UndecidableTextError from None
            position = begin + 1
            continue
        except RecursionError:
            raise UndecidableTextError from None
        found.append(value)
    keys = {json_key_name(match): None for match in JSON_KEY.finditer(text)}
    if keys:
        found.append(keys)
    return found


def json_key_name(match: re.Match[str]) -> str:
    """The name a :data:`JSON_KEY` match spells, JSON escapes decoded."""
    raw = match.group("name")
    try:
        name: str = json.loads(f'"{raw}"')
    except ValueError:
        return raw
    return name


def _struct_to_python(struct: Message) -> dict[str, object]:
    assert isinstance(struct, Struct)  # noqa: S101  narrows the type for mypy
    return {key: _value_to_python(value) for key, value in struct.fields.items()}


def _list_value_to_python(list_value: Message) -> list[object]:
    assert isinstance(list_value, ListValue)  # noqa: S101  narrows the type for mypy
    return [_value_to_python(value) for value in list_value.values]


def _value_to_python(value: Message) -> object:
    assert isinstance(value, Value)  # noqa: S101  narrows the type for mypy
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return _struct_to_python(value.struct_value)
    if kind == "list_value":
        return _list_value_to_python(value.list_value)
    if kind == "string_value":
        return value.string_value
    return None


_STRUCT_TYPES: Final[dict[str, Callable[[Message], object]]] = {
    "google.protobuf.Struct": _struct_to_python,
    "google.protobuf.Value": _value_to_python,
    "google.protobuf.ListValue": _list_value_to_python,
}
"""Messages that carry JSON: walked as JSON, their keys being field names."""


def find_leak(value: object, *, forbidden_values: Collection[str]) -> LeakFinding | None:
    """What the gate would block in ``value`` (a message or JSON-like data), or None."""
    if isinstance(forbidden_values, str):
        raise TypeError("forbidden_values must be a collection of strings, not a string")
    values = tuple(sorted(forbidden_values))
    pattern = value_pattern(values)
    if isinstance(value, Message) and _plainly_clean(value, pattern, _ascii_lowered(values)):
        return None
    return _Scanner(pattern).plain(value, type(value).__name__)


IGNORECASE_ASCII_TWINS: Final = frozenset("\u0130\u0131\u017f\u212a")
"""The only non-ASCII characters ``re.IGNORECASE`` matches to ASCII letters: dotted capital I,
dotless i, long s and the Kelvin sign."""


@lru_cache(maxsize=1024)
def _ascii_lowered(values: tuple[str, ...]) -> tuple[str, ...] | None:
    """The values lower-cased when all are ASCII (for the substring pre-check), else None."""
    if not all(value.isascii() for value in values):
        return None
    return tuple(value.lower() for value in values if value)


def _certainly_absent(text: str, lowered: tuple[str, ...] | None) -> bool:
    """True only when no value can match ``text`` case-insensitively: a plain substring search
    of the lower-cased text, far cheaper than the pattern, and exact in that direction because
    every character ``re.IGNORECASE`` equates with an ASCII one is ASCII or one of the twins."""
    if lowered is None or any(twin in text for twin in IGNORECASE_ASCII_TWINS):
        return False
    folded = text.lower()
    return not any(value in folded for value in lowered)


def _plainly_clean(
    message: Message, pattern: re.Pattern[str] | None, lowered: tuple[str, ...] | None
) -> bool:
    """True when ``message`` certainly holds nothing the scanner would find; False when unsure.

    The common case, a message whose types declare no forbidden name and hold no map, Struct or
    double quote (JSON holds no key or string without one), is settled by gathering its text
    and searching it once. The join uses a NUL, which no id contains and which is a token
    boundary, so the joined text matches exactly when one of its strings does. Anything else is
    left to the scanner, which also says where.
    """
    texts: list[str] = []
    if not _gather_text(message, texts):
        return False
    joined = "\0".join(texts)
    if '"' in joined:
        return False
    return pattern is None or _certainly_absent(joined, lowered) or pattern.search(joined) is None


def _gather_text(message: Message, texts: list[str]) -> bool:  # noqa: C901  a branch per field kind
    """Append the strings of ``message`` to ``texts``; False at anything but plain text fields."""
    descriptor = message.DESCRIPTOR
    if descriptor.full_name in _STRUCT_TYPES:
        return False
    plan = _plan_of(descriptor)
    if plan is None:
        return True
    if plan.declares_forbidden_name:
        return False
    for field in plan.fields:
        kind = field.kind
        if kind is _Kind.MAP:
            return False
        if kind is _Kind.MESSAGE:
            if field.repeated:
                for item in getattr(message, field.name):
                    if not _gather_text(item, texts):
                        return False
            elif message.HasField(field.name) and not _gather_text(
                getattr(message, field.name), texts
            ):
                return False
            continue
        value = getattr(message, field.name)
        if kind is _Kind.BYTES:
            items = [
                item.decode("utf-8", "replace") for item in (value if field.repeated else [value])
            ]
            texts.extend(items)
        elif field.repeated:
            texts.extend(value)
        else:
            texts.append(value)
    return True


def find_forbidden_name(value: object) -> LeakFinding | None:
    """A forbidden field name in JSON-like data (keys at any depth, JSON held in strings).

    Names only: the rows a repository returns carry the learner's own keys for binding, so
    their values are judged where they end up, in the finished bundle.
    """
    location = type(value).__name__
    return LeakFinding("field_name", location) if _has_forbidden_name(value) else None


_SCALAR_TYPES: Final = frozenset({int, float, bool, type(None)})


def _may_hold_names(value: object) -> bool:
    # Only containers, messages and strings that could hold JSON can hold a field name.
    if type(value) in _SCALAR_TYPES:  # most values of a row; settled before any ABC check
        return False
    if isinstance(value, str):
        return '"' in value
    return isinstance(value, dict | list | tuple | Message)


def _has_forbidden_name(value: object) -> bool:
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and is_forbidden_field_name(key):
                return True
            if _may_hold_names(item) and _has_forbidden_name(item):
                return True
        return False
    if isinstance(value, list | tuple):
        return any(_may_hold_names(item) and _has_forbidden_name(item) for item in value)
    if isinstance(value, str):
        if '"' not in value:
            return False
        try:
            return _has_forbidden_name(embedded_json(value))
        except UndecidableTextError:
            return True
    if isinstance(value, Message):
        return _Scanner(None).message(value) is not None
    return False


def leak_blocked() -> ServiceError:
    """The error a blocked bundle becomes: nothing of the bundle, nothing of the data."""
    return ServiceError(
        grpc.StatusCode.INTERNAL,
        CONTEXT_LEAK_BLOCKED,
        "the context could not be returned safely",
    )


_GATE_KEY: Final = object()


@final
class Gated(Generic[_M]):
    """A message that passed the identifier gate, frozen in the state it passed in.

    Only :func:`gate` (and :meth:`with_text`, which checks what it adds) builds one. Handlers
    that return learner data accept nothing else, so "no handler returns learner data that did
    not pass the gate" holds by construction. The gate checks a private copy, and
    :attr:`message` hands out copies, so neither the caller's original nor anything read from
    a Gated value can change what it holds.
    """

    __slots__ = ("_forbidden_values", "_message")

    def __init__(self, message: _M, forbidden_values: frozenset[str], *, key: object) -> None:
        if key is not _GATE_KEY:
            raise TypeError("only gate() creates Gated values")
        self._message = message
        self._forbidden_values = forbidden_values

    @property
    def message(self) -> _M:
        """A copy of the gated message."""
        return _copy(self._message)

    def with_text(self, **fields: str) -> Gated[_M]:
        """A copy with top-level string ``fields`` set, for references added after gating (a
        snapshot's key and digest). The rest of the copy already passed; the new names and
        values are checked like any other, so the result is gated in its exact state."""
        finding = find_leak(fields, forbidden_values=self._forbidden_values)
        if finding is not None:
            record_block(finding)
            raise leak_blocked()
        copy = _copy(self._message)
        for name, value in fields.items():
            setattr(copy, name, value)
        return Gated(copy, self._forbidden_values, key=_GATE_KEY)


def _copy(message: _M) -> _M:
    copy = type(message)()
    copy.CopyFrom(message)
    return copy


def gate(message: _M, *, forbidden_values: Collection[str]) -> Gated[_M]:
    """Pass ``message`` through the identifier gate or raise ``CONTEXT_LEAK_BLOCKED``.

    ``forbidden_values`` are the learner's raw id and the ids of the users linked to the learner
    (see ``repository.linked_identifiers``). What passes is a copy of ``message`` as it is now;
    changing ``message`` afterwards changes nothing that is returned.
    """
    values = frozenset(forbidden_values) if not isinstance(forbidden_values, str) else None
    if values is None:
        raise TypeError("forbidden_values must be a collection of strings, not a string")
    checked = _copy(message)
    finding = find_leak(checked, forbidden_values=values)
    if finding is not None:
        record_block(finding)
        raise leak_blocked()
    return Gated(checked, values, key=_GATE_KEY)


def record_block(finding: LeakFinding) -> None:
    """Log and count a blocked bundle; the finding names the rule and type, never the data."""
    _blocked_counter.add(1, {"rule": finding.rule})
    logger.error(
        "identifier gate blocked a bundle",
        extra={"gate_rule": finding.rule, "gate_location": finding.location},
    )


def forbidden_names_in(names: Iterable[str]) -> list[str]:
    """The forbidden names among ``names`` (for checks of schemas and purpose tables)."""
    return [name for name in names if is_forbidden_field_name(name)]
