"""The identifier gate: forbidden names at any depth, raw ids on token boundaries, Gated values."""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any

import grpc
import pytest
from google.protobuf.struct_pb2 import Struct
from google.rpc import error_details_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo.context.v1 import conversation_pb2
from nemo.context.v1 import learner_context_pb2 as pb
from nemo_context.gate import (
    CONTEXT_LEAK_BLOCKED,
    FORBIDDEN_FIELD_NAMES,
    IGNORECASE_ASCII_TWINS,
    Gated,
    find_forbidden_name,
    find_leak,
    gate,
    is_forbidden_field_name,
)
from nemo_core.errors import ServiceError

from .conftest import CounterTotal

LEARNER = "L-2041-1"
LINKED = frozenset(
    {
        "L-2041-1",
        "F-2041-1",
        "U-2041-L1",
        "U-2041-P1",
        "U-2041-P4",
        "U-2041-G1",
        "U-2041-G3",
        "U-2041-M1",
    }
)


def _struct(value: dict[str, Any]) -> Struct:
    struct = Struct()
    struct.update(value)
    return struct


def _blocked(value: object) -> bool:
    return find_leak(value, forbidden_values=LINKED) is not None


@pytest.mark.parametrize(
    "name",
    [
        "display_name",
        "displayName",
        "DisplayName",
        "DISPLAY_NAME",
        "display-name",
        "name",
        "email",
        "userId",
        "learnerID",
        "birthDate",
        "dob",
        "guardian",
        "parentName",
        "schoolName",
        "avatarUrl",
        "firstName",
        "last_name",
        "facebookUrl",
        "linksJson",
        "photo",
        "photoUrl",
        "profile_photo",
        "PHOTOS",
    ],
)
def test_forbidden_names_are_matched_after_normalising_case(name: str) -> None:
    assert is_forbidden_field_name(name)


@pytest.mark.parametrize(
    "name", ["node_title", "title", "learner_ref", "nodeTitle", "photosynthesis", "named_entity"]
)
def test_names_are_matched_whole_so_titles_pass(name: str) -> None:
    assert not is_forbidden_field_name(name)


def test_a_name_field_deep_in_nested_messages_structs_and_lists_is_blocked() -> None:
    state = conversation_pb2.ConversationState(
        extracted_info=_struct({"topics": [{"details": {"parent": {"fullName": "A B"}}}]})
    )
    assert _blocked(state)
    assert not _blocked(
        conversation_pb2.ConversationState(
            extracted_info=_struct({"topics": [{"details": {"node_title": "Hệ số góc"}}]})
        )
    )


def test_map_keys_of_a_proto_map_are_checked_as_names_and_as_text() -> None:
    assert _blocked(error_details_pb2.ErrorInfo(metadata={"email": "x"}))
    assert _blocked(error_details_pb2.ErrorInfo(metadata={"note": "for U-2041-P1"}))
    assert _blocked(error_details_pb2.ErrorInfo(metadata={"U-2041-M1": "mentor"}))
    assert not _blocked(error_details_pb2.ErrorInfo(metadata={"note": "node math-08-slope"}))


def test_json_held_in_a_string_is_parsed_and_walked() -> None:
    bundle = pb.ContextBundle(rendered_text=json.dumps({"a": [{"b": {"email": "x@example.com"}}]}))
    assert _blocked(bundle)
    bundle.rendered_text = json.dumps({"a": [{"b": {"node_title": "Phân số"}}]})
    assert not _blocked(bundle)


@pytest.mark.parametrize(
    "text",
    [
        "see L-2041-1.",
        "(L-2041-1)",
        "l-2041-1",
        "learner:L-2041-1,x",
        "L-2041-1",
        "nemo_L-2041-1",
        "học sinh L-2041-1 lớp 8",
    ],
)
def test_the_raw_id_in_free_text_is_blocked_on_token_boundaries(text: str) -> None:
    assert _blocked(pb.ContextBundle(rendered_text=text))


@pytest.mark.parametrize(
    "text", ["L-2041-10", "see L-2041-100.", "XL-1", "L-1x", "L-2041-12 and L-2041-19"]
)
def test_longer_ids_that_contain_the_raw_id_pass(text: str) -> None:
    assert not _blocked(pb.ContextBundle(rendered_text=text))


def test_ids_of_linked_users_are_blocked_like_the_learner_id() -> None:
    for user_id in ("U-2041-P1", "u-2041-m1", "F-2041-1"):
        assert _blocked(pb.ContextBundle(goal=pb.Goal(title=f"set by {user_id}")))


@pytest.mark.parametrize(
    "text",
    [
        'Ghi chú: {"profile": {"email": "x@example.com"}} (hết)',
        'kết quả [{"nodeId": 1}, {"fullName": "An"}] xong',
        'bị cắt: {"a": 1, "display_name": "An',
        '"learner_id": 7',
        'lồng: {"note": "{\\"email\\": 1}"}',
    ],
)
def test_json_anywhere_in_prose_is_walked_even_when_cut_short(text: str) -> None:
    assert _blocked(pb.ContextBundle(rendered_text=text))


def test_an_id_hidden_by_a_json_escape_inside_prose_is_decoded_and_blocked() -> None:
    assert _blocked(pb.ContextBundle(rendered_text='xem {"ref": "L\\u002d2041\\u002d1"} nhé'))
    assert not _blocked(pb.ContextBundle(rendered_text='xem {"ref": "L\\u002d2041\\u002d10"} nhé'))


@pytest.mark.parametrize(
    "text",
    [
        "\\frac{a}{b} + \\sqrt[3]{x} trên khoảng [a; b]",
        'câu "trích dẫn" và {"node_title": "Phân số", "items": [1, 2]}',
        "[[1, 2], [3, 4]] và {} và []",
    ],
)
def test_latex_brackets_and_clean_embedded_json_pass(text: str) -> None:
    assert not _blocked(pb.ContextBundle(rendered_text=text))


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + '"x"',  # deeper than the parser goes
        '{"a": [' * 3_000,
        "[" * 500 + '"x", ' * 20_000,  # every start reads to the end: quadratic work
    ],
)
def test_text_too_deep_or_costly_to_read_is_refused_not_guessed(text: str) -> None:
    assert _blocked(pb.ContextBundle(rendered_text=text))
    assert find_forbidden_name({"column": text}) is not None


def test_repository_rows_are_checked_for_names_only() -> None:
    assert find_forbidden_name({"rows": [{"node_id": "x", "extra": '{"a": {"email": 1}}'}]})
    assert find_forbidden_name([{"model": {"steps": [{"learnerId": 3}]}}])
    # The rows carry the learner's own key for binding; values are judged in the bundle.
    assert find_forbidden_name({"rows": [{"node_id": "L-2041-1", "title": "[1, 2]"}]}) is None


def test_gate_returns_the_message_it_checked() -> None:
    bundle = pb.ContextBundle(learner_ref="nemo_0123456789ab", rendered_text="lớp 8")
    gated = gate(bundle, forbidden_values=LINKED)
    assert gated.message == bundle


def test_changing_the_original_or_a_read_copy_after_gating_changes_nothing_returned() -> None:
    bundle = pb.ContextBundle(learner_ref="nemo_0123456789ab", rendered_text="lớp 8")
    gated = gate(bundle, forbidden_values=LINKED)
    bundle.rendered_text = "Học sinh L-2041-1"
    read = gated.message
    read.rendered_text = "email: x@example.com"
    assert gated.message.rendered_text == "lớp 8"
    assert gated.with_text(input_ref="ai-context/x").message.rendered_text == "lớp 8"


def test_a_blocked_bundle_raises_internal_leak_blocked_and_is_logged_and_counted_without_data(
    caplog: pytest.LogCaptureFixture, counter_total: CounterTotal
) -> None:
    before = counter_total("nemo.context.gate.blocked", {"rule": "value"})
    bundle = pb.ContextBundle(rendered_text="Học sinh L-2041-1 (Nguyễn Minh An)")
    with (
        caplog.at_level(logging.ERROR, logger="nemo_context.gate"),
        pytest.raises(ServiceError) as raised,
    ):
        gate(bundle, forbidden_values=LINKED)
    assert raised.value.code is grpc.StatusCode.INTERNAL
    assert raised.value.reason == CONTEXT_LEAK_BLOCKED
    assert "L-2041-1" not in raised.value.message
    assert counter_total("nemo.context.gate.blocked", {"rule": "value"}) == before + 1
    [record] = [r for r in caplog.records if r.name == "nemo_context.gate"]
    logged = json.dumps({**vars(record), "args": None, "msg": record.getMessage()}, default=str)
    assert "L-2041-1" not in logged
    assert "Nguyễn" not in logged
    assert record.__dict__["gate_rule"] == "value"


def test_gated_values_come_only_from_the_gate() -> None:
    with pytest.raises(TypeError):
        Gated(pb.ContextBundle(), frozenset(), key=object())


def test_text_added_after_gating_is_checked_too() -> None:
    gated = gate(pb.ContextBundle(rendered_text="lớp 8"), forbidden_values=LINKED)
    referenced = gated.with_text(input_ref="ai-context/2026-11-29/nemo_0123456789ab/x.json")
    assert referenced.message.input_ref.startswith("ai-context/")
    assert referenced.message.rendered_text == "lớp 8"
    assert gated.message.input_ref == ""  # the gated original is left as it was
    for fields in ({"input_ref": "ai-context/L-2041-1/x.json"}, {"email": "x"}):
        with pytest.raises(ServiceError) as raised:
            gated.with_text(**fields)
        assert raised.value.reason == CONTEXT_LEAK_BLOCKED


def test_a_single_string_of_forbidden_values_is_refused() -> None:
    with pytest.raises(TypeError):
        gate(pb.ContextBundle(), forbidden_values="L-2041-1")


# Property: planted names or ids are always found; clean structures (with look-alike ids) pass.

# No "-" in random text, so random text can never spell an id; look-alikes are added whole.
_SAFE_TEXT = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzLUFMP0123456789 .,:;()ăâđêôơưáàảãạ", max_size=20
)
_LOOKALIKES = st.sampled_from(
    ["L-2041-10", "L-2041-100", "XL-1", "L-1x", "U-2041-P10", "F-2041-12", "U-2041-M11"]
)
_SAFE_KEYS = st.sampled_from(
    ["node_title", "title", "learner_ref", "grade", "mastery", "notes", "items", "nodeId"]
)
_LEAF = st.one_of(
    _SAFE_TEXT,
    st.builds(lambda a, b, c: f"{a} {b} {c}", _SAFE_TEXT, _LOOKALIKES, _SAFE_TEXT),
    st.integers(-1000, 1000),
    st.booleans(),
    st.none(),
)
_TREE = st.recursive(
    _LEAF,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_SAFE_KEYS, children, max_size=4),
    ),
    max_leaves=25,
)


def _forbidden_key_spellings(name: str) -> list[str]:
    words = name.split("_")
    camel = words[0] + "".join(word.title() for word in words[1:])
    return [name, name.upper(), camel, camel[0].upper() + camel[1:]]


_PROSE = st.sampled_from(
    ["", "Ghi chú: ", " (hết)", "\\frac{1}{2} ", " trên [a; b]", 'câu "trích dẫn" ', "{ ", " ]"]
)
"""Text around JSON held in a string, brackets and quotes included."""

_FORBIDDEN_KEY = st.sampled_from(sorted(FORBIDDEN_FIELD_NAMES | {"photo_url"})).flatmap(
    lambda name: st.sampled_from(_forbidden_key_spellings(name))
)
_RAW_ID = st.sampled_from(sorted(LINKED)).flatmap(
    lambda value: st.sampled_from([value, value.lower()])
)
_ID_TEXT = st.builds(
    lambda before, value, after: f"{before}{value}{after}",
    st.sampled_from(["", "see ", "(", "học sinh ", "ref:"]),
    _RAW_ID,
    st.sampled_from(["", ".", ")", " lớp 8", ", ok"]),
)


def _plant(tree: Any, data: st.DataObject) -> Any:
    """``tree`` with one forbidden name or raw id planted at a random depth and position."""
    children = (
        list(tree.values()) if isinstance(tree, dict) else tree if isinstance(tree, list) else []
    )
    containers = [i for i, child in enumerate(children) if isinstance(child, dict | list)]
    descend: bool = bool(containers) and data.draw(st.booleans(), label="descend")
    if descend:
        index = data.draw(st.sampled_from(containers), label="child")
        if isinstance(tree, dict):
            key = list(tree)[index]
            return {**tree, key: _plant(tree[key], data)}
        return [*tree[:index], _plant(tree[index], data), *tree[index + 1 :]]
    payload_is_name = data.draw(st.booleans(), label="name or value")
    if isinstance(tree, dict):
        if payload_is_name:
            return {**tree, data.draw(_FORBIDDEN_KEY): data.draw(_LEAF)}
        return {**tree, data.draw(_SAFE_KEYS): data.draw(_ID_TEXT)}
    if isinstance(tree, list):
        item = {data.draw(_FORBIDDEN_KEY): 1} if payload_is_name else data.draw(_ID_TEXT)
        position = data.draw(st.integers(0, len(tree)), label="position")
        return [*tree[:position], item, *tree[position:]]
    if payload_is_name:
        return {data.draw(_FORBIDDEN_KEY): tree}
    return data.draw(_ID_TEXT)


def _json_ready(tree: Any) -> Any:
    # Struct holds numbers as doubles; keep the tree JSON-shaped for every encoding.
    if isinstance(tree, dict):
        return {key: _json_ready(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [_json_ready(value) for value in tree]
    return tree


def _encode(tree: Any, data: st.DataObject) -> Any:
    """Re-encode containers at random as Python data, a Struct or a JSON string."""
    if not isinstance(tree, dict | list):
        return tree
    how = data.draw(st.sampled_from(["python", "struct", "json"]), label="encoding")
    if how == "json":
        encoded = json.dumps(_json_ready(tree), ensure_ascii=data.draw(st.booleans()))
        return f"{data.draw(_PROSE, label='before')}{encoded}{data.draw(_PROSE, label='after')}"
    if how == "struct" and isinstance(tree, dict):
        return _struct(_json_ready(tree))
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


_PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@_PROPERTY_SETTINGS
@given(tree=_TREE, data=st.data())
def test_planted_names_and_ids_are_always_blocked(tree: Any, data: st.DataObject) -> None:
    planted = _wrap(_encode(_plant(tree, data), data), data)
    assert _blocked(planted)


@_PROPERTY_SETTINGS
@given(tree=_TREE, data=st.data())
def test_structures_without_them_always_pass(tree: Any, data: st.DataObject) -> None:
    clean = _wrap(_encode(tree, data), data)
    assert not _blocked(clean)


# The message fast path (all text gathered and searched once, after a substring pre-check) must
# decide exactly as the field-by-field scanner does.


def test_the_twins_are_every_non_ascii_character_ignorecase_equates_with_ascii() -> None:
    every_character = "".join(
        chr(code) for code in range(128, sys.maxunicode + 1) if not 0xD800 <= code <= 0xDFFF
    )
    assert set(re.findall(r"(?i)[\x00-\x7f]", every_character)) == IGNORECASE_ASCII_TWINS


@pytest.mark.parametrize(
    ("forbidden", "text"),
    [("sk-1", "\u017fk-1"), ("sk-1", "s\u212a-1"), ("li-2", "L\u0131-2"), ("li-2", "L\u0130-2")],
)
def test_ids_spelled_with_non_ascii_case_twins_are_blocked_in_messages(
    forbidden: str, text: str
) -> None:
    bundle = pb.ContextBundle(goal=pb.Goal(title=f"see {text}."))
    assert find_leak(bundle, forbidden_values={forbidden}) is not None


_TEXT_FIELDS = st.sampled_from(["node_title", "goal", "slice", "rendered_text", "purpose"])


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


_SPREAD_TEXT = st.one_of(
    _SAFE_TEXT, st.builds(lambda a, b: f"{a} {b}", _SAFE_TEXT, _LOOKALIKES), _ID_TEXT
)


@_PROPERTY_SETTINGS
@given(texts=st.lists(st.tuples(_TEXT_FIELDS, _SPREAD_TEXT), max_size=8))
def test_messages_are_judged_as_their_strings_one_by_one(texts: list[tuple[str, str]]) -> None:
    bundle = _bundle_with(texts)
    strings = [
        *bundle.slices,
        bundle.purpose,
        bundle.rendered_text,
        bundle.goal.title,
        *(entry.node_title for entry in bundle.mastery),
    ]
    one_by_one = any(find_leak(text, forbidden_values=LINKED) for text in strings)
    assert _blocked(bundle) == one_by_one
