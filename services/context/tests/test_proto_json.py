"""The snapshot JSON form equals json_format's, for the real bundles and for every field type."""

from __future__ import annotations

import math
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import Struct
from hypothesis import given, settings
from hypothesis import strategies as st

from nemo_context.builder import ContextBuilder
from nemo_context.proto_json import message_to_json_object
from nemo_context.pseudonym import Pseudonymizer
from nemo_context.purposes import PURPOSES
from nemo_context.repository import PostgresLearnerRepository
from nemo_core.db import Pool
from nemo_protos.type.v1 import locale_pb2

from .conftest import TEST_IDENTIFIER_KEY, TEST_PSEUDONYM_KEY
from .test_builder import BUNDLE_PURPOSES


def reference(message: Message) -> Any:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


@pytest.mark.parametrize("learner_id", ["L-2041-1", "L-2041-2", "L-2041-3", "L-2041-10"])
async def test_every_purpose_bundle_converts_exactly_as_json_format(
    context_pool: Pool, learner_id: str
) -> None:
    builder = ContextBuilder(
        PostgresLearnerRepository(context_pool, identifier_key=TEST_IDENTIFIER_KEY),
        Pseudonymizer(TEST_PSEUDONYM_KEY.encode()),
    )
    for name in BUNDLE_PURPOSES:
        for locale in (locale_pb2.LOCALE_VI, locale_pb2.LOCALE_EN):
            bundle = (await builder.build(learner_id, PURPOSES[name], locale)).message
            assert message_to_json_object(bundle) == reference(bundle), name


def _every_type_message() -> type[Message]:
    """A proto3 message with a field of every scalar type, repeated, optional, map, enum,
    nested, Timestamp and Struct fields."""
    T = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="nemo_test/every_type.proto",
        package="nemo_test",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto", "google/protobuf/struct.proto"],
    )
    file.enum_type.add(name="Color").value.extend(
        [
            descriptor_pb2.EnumValueDescriptorProto(name="COLOR_UNSPECIFIED", number=0),
            descriptor_pb2.EnumValueDescriptorProto(name="COLOR_RED", number=1),
        ]
    )
    every = file.message_type.add(name="Every")
    scalars = {
        "i32": T.TYPE_INT32,
        "i64": T.TYPE_INT64,
        "u32": T.TYPE_UINT32,
        "u64": T.TYPE_UINT64,
        "s64": T.TYPE_SINT64,
        "f64": T.TYPE_FIXED64,
        "dbl": T.TYPE_DOUBLE,
        "flt": T.TYPE_FLOAT,
        "flag": T.TYPE_BOOL,
        "text": T.TYPE_STRING,
        "blob": T.TYPE_BYTES,
    }
    number = 0
    for name, field_type in scalars.items():
        for prefix, label in (("", T.LABEL_OPTIONAL), ("many_", T.LABEL_REPEATED)):
            number += 1
            every.field.add(name=prefix + name, number=number, type=field_type, label=label)
    number += 1
    every.field.add(
        name="opt_dbl", number=number, type=T.TYPE_DOUBLE, label=T.LABEL_OPTIONAL,
        proto3_optional=True, oneof_index=0,
    )  # fmt: skip
    every.oneof_decl.add(name="_opt_dbl")
    for name, type_name, label in (
        ("color", ".nemo_test.Color", T.LABEL_OPTIONAL),
        ("colors", ".nemo_test.Color", T.LABEL_REPEATED),
        ("child", ".nemo_test.Every", T.LABEL_OPTIONAL),
        ("children", ".nemo_test.Every", T.LABEL_REPEATED),
        ("at", ".google.protobuf.Timestamp", T.LABEL_OPTIONAL),
        ("extra", ".google.protobuf.Struct", T.LABEL_OPTIONAL),
        ("counts", ".nemo_test.Every.CountsEntry", T.LABEL_REPEATED),
        ("flags", ".nemo_test.Every.FlagsEntry", T.LABEL_REPEATED),
    ):
        number += 1
        field_type = T.TYPE_ENUM if type_name.endswith("Color") else T.TYPE_MESSAGE
        every.field.add(name=name, number=number, type=field_type, label=label, type_name=type_name)
    for entry_name, key_type, value_type, value_type_name in (
        ("CountsEntry", T.TYPE_STRING, T.TYPE_INT64, ""),
        ("FlagsEntry", T.TYPE_BOOL, T.TYPE_MESSAGE, ".nemo_test.Every"),
    ):
        entry = every.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=key_type, label=T.LABEL_OPTIONAL)
        value = entry.field.add(name="value", number=2, type=value_type, label=T.LABEL_OPTIONAL)
        if value_type_name:
            value.type_name = value_type_name
    pool = descriptor_pool.DescriptorPool()
    for dependency in (Struct.DESCRIPTOR.file, _timestamp_file()):
        pool.AddSerializedFile(dependency.serialized_pb)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("nemo_test.Every"))


def _timestamp_file() -> Any:
    from google.protobuf.timestamp_pb2 import Timestamp

    return Timestamp.DESCRIPTOR.file


EVERY = _every_type_message()

doubles = st.floats(allow_nan=True, allow_infinity=True)
scalar_values: dict[str, st.SearchStrategy[Any]] = {
    "i32": st.integers(-(2**31), 2**31 - 1),
    "i64": st.integers(-(2**63), 2**63 - 1),
    "u32": st.integers(0, 2**32 - 1),
    "u64": st.integers(0, 2**64 - 1),
    "s64": st.integers(-(2**63), 2**63 - 1),
    "f64": st.integers(0, 2**64 - 1),
    "dbl": doubles,
    "flt": st.floats(width=32, allow_nan=True, allow_infinity=True),
    "flag": st.booleans(),
    "text": st.text(),
    "blob": st.binary(),
}


@st.composite
def every_messages(draw: st.DrawFn, depth: int = 2) -> Message:
    message: Any = EVERY()
    for name, values in scalar_values.items():
        if draw(st.booleans()):
            setattr(message, name, draw(values))
        getattr(message, "many_" + name).extend(draw(st.lists(values, max_size=3)))
    if draw(st.booleans()):
        message.opt_dbl = draw(st.sampled_from([0.0, -0.0, 1.5, math.inf]))
    message.color = draw(st.sampled_from([0, 1, 7]))  # 7: an open enum's unknown value
    message.colors.extend(draw(st.lists(st.sampled_from([0, 1, 9]), max_size=3)))
    if draw(st.booleans()):
        message.at.FromSeconds(draw(st.integers(0, 4_000_000_000)))
        message.at.nanos = draw(st.sampled_from([0, 1_000, 500_000_000]))
    if draw(st.booleans()):
        message.extra.update({"k": draw(st.text(max_size=5)), "n": [1.5, None, True]})
    for key, value in draw(st.dictionaries(st.text(max_size=4), scalar_values["i64"])).items():
        message.counts[key] = value
    if depth > 0:
        if draw(st.booleans()):
            message.child.CopyFrom(draw(every_messages(depth - 1)))
        message.children.extend(draw(st.lists(every_messages(depth - 1), max_size=2)))
        for flag in draw(st.lists(st.booleans(), max_size=2)):
            message.flags[flag].CopyFrom(draw(every_messages(depth - 1)))
    built: Message = message
    return built


@settings(max_examples=100, deadline=None)
@given(every_messages())
def test_every_field_type_converts_exactly_as_json_format(message: Message) -> None:
    # repr tells -0.0 from 0.0 and an int from an equal float, which == does not.
    assert repr(message_to_json_object(message)) == repr(reference(message))


def test_well_known_types_at_the_top_are_json_formats_own_form() -> None:
    struct = Struct()
    struct.update({"a": [1, "b", {"c": None}]})
    assert message_to_json_object(struct) == reference(struct)
