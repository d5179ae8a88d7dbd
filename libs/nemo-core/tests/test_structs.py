"""Struct conversion: JSON-like data comes back as it went in, a value with no kind is refused."""

from __future__ import annotations

import math
from typing import Any

import pytest
from google.protobuf import json_format, struct_pb2
from hypothesis import given
from hypothesis import strategies as st

from nemo_core.structs import ValueNotSet, python_to_struct, struct_to_python, value_to_python

# JSON numbers travel as doubles: floats, and integers a double holds exactly.
_scalars: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=10),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(2**53), max_value=2**53),
)
json_like = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
documents = st.dictionaries(st.text(max_size=6), json_like, max_size=5)


def _as_doubles(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list):
        return [_as_doubles(item) for item in value]
    return {key: _as_doubles(item) for key, item in value.items()}


@given(documents)
def test_data_round_trips_with_numbers_as_doubles(document: dict[str, Any]) -> None:
    assert struct_to_python(python_to_struct(document)) == _as_doubles(document)


@given(documents)
def test_reading_agrees_with_the_json_mapping(document: dict[str, Any]) -> None:
    struct = python_to_struct(document)
    assert struct_to_python(struct) == json_format.MessageToDict(struct)


def test_non_finite_numbers_are_read_as_they_are() -> None:
    struct = struct_pb2.Struct()
    struct.fields["nan"].number_value = math.nan
    struct.fields["inf"].number_value = -math.inf
    values = struct_to_python(struct)
    assert math.isnan(values["nan"])
    assert values["inf"] == -math.inf


@pytest.mark.parametrize("where", ["top", "nested", "listed"])
def test_a_value_with_no_kind_is_refused_wherever_it_is(where: str) -> None:
    struct = python_to_struct({"ok": 1, "inner": {"list": ["a"]}})
    if where == "top":
        struct.fields["empty"].Clear()
        struct.fields["empty"].SetInParent()
    elif where == "nested":
        struct.fields["inner"].struct_value.fields["empty"].SetInParent()
    else:
        struct.fields["inner"].struct_value.fields["list"].list_value.values.add()
    with pytest.raises(ValueNotSet):
        struct_to_python(struct)
    with pytest.raises(ValueNotSet):
        value_to_python(struct_pb2.Value())
