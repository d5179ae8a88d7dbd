"""Snapshots written before the v1 field renames, read back under the current field names.

A snapshot's bytes are what was hashed and stored, so they are never rewritten; GetSnapshot parses
them into the current messages, and a bundle stored while its timestamps were still ``*_at``
would otherwise not parse. Only the message fields listed here are renamed, walking the document
along the message descriptors, so keys inside a ``google.protobuf.Struct`` are never touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from nemo_protos.context.v1 import learner_context_pb2 as lc

RENAMED: Final[Mapping[str, Mapping[str, str]]] = MappingProxyType(
    {
        lc.ContextBundle.DESCRIPTOR.full_name: {"built_at": "build_time"},
        lc.EvidenceEntry.DESCRIPTOR.full_name: {"observed_at": "observe_time"},
        lc.Goal.DESCRIPTOR.full_name: {"due_at": "due_time"},
        lc.RetentionEntry.DESCRIPTOR.full_name: {"due_at": "due_time"},
        lc.ModelProvenance.DESCRIPTOR.full_name: {"computed_at": "compute_time"},
        lc.LearningProgress.DESCRIPTOR.full_name: {"last_activity_at": "last_activity_time"},
    }
)
"""Message full name -> {name a snapshot may still use: the field's current name}."""

_WELL_KNOWN: Final = "google.protobuf."


def current_names(document: Any, descriptor: Descriptor) -> Any:
    """``document`` (proto JSON of a ``descriptor`` message) with renamed fields' old names
    replaced by the current ones; a document that already uses them comes back equal."""
    if not isinstance(document, dict) or descriptor.full_name.startswith(_WELL_KNOWN):
        return document
    renamed = RENAMED.get(descriptor.full_name, {})
    upgraded: dict[str, Any] = {}
    for key, value in document.items():
        name = renamed.get(key, key)
        field = descriptor.fields_by_name.get(name)
        upgraded[name] = value if field is None else _field_value(value, field)
    return upgraded


def _field_value(value: Any, field: FieldDescriptor) -> Any:
    # The bundles hold no map fields of their own (a Struct's keys are data, and well-known).
    message = field.message_type
    if message is None:
        return value
    if field.is_repeated and isinstance(value, list):
        return [current_names(item, message) for item in value]
    return current_names(value, message)
