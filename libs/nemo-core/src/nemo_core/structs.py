"""``google.protobuf.Struct`` to plain Python and back, the one conversion the services use.

Reading walks the message directly: much cheaper than a JSON round trip, and than the
well-known-type helpers (``Struct.items()``), which look every key up again. A ``Value`` with no
kind set is legal on the wire but holds no value; it raises :class:`ValueNotSet` rather than
reading as null, so each service refuses it with its own precise error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format, struct_pb2


class ValueNotSet(ValueError):
    """A Struct value with no kind set."""


def value_to_python(value: struct_pb2.Value) -> Any:
    """``value`` as plain Python: dict, list, str, float, bool or None."""
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return struct_to_python(value.struct_value)
    if kind == "list_value":
        return [value_to_python(item) for item in value.list_value.values]
    if kind == "null_value":
        return None
    if kind is None:
        raise ValueNotSet
    return getattr(value, kind)


def struct_to_python(struct: struct_pb2.Struct) -> dict[str, Any]:
    """``struct`` as a plain dict (see :func:`value_to_python`)."""
    return {key: value_to_python(item) for key, item in struct.fields.items()}


def python_to_struct(mapping: Mapping[str, Any]) -> struct_pb2.Struct:
    """A Struct holding ``mapping`` (JSON-like data: dicts with string keys, lists, strings,
    numbers, booleans, None)."""
    struct = struct_pb2.Struct()
    json_format.ParseDict(dict(mapping), struct)
    return struct
