"""Output schemas rewritten to the JSON Schema subset a provider's constrained decoding accepts.

OpenAI's strict mode and Anthropic's structured outputs take only some keywords, want every
object closed (``additionalProperties: false``), and OpenAI's wants every property listed in
``required``. The rewrite keeps the shape (types, properties, items, enums, references) and drops
the rest: the pydantic model stays the validator of every answer, so a length or range bound the
provider cannot enforce is still checked after it answers, and an answer that breaks it is
re-asked like any other invalid one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SchemaSubset:
    """The keywords and string formats a provider's constrained decoding accepts."""

    keywords: frozenset[str]
    formats: frozenset[str]
    all_required: bool
    """Every property of an object must be in ``required`` (OpenAI strict mode)."""
    object_root: bool
    """The root must be an object; a schema of another root type cannot be constrained."""


_SHAPE = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum", "const",
        "anyOf", "$ref", "$defs", "description", "title",
    }
)  # fmt: skip

#: OpenAI structured outputs, strict mode (its "supported schemas" list).
OPENAI_STRICT = SchemaSubset(
    keywords=_SHAPE
    | {
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    },
    formats=frozenset(
        {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
    ),
    all_required=True,
    object_root=True,
)

#: Anthropic structured outputs (``output_config.format``): no numeric or length bounds.
ANTHROPIC = SchemaSubset(
    keywords=_SHAPE | {"format", "minItems"},
    formats=frozenset(
        {
            "date-time",
            "time",
            "date",
            "duration",
            "email",
            "hostname",
            "uri",
            "ipv4",
            "ipv6",
            "uuid",
        }
    ),
    all_required=False,
    object_root=True,
)

# Keywords whose value maps names to schemas, and those that hold one schema or a list of them.
_NAMED_SCHEMAS = frozenset({"properties", "$defs"})
_SCHEMAS = frozenset({"items", "anyOf", "additionalProperties"})


def constrained_schema(schema: Mapping[str, Any], subset: SchemaSubset) -> dict[str, Any] | None:
    """``schema`` in ``subset``; None when the subset cannot express its root."""
    if subset.object_root and schema.get("type") != "object":
        return None
    return _rewrite(schema, subset)


def _rewrite(node: Mapping[str, Any], subset: SchemaSubset) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in subset.keywords:
            continue
        if key == "format" and value not in subset.formats:
            continue
        if key in _NAMED_SCHEMAS:
            out[key] = {name: _rewrite(child, subset) for name, child in value.items()}
        elif key in _SCHEMAS and isinstance(value, Mapping):
            out[key] = _rewrite(value, subset)
        elif key in _SCHEMAS and isinstance(value, list):
            out[key] = [_rewrite(child, subset) for child in value]
        else:
            out[key] = value
    if "properties" in out or out.get("type") == "object":
        out["additionalProperties"] = False
        properties = out.get("properties", {})
        if subset.all_required:
            out["required"] = list(properties)
        elif "required" in out:
            out["required"] = [name for name in out["required"] if name in properties]
    return out
