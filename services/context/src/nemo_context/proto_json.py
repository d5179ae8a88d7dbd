"""Proto3 JSON objects of messages, equal to ``json_format.MessageToDict`` with proto field names.

Snapshots hash this form on every persisted build, and ``json_format`` re-inspects each field's
descriptor on every value it converts. Here the conversion of each field is worked out once per
message type; the values and the rules are the same (set fields only, 64-bit integers as
strings, enums by name, bytes as base64, non-finite numbers as strings, ``Timestamp`` as
RFC 3339). Anything rarer — other well-known types, wrappers, extensions, enum JSON options,
closed enums — is handed to ``json_format`` itself, so the result never differs from it.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final, TypeAlias

from google.protobuf import json_format
from google.protobuf.descriptor import EnumDescriptor, FieldDescriptor
from google.protobuf.internal import type_checkers
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

JsonValue: TypeAlias = Any
_Convert: TypeAlias = Callable[[Any], JsonValue]

_TIMESTAMP: Final = "google.protobuf.Timestamp"
_SPECIAL_JSON_FILES: Final = frozenset(
    f"google/protobuf/{name}.proto"
    for name in ("any", "duration", "field_mask", "struct", "timestamp", "wrappers")
)
"""Files of the types whose JSON form is not their fields (well-known types and wrappers)."""
_INT64_TYPES: Final = frozenset({FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64})

# Per message type (by full name): field name -> conversion of the field's whole value; None
# when the type is converted by json_format.
_PLANS: dict[str, dict[str, _Convert] | None] = {}


def message_to_json_object(message: Message) -> JsonValue:
    """``json_format.MessageToDict(message, preserving_proto_field_name=True)``, faster."""
    return _message(message)


def _by_json_format(message: Message) -> JsonValue:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def _message(message: Message) -> JsonValue:
    descriptor = message.DESCRIPTOR
    full_name = descriptor.full_name
    if full_name not in _PLANS:
        _PLANS[full_name] = _plan(descriptor)
    plan = _PLANS[full_name]
    if plan is None:
        return _by_json_format(message)
    result: dict[str, JsonValue] = {}
    for field, value in message.ListFields():
        convert = plan.get(field.name) if not field.is_extension else None
        if convert is None:
            return _by_json_format(message)
        result[field.name] = convert(value)
    return result


def _plan(descriptor: Any) -> dict[str, _Convert] | None:
    """How to convert each field of a regular message; None for the types json_format handles
    specially (well-known types, wrappers)."""
    if descriptor.file.name in _SPECIAL_JSON_FILES:
        return None
    plan: dict[str, _Convert] = {}
    for field in descriptor.fields:
        convert = _field_converter(field)
        if convert is not None:
            plan[field.name] = convert
    return plan


def _field_converter(field: FieldDescriptor) -> _Convert | None:
    entry = field.message_type
    if field.is_repeated and entry is not None and entry.GetOptions().map_entry:
        convert_value = _value_converter(entry.fields_by_name["value"])
        if convert_value is None:
            return None
        return lambda mapping: {_map_key(key): convert_value(item) for key, item in mapping.items()}
    convert = _value_converter(field)
    if convert is None:
        return None
    if field.is_repeated:
        return lambda values: [convert(item) for item in values]
    return convert


def _map_key(key: object) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _value_converter(field: FieldDescriptor) -> _Convert | None:
    """How one value of ``field`` converts; None when json_format must convert it."""
    cpp_type = field.cpp_type
    if field.message_type is not None:
        return _timestamp if field.message_type.full_name == _TIMESTAMP else _message
    if field.enum_type is not None:
        return _enum_converter(field.enum_type)
    if cpp_type == FieldDescriptor.CPPTYPE_STRING:
        return _bytes if field.type == FieldDescriptor.TYPE_BYTES else str
    if cpp_type == FieldDescriptor.CPPTYPE_BOOL:
        return bool
    if cpp_type in _INT64_TYPES:
        return str
    if cpp_type == FieldDescriptor.CPPTYPE_DOUBLE:
        return _double
    if cpp_type == FieldDescriptor.CPPTYPE_FLOAT:
        return _float
    return _same


def _enum_converter(enum: EnumDescriptor) -> _Convert | None:
    if enum.full_name == "google.protobuf.NullValue" or enum.is_closed:
        return None
    if any(value.GetOptions().ListFields() for value in enum.values):
        return None  # a value may carry a JSON name option
    names = {value.number: value.name for value in enum.values}
    return lambda number: names.get(number, number)


def _same(value: JsonValue) -> JsonValue:
    return value


def _timestamp(value: Any) -> str:
    return _timestamp_text(value.seconds, value.nanos)


@lru_cache(maxsize=4096)
def _timestamp_text(seconds: int, nanos: int) -> str:
    # Bundles repeat the same few instants (evidence, due dates) build after build.
    text: str = Timestamp(seconds=seconds, nanos=nanos).ToJsonString()
    return text


def _bytes(value: bytes) -> str:
    return base64.b64encode(value).decode("utf-8")


def _non_finite(value: float) -> str | None:
    if math.isinf(value):
        return "-Infinity" if value < 0.0 else "Infinity"
    if math.isnan(value):
        return "NaN"
    return None


def _double(value: float) -> JsonValue:
    if math.isfinite(value):
        return value
    return _non_finite(value)


def _float(value: float) -> JsonValue:
    if math.isfinite(value):
        return type_checkers.ToShortestFloat(value)
    return _non_finite(value)
