"""What the gate reads in a message: every field that can hold text, at any depth, and the names
a message type declares.

The message types are this file's own (a row type a query could grow), built at import, so
every kind of field is met: strings, bytes, repeated fields, maps of every value kind, nested
and recursive messages, ``Struct``, ``Value`` and ``ListValue``, and fields that hold no text.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    struct_pb2,
    timestamp_pb2,
)
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import Struct
from google.rpc import error_details_pb2
from hypothesis import given
from hypothesis import strategies as st

from nemo_context.gate import (
    LeakFinding,
    find_forbidden_name,
    find_leak,
    gate,
)
from nemo_context.render import render_bundle
from nemo_core.errors import ServiceError
from nemo_protos.context.v1 import conversation_pb2
from nemo_protos.context.v1 import learner_context_pb2 as pb
from nemo_protos.type.v1 import locale_pb2

from .spellings import (
    FORBIDDEN_NAME,
    KEYS,
    LINKED,
    PROPERTY,
    SAFE_NAME,
    SENTENCE,
    key_variants,
    leaks,
    struct_of,
)

KEY = "L-2041-1"
FORBIDDEN = frozenset({KEY})
ROW = "nemo.tests.gate.Row"

_FIELDS: list[tuple[str, str, str]] = [
    # (name, type, label); a map<> is written as the entry's value type after "map:".
    ("notes", "map:string", ""),  # a map before the other fields
    ("title", "string", ""),
    ("email", "string", ""),  # a declared field with a forbidden name
    ("summary", "string", ""),
    ("blob", "bytes", ""),
    ("blobs", "bytes", "repeated"),
    ("tags", "string", "repeated"),
    ("child", ".nemo.tests.gate.Row", ""),
    ("children", ".nemo.tests.gate.Row", "repeated"),
    ("by_key", "map:.nemo.tests.gate.Row", ""),
    ("files", "map:bytes", ""),
    ("extra", ".google.protobuf.Struct", ""),
    ("extras", ".google.protobuf.Struct", "repeated"),
    ("value", ".google.protobuf.Value", ""),
    ("at", ".google.protobuf.Timestamp", ""),
    ("count", "int32", ""),
    ("numbered", "map:int32", ""),
]
_SCALAR = {
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
}


def _row_types() -> tuple[type[Message], type[Message]]:
    """The row type and a text-free type, registered in the default pool (as generated code is)."""
    file = descriptor_pb2.FileDescriptorProto(
        name="nemo/tests/gate/walk.proto",
        package="nemo.tests.gate",
        syntax="proto3",
        dependency=["google/protobuf/struct.proto", "google/protobuf/timestamp.proto"],
    )
    row = file.message_type.add(name="Row")
    for number, (name, kind, label) in enumerate(_FIELDS, start=1):
        field = row.field.add(name=name, number=number)
        field.label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
        if label == "repeated":
            field.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
        if kind.startswith("map:"):
            entry = row.nested_type.add(name=f"{name.title().replace('_', '')}Entry")
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, type=_SCALAR["string"], label=1)
            if name == "numbered":
                entry.field[0].type = _SCALAR["int32"]
                value_kind = "string"
            else:
                value_kind = kind.removeprefix("map:")
            value = entry.field.add(name="value", number=2, label=1)
            _set_type(value, value_kind)
            field.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
            field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
            field.type_name = f".nemo.tests.gate.Row.{entry.name}"
        else:
            _set_type(field, kind)
    plain = file.message_type.add(name="Counts")
    plain.field.add(name="count", number=1, type=_SCALAR["int32"], label=1)
    plain.field.add(
        name="at", number=2, label=1, type_name=".google.protobuf.Timestamp"
    ).type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
    pool = descriptor_pool.Default()
    pool.Add(file)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName(ROW)),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("nemo.tests.gate.Counts")),
    )


def _set_type(field: descriptor_pb2.FieldDescriptorProto, kind: str) -> None:
    if kind in _SCALAR:
        field.type = _SCALAR[kind]
    else:
        field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
        field.type_name = kind


Row, Counts = _row_types()


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(value)
    return struct


def _leak(value: object) -> LeakFinding | None:
    return find_leak(value, forbidden_values=FORBIDDEN)


def _placed(text: str) -> dict[str, object]:
    """``text`` in every field of the row type that can hold it, one row per place."""
    data = text.encode()
    return {
        "string": Row(title=text),
        "string after a map": Row(notes={"a": "b"}, summary=text),
        "repeated string": Row(tags=["x", text]),
        "bytes": Row(blob=data),
        "repeated bytes": Row(blobs=[b"x", data]),
        "map value": Row(notes={"a": text}),
        "map key": Row(notes={text: "a"}),
        "map of bytes": Row(files={"a": data}),
        "map with number keys": Row(numbered={1: text}),
        "nested": Row(child=Row(title=text)),
        "deeply nested": Row(child=Row(child=Row(child=Row(tags=[text])))),
        "repeated nested": Row(children=[Row(), Row(summary=text)]),
        "map of messages": Row(by_key={"a": Row(title=text)}),
        "struct value": Row(extra=_struct({"a": text})),
        "struct key": Row(extra=_struct({text: 1})),
        "nested struct": Row(extra=_struct({"a": {"b": [1, {"c": text}]}})),
        "repeated struct": Row(extras=[_struct({}), _struct({"a": [text]})]),
        "value": Row(value=struct_pb2.Value(string_value=text)),
        "value list": Row(
            value=struct_pb2.Value(
                list_value=struct_pb2.ListValue(
                    values=[struct_pb2.Value(number_value=1), struct_pb2.Value(string_value=text)]
                )
            )
        ),
        "value struct": Row(value=struct_pb2.Value(struct_value=_struct({"a": text}))),
        "dict value": {"a": {"b": [text]}},
        "dict key": {"a": [{text: 1}]},
        "tuple and set": {"a": ("x", frozenset({text}))},
        "python bytes": {"a": [data]},
    }


@pytest.mark.parametrize("place", list(_placed(KEY)))
def test_a_key_is_found_in_every_field_that_can_hold_text(place: str) -> None:
    finding = _leak(_placed(f"xem {KEY} nhé")[place])
    assert finding is not None
    assert finding.rule == "value"


@pytest.mark.parametrize("place", list(_placed(KEY)))
def test_the_same_places_with_ordinary_text_pass(place: str) -> None:
    assert _leak(_placed("Hệ số góc, lớp 8")[place]) is None


def test_fields_that_hold_no_text_are_not_read() -> None:
    at = timestamp_pb2.Timestamp(seconds=2041)
    assert _leak(Row(count=2041, at=at)) is None
    assert _leak(Counts(count=2041, at=at)) is None
    assert find_leak(Counts(count=2041), forbidden_values={"2041"}) is None


def test_a_message_type_that_declares_a_forbidden_field_is_blocked_when_it_is_set() -> None:
    assert _leak(Row(email="an@example.com")) == LeakFinding("field_name", ROW)
    assert _leak(Row(child=Row(email="x"))) == LeakFinding("field_name", ROW)
    assert _leak(Row(children=[Row(), Row(email="x")])) == LeakFinding("field_name", ROW)
    assert _leak(Row(by_key={"a": Row(email="x")})) == LeakFinding("field_name", ROW)
    with pytest.raises(ServiceError):
        gate(Row(title="Hệ số góc", email="x"), forbidden_values=FORBIDDEN)
    # Unset, the field carries nothing.
    assert _leak(Row(title="Hệ số góc", email="")) is None
    gate(Row(title="Hệ số góc"), forbidden_values=FORBIDDEN)


def test_keys_of_maps_structs_and_dicts_are_field_names() -> None:
    assert _leak(Row(notes={"phoneNumber": "x"})) == LeakFinding("field_name", ROW)
    assert _leak(Row(by_key={"a": Row(notes={"dob": "x"})})) == LeakFinding("field_name", ROW)
    struct = LeakFinding("field_name", "google.protobuf.Struct")
    assert _leak(Row(extra=_struct({"guardian": {"a": 1}}))) == struct
    assert _leak(_struct({"a": {"display_name": "An"}})) == struct
    assert _leak(struct_pb2.Value(struct_value=_struct({"email": "x"}))) == struct
    assert _leak({"rows": [{"home_address": "x"}]}) == LeakFinding("field_name", "dict")
    assert _leak([{"n": {1: {"email": 1}}}]) == LeakFinding("field_name", "list")


def test_each_finding_names_its_rule() -> None:
    assert _leak(f"xem {KEY}") == LeakFinding("value", "str")
    assert _leak(base64.b64encode(KEY.encode()).decode()) == LeakFinding("encoded_value", "str")
    assert _leak('ghi chú {"email": "x"}') == LeakFinding("key_in_text", "str")
    assert _leak(quote('{"email": 1}')) == LeakFinding("key_in_text", "str")
    assert _leak(Row(title=f"xem {KEY}")) == LeakFinding("value", "Row")
    assert _leak(Row(title=html.escape(f"<{KEY}>"), summary="x")) == LeakFinding("value", "Row")


def _nest(text: str, depth: int) -> str:
    """``text`` under ``depth`` encodings, each inside the last: percent, base64, HTML, base64."""
    encoders: list[Callable[[str], str]] = [
        lambda t: "".join(f"%{byte:02X}" for byte in t.encode()),
        lambda t: base64.b64encode(t.encode()).decode(),
        lambda t: "".join(f"&#{ord(c)};" for c in t),
        lambda t: base64.urlsafe_b64encode(t.encode()).decode(),
    ]
    for encode in encoders[:depth]:
        text = encode(text)
    return text


def test_encodings_are_decoded_three_deep_and_no_deeper() -> None:
    # The documented bound: three encodings inside each other are read; a fourth is not.
    json_key = '{"email": 1}'
    for depth in (1, 2, 3):
        assert _leak(f"mã {_nest(KEY, depth)}") == LeakFinding("encoded_value", "str"), depth
        assert _leak(f"mã {_nest(json_key, depth)}") == LeakFinding("key_in_text", "str"), depth
    assert _leak(f"mã {_nest(KEY, 4)}") is None


def test_repository_rows_are_read_for_names_as_written() -> None:
    dict_row = LeakFinding("field_name", "dict")
    assert find_forbidden_name({"rows": ({"node_id": "n"}, [{"learner_id": 1}])}) == dict_row
    assert find_forbidden_name([("n", 1, 2.5, None, True, {"email": "x"})]) == LeakFinding(
        "field_name", "list"
    )
    assert find_forbidden_name({"a": _struct({"b": {"phone": 1}})}) == dict_row
    assert find_forbidden_name({"a": Row(email="x")}) == dict_row
    assert find_forbidden_name(Row(notes={"dob": "x"})) == LeakFinding("field_name", "Row")
    key_text = LeakFinding("key_in_text", "dict")
    assert find_forbidden_name({"a": ["x", '{"email": 1}']}) == key_text
    assert find_forbidden_name({"a": "{'phone': 1}"}) == key_text
    assert find_forbidden_name({"a": b'{"email": 1}'}) == key_text
    assert find_forbidden_name(['{"email": 1}']) == LeakFinding("key_in_text", "list")
    assert find_forbidden_name('{"email": 1}') == LeakFinding("key_in_text", "str")
    assert find_forbidden_name("email: x") is None
    # Bare keys and encoded text in rows are values: they are judged in the finished bundle.
    for value in ("email: x", quote('{"email": 1}'), f"{KEY}", ["note", "phone=1"], 7, None):
        assert find_forbidden_name({"node_id": "n", "a": value}) is None, value


def test_row_strings_are_read_as_written_and_one_by_one() -> None:
    # An encoded name in the JSON text of a row is a value: the bundle check decodes it.
    encoded = '{"note": "%7B%22email%22%3A%201%7D"}'
    assert find_forbidden_name({"a": encoded}) is None
    assert _leak(encoded) == LeakFinding("key_in_text", "str")
    # Two strings of a row never join into one key.
    assert find_forbidden_name({"a": 'ghi "ema', "b": 'il": 1'}) is None
    assert find_forbidden_name({"a": ['ghi "ema', 'il": 1']}) is None


def test_bytes_that_are_not_utf_8_are_read_around() -> None:
    data = b"\xff\xfe xem " + KEY.encode()
    plain = b"\xff\xfe " + "lớp 8".encode()
    for holder in (
        lambda b: Row(blob=b),
        lambda b: Row(blobs=[b"x", b]),
        lambda b: Row(files={"a": b}),
        lambda b: {"a": [b]},
    ):
        assert _leak(holder(data)) is not None
        assert _leak(holder(plain)) is None


def test_a_recursive_message_type_is_read_to_any_depth() -> None:
    row: Any = Row(title="gốc")
    node = row
    for _ in range(50):
        node = node.children.add(title="nhánh")
    node.notes[KEY] = "lá"
    assert _leak(row) == LeakFinding("value", "Row")


# Planted at random depths, in every container a bundle can hold.

# Eight digits or more in a row, however separated, can be a phone number: not safe text.
_SAFE_TEXT = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyz0123456789 .,;()ăâđêôơưáàảãạ", max_size=20
).filter(lambda text: not re.search(r"\d{8}", re.sub(r"[ .,;()]", "", text)))
_LEAF = st.one_of(_SAFE_TEXT, st.integers(-1000, 1000), st.booleans(), st.none())
_TREE = st.recursive(
    _LEAF,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(SAFE_NAME, children, max_size=4)
    ),
    max_leaves=25,
)
_PROSE = st.sampled_from(["", "Ghi chú: ", " (hết)", "\\frac{1}{2} ", " trên [a; b]", "{ ", " ]"])


def _plant(tree: Any, payload: Any, data: st.DataObject) -> Any:
    """``tree`` with ``payload`` (a dict entry or a string) planted at a random depth."""
    children = (
        list(tree.values()) if isinstance(tree, dict) else tree if isinstance(tree, list) else []
    )
    containers = [i for i, child in enumerate(children) if isinstance(child, dict | list)]
    if bool(containers) and data.draw(st.booleans(), label="descend"):
        index = data.draw(st.sampled_from(containers), label="child")
        if isinstance(tree, dict):
            key = list(tree)[index]
            return {**tree, key: _plant(tree[key], payload, data)}
        return [*tree[:index], _plant(tree[index], payload, data), *tree[index + 1 :]]
    if isinstance(tree, dict):
        return {**tree, **payload} if isinstance(payload, dict) else {**tree, "notes": payload}
    if isinstance(tree, list):
        position = data.draw(st.integers(0, len(tree)), label="position")
        return [*tree[:position], payload, *tree[position:]]
    return payload


def _encode(tree: Any, data: st.DataObject) -> Any:
    """Containers re-encoded at random as Python data, a Struct, JSON text or Python text."""
    if not isinstance(tree, dict | list):
        return tree
    how = data.draw(st.sampled_from(["python", "struct", "json", "repr"]), label="encoding")
    if how == "json":
        encoded = json.dumps(tree, ensure_ascii=data.draw(st.booleans(), label="ascii"))
        return f"{data.draw(_PROSE)}{encoded}{data.draw(_PROSE)}"
    if how == "repr":
        return f"{data.draw(_PROSE)}{tree!r}{data.draw(_PROSE)}"
    if how == "struct" and isinstance(tree, dict):
        return struct_of(tree)
    if isinstance(tree, dict):
        return {key: _encode(value, data) for key, value in tree.items()}
    return [_encode(value, data) for value in tree]


def _wrap(encoded: Any, data: st.DataObject) -> object:
    """Sometimes hand the gate a message holding the structure, as handlers do."""
    if isinstance(encoded, Struct) and data.draw(st.booleans(), label="in a message"):
        return conversation_pb2.ConversationState(agent_state=encoded)
    if isinstance(encoded, str) and data.draw(st.booleans(), label="in a message"):
        return pb.ContextBundle(rendered_text=encoded)
    return encoded


def _name_payload(data: st.DataObject) -> Any:
    name = data.draw(FORBIDDEN_NAME, label="name")
    how = data.draw(st.sampled_from(["key", "bare", "line"]), label="how")
    if how == "key":
        return {name: data.draw(_LEAF)}
    if how == "bare":
        return f"{name}: 0912 345 678"
    return f"Ghi chú\n{name} = An"


@PROPERTY
@given(tree=_TREE, data=st.data())
def test_planted_names_and_values_are_blocked_at_any_depth(tree: Any, data: st.DataObject) -> None:
    if data.draw(st.booleans(), label="name or value"):
        payload = _name_payload(data)
        forbidden = LINKED
    else:
        key = data.draw(KEYS)
        payload = f"xem {data.draw(key_variants(key))} nhé"
        forbidden = LINKED | {key}
    planted = _wrap(_encode(_plant(tree, payload, data), data), data)
    assert leaks(planted, forbidden)


@PROPERTY
@given(tree=_TREE, data=st.data())
def test_structures_without_them_pass(tree: Any, data: st.DataObject) -> None:
    assert not leaks(_wrap(_encode(tree, data), data))


# In bundles and in the text rendered from them.


@PROPERTY
@given(data=st.data())
def test_a_key_in_a_bundle_field_is_blocked_there_and_in_the_rendered_text(
    data: st.DataObject,
) -> None:
    key = data.draw(KEYS)
    variant = data.draw(key_variants(key))
    bundle = pb.ContextBundle(learner_ref="nemo_" + "ab" * 12, locale=locale_pb2.LOCALE_VI)
    bundle.profile.grade = 8
    where = data.draw(st.sampled_from(["node_title", "goal", "reason"]))
    if where == "node_title":
        bundle.mastery.add(node_id="math-08-slope", node_title=f"Hệ số góc {variant}", mastery=0.4)
    elif where == "goal":
        bundle.goal.title = f"Thi vào 10 ({variant})"
    else:
        bundle.next_experience.title = "Ôn tập"
        bundle.next_experience.reason = f"Giáo viên {variant} đề xuất"
    rendered = render_bundle(bundle)
    assert leaks(bundle, frozenset({key}))
    assert leaks(pb.ContextBundle(rendered_text=rendered), frozenset({key}))


# Messages are read as the union of their strings.

_TEXT_FIELDS = st.sampled_from(["node_title", "goal", "slice", "rendered_text", "purpose"])
_SPREAD_TEXT = st.one_of(
    _SAFE_TEXT,
    SENTENCE,
    KEYS.flatmap(key_variants),
    st.sampled_from(sorted(LINKED)),
    FORBIDDEN_NAME.map(lambda name: f'{{"{name}": 1}}'),
)


def _bundle_with(texts: list[tuple[str, str]]) -> pb.ContextBundle:
    bundle = pb.ContextBundle()
    for field, text in texts:
        if field == "node_title":
            bundle.mastery.add(node_id="n", node_title=text)
        elif field == "goal":
            bundle.goal.title += text
        elif field == "slice":
            bundle.slices.append(text)
        elif field == "rendered_text":
            bundle.rendered_text += text
        else:
            bundle.purpose = text
    return bundle


@PROPERTY
@given(texts=st.lists(st.tuples(_TEXT_FIELDS, _SPREAD_TEXT), max_size=8))
def test_a_message_is_judged_as_its_strings_one_by_one(texts: list[tuple[str, str]]) -> None:
    bundle = _bundle_with(texts)
    strings = [
        *bundle.slices,
        bundle.purpose,
        bundle.rendered_text,
        bundle.goal.title,
        *(entry.node_title for entry in bundle.mastery),
    ]
    one_by_one = any(find_leak(text, forbidden_values=LINKED) for text in strings)
    assert leaks(bundle) == one_by_one


# Containers, and what the gate hands out.


def test_map_keys_of_a_proto_map_are_checked_as_names_and_as_text() -> None:
    assert leaks(error_details_pb2.ErrorInfo(metadata={"emailAddress": "x"}))
    assert leaks(error_details_pb2.ErrorInfo(metadata={"note": "for U-2041-P1"}))
    assert leaks(error_details_pb2.ErrorInfo(metadata={"U-2041-M1": "mentor"}))
    assert not leaks(error_details_pb2.ErrorInfo(metadata={"note": "node math-08-slope"}))


def test_repository_rows_are_checked_for_names_only() -> None:
    assert find_forbidden_name({"rows": [{"node_id": "x", "extra": '{"a": {"email": 1}}'}]})
    assert find_forbidden_name([{"model": {"steps": [{"learnerId": 3}]}}])
    assert find_forbidden_name({"rows": [{"note": "{'phone_number': '0912'}"}]})
    # The rows carry the learner's own key for binding; values are judged in the bundle.
    assert find_forbidden_name({"rows": [{"node_id": "L-2041-1", "title": "[1, 2]"}]}) is None


def test_very_long_and_deeply_nested_text_is_read_in_linear_time() -> None:
    for text in ("[" * 100_000 + '"x"', '{"a": [' * 3_000, "A" * 200_000, "%41" * 50_000):
        assert not leaks(pb.ContextBundle(rendered_text=text))


def test_key_text_percent_encoded_in_prose_is_decoded() -> None:
    assert leaks(f"link ?id={quote('L-2041-1', safe='').replace('-', '%2D')}&x=1")
    assert leaks("%7B%22email%22%3A%201%7D")
