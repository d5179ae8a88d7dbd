from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_toolplane.mcp.jsonrpc import MAX_DEPTH, JsonRpcMessage, Unparsable, parse


def _problem(message: object) -> str | None:
    parsed = parse(json.dumps(message).encode())
    assert isinstance(parsed, JsonRpcMessage)
    return parsed.problem


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": "a-1", "method": "tools/call", "params": {"name": "x"}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ],
)
def test_well_formed_messages_pass(message: dict[str, object]) -> None:
    assert _problem(message) is None


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (["x"], "a JSON-RPC message must be a JSON object"),
        ({"id": 1, "method": "tools/list"}, 'jsonrpc must be "2.0"'),
        ({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, 'jsonrpc must be "2.0"'),
        ({"jsonrpc": "2.0", "id": True, "method": "m"}, "id must be a string or an integer"),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "m"}, "id must be a string or an integer"),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "m"}, "id must be a string or an integer"),
        ({"jsonrpc": "2.0", "id": None, "method": "m"}, "id must be a string or an integer"),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, "method must be a string"),
        ({"jsonrpc": "2.0", "id": 1, "method": "m", "params": []}, "params must be a JSON object"),
    ],
)
def test_each_malformed_envelope_names_its_problem(message: object, problem: str) -> None:
    assert _problem(message) == problem


@pytest.mark.parametrize("body", [b"", b"{", b"nul", b'{"a": 1} x', b"\xef\xbb\xbf{}"])
def test_bodies_that_are_not_json_are_unparsable(body: bytes) -> None:
    assert parse(body) is Unparsable.NOT_JSON


_JSON_TEXT = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(_JSON_TEXT, st.data())
def test_json_with_any_byte_sequence_that_is_not_utf8_is_refused_as_such(
    value: object, data: st.DataObject
) -> None:
    text = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"v": value}})
    body = text.encode()
    # A lone continuation byte, a truncated sequence, or a byte UTF-8 never uses.
    bad = data.draw(st.sampled_from([b"\x80", b"\xc3", b"\xe2\x82", b"\xff", b"\xc0\xaf"]))
    at = data.draw(st.integers(0, len(body)))
    assert parse(body[:at] + bad + body[at:]) is Unparsable.NOT_UTF8


@given(st.integers(1, 3 * MAX_DEPTH), st.sampled_from(["list", "object"]))
def test_nesting_is_refused_exactly_past_the_bound(depth: int, kind: str) -> None:
    opening, closing = ("[", "]") if kind == "list" else ('{"a":', "}")
    body = (opening * depth + "1" + closing * depth).encode()
    parsed = parse(body)
    if depth > MAX_DEPTH:
        assert parsed is Unparsable.TOO_DEEP
    else:
        assert isinstance(parsed, JsonRpcMessage)


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_nesting_of_thousands_of_levels_is_refused_without_recursing(depth: int) -> None:
    assert parse(b"[" * depth + b"]" * depth) is Unparsable.TOO_DEEP
    assert parse(b'{"a":' * depth + b"1" + b"}" * depth) is Unparsable.TOO_DEEP


@pytest.mark.parametrize(
    ("message", "name"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "a.b"}}, "a.b"),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ["a.b"]}, None),
        ({"method": "tools/call", "params": {"name": 7}}, 7),
        ({"jsonrpc": "2.0", "method": "tools/call"}, None),
    ],
)
def test_a_tools_call_is_recognised_however_malformed(message: object, name: object) -> None:
    parsed = parse(json.dumps(message).encode())
    assert isinstance(parsed, JsonRpcMessage)
    assert parsed.is_tool_call
    assert parsed.tool_name == name


def test_other_messages_are_not_tool_calls() -> None:
    for message in ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, ["tools/call"], "x"):
        parsed = parse(json.dumps(message).encode())
        assert isinstance(parsed, JsonRpcMessage)
        assert not parsed.is_tool_call
