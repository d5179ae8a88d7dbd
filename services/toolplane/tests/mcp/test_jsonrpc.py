from __future__ import annotations

import json

import pytest

from nemo_toolplane.mcp.jsonrpc import parse


def _problem(message: object) -> str | None:
    parsed = parse(json.dumps(message).encode())
    assert parsed is not None
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


@pytest.mark.parametrize("body", [b"", b"{", b"\xff", b"[" * 100_000])
def test_bodies_that_are_not_json_are_left_to_the_sdk(body: bytes) -> None:
    assert parse(body) is None


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
    assert parsed is not None
    assert parsed.is_tool_call
    assert parsed.tool_name == name


def test_other_messages_are_not_tool_calls() -> None:
    for message in ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, ["tools/call"], "x"):
        parsed = parse(json.dumps(message).encode())
        assert parsed is not None
        assert not parsed.is_tool_call
