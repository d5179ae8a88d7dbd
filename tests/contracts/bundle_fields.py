"""What each field of the context service's bundles is, for the registrations contract: a slice
a purpose must declare before a prompt may read it, or the envelope every bundle carries.

The contract checks these tables against the bundle messages and the ``Slice`` vocabulary, so a
new field or slice fails there until it is placed here. It also has the two tools the contract
needs to see which slices a prompt reads: bundles with every field drawn at random, and a
stand-in for a bundle that records the fields read from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from google.protobuf import message_factory, struct_pb2, timestamp_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

from nemo_protos.context.v1 import conversation_pb2, learner_context_pb2

WHERE = "tests/contracts/bundle_fields.py"


@dataclass(frozen=True)
class BundleFields:
    """A bundle message's fields: ``slices`` maps a field path (``profile.age_years``) to the
    slice that holds it, as ``ListPurposes`` names slices; ``envelope`` are top-level fields
    every bundle carries whatever its purpose declares."""

    message: type[Message]
    slices: Mapping[str, str]
    envelope: frozenset[str]

    @property
    def descriptor(self) -> Descriptor:
        return cast(Descriptor, self.message.DESCRIPTOR)

    def slice_of(self, path: str) -> str | None:
        """The slice a read of ``path`` needs; None for the envelope and for a message read
        only to reach its fields."""
        if path in self.slices:
            return self.slices[path]
        if path in self.envelope or self.splits(path):
            return None
        raise KeyError(f"{self.descriptor.name}.{path} is in no table of {WHERE}")

    def splits(self, path: str) -> bool:
        """Whether the fields of ``path`` belong to different slices (``profile``)."""
        return any(key.startswith(f"{path}.") for key in self.slices)


LEARNER = BundleFields(
    learner_context_pb2.ContextBundle,
    {
        "profile.grade": "profile",
        "profile.age_years": "age",
        "mastery": "mastery",
        "recent_evidence": "recent_evidence",
        "goal": "goal",
        "retention": "retention",
        "learning_context": "context",
        "learning_progress": "learning_progress",
        "competency_profile": "competency_profile",
        "readiness": "readiness",
        "current_plan": "current_plan",
        "next_experience": "next_experience",
    },
    frozenset(
        {
            "learner_ref",
            "purpose",
            "slices",
            "policy_version",
            "build_version",
            "build_time",
            "locale",
            # The render of the declared slices only: reading it reads nothing undeclared.
            "rendered_text",
            "input_ref",
            "snapshot_sha256",
            # Counts by kind of what the gate masked in written text, never the values.
            "redactions",
        }
    ),
)

CONVERSATION = BundleFields(
    conversation_pb2.ConversationBundle,
    {
        "profile.grade": "profile",
        "profile.age_years": "age",
        "recent_messages": "conversation_history",
        "conversation_summary": "conversation_summary",
        "state": "conversation_state",
        "retrieved_knowledge": "knowledge",
    },
    frozenset(
        {
            "session_id",
            "turn_id",
            # The caller's own message of this turn, not stored learner data.
            "current_user_message",
            "learner_ref",
            "meta",
            "purpose",
            "slices",
            "policy_version",
            "input_ref",
            "snapshot_sha256",
        }
    ),
)


def field_paths(descriptor: Descriptor, fields: BundleFields, prefix: str = "") -> set[str]:
    """Every path of ``descriptor`` down to the fields that one slice holds whole."""
    paths = set()
    for field in descriptor.fields:
        path = f"{prefix}{field.name}"
        if fields.splits(path) and field.message_type is not None:
            paths |= field_paths(field.message_type, fields, f"{path}.")
        else:
            paths.add(path)
    return paths


class Reads:
    """Stands in for a bundle and records the path of every field read from it.

    Fields whose parts belong to different slices (``profile``) come back wrapped too, so a read
    of ``profile.grade`` is told from one of ``profile.age_years``. A prompt that hands the whole
    bundle to a protobuf function fails here: it should read the fields it needs.
    """

    def __init__(
        self, message: Message, fields: BundleFields, seen: set[str], prefix: str = ""
    ) -> None:
        self._message = message
        self._fields = fields
        self._seen = seen
        self._prefix = prefix

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._message, name)
        if name == "HasField":
            return self._has_field
        if name not in self._message.DESCRIPTOR.fields_by_name:
            return value
        path = f"{self._prefix}{name}"
        self._seen.add(path)
        if self._fields.splits(path):
            return Reads(value, self._fields, self._seen, f"{path}.")
        return value

    def _has_field(self, name: str) -> bool:
        self._seen.add(f"{self._prefix}{name}")
        return bool(self._message.HasField(name))


_SCALARS: dict[int, st.SearchStrategy[Any]] = {
    FieldDescriptor.TYPE_STRING: st.text(max_size=12),
    FieldDescriptor.TYPE_BOOL: st.booleans(),
    FieldDescriptor.TYPE_INT32: st.integers(-5, 200),
    FieldDescriptor.TYPE_INT64: st.integers(-5, 200),
    FieldDescriptor.TYPE_DOUBLE: st.floats(0, 1),
    FieldDescriptor.TYPE_FLOAT: st.floats(0, 1, width=32),
}


def _struct(values: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(values)
    return struct


def _special(full_name: str) -> st.SearchStrategy[Message] | None:
    if full_name == "google.protobuf.Timestamp":
        return st.integers(0, 4_000_000_000).map(lambda s: timestamp_pb2.Timestamp(seconds=s))
    if full_name == "google.protobuf.Struct":
        leaves = st.text(max_size=8) | st.booleans() | st.integers(-100, 100)
        return st.dictionaries(st.text(max_size=8), leaves, max_size=3).map(_struct)
    return None


def _value(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    if field.message_type is not None:
        return messages(field.message_type)
    if field.enum_type is not None:
        return st.sampled_from([value.number for value in field.enum_type.values])
    return _SCALARS[field.type]


def messages(descriptor: Descriptor) -> st.SearchStrategy[Any]:
    """Messages of ``descriptor`` with each field set or not, lists of up to three."""
    special = _special(descriptor.full_name)
    if special is not None:
        return special
    fields = {}
    for field in descriptor.fields:
        value = _value(field)
        fields[field.name] = st.lists(value, max_size=3) if field.is_repeated else value
    build: Callable[..., Message] = message_factory.GetMessageClass(descriptor)
    return st.fixed_dictionaries({}, optional=fields).map(lambda values: build(**values))
