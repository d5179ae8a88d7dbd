"""The official TypeScript SDK against the local stack: the 1.x client most MCP hosts are built on
(2025-11-25 handshake), and the 2.x client on both eras. Each lists, calls, and gets every kind
of failure back as a result it can use, not as an exception."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nemo_devtools.node import NodeTools
from tests.stack import Stack

from .conftest import NODE_PROJECT, error_envelope, listed_tool_names, run_node

INVALID_PARAMS = -32602
#: (SDK, version negotiation, the revision it then speaks).
CLIENTS = [
    ("v1", "legacy", "2025-11-25"),
    ("v2", "legacy", "2025-11-25"),
    ("v2", "auto", "2026-07-28"),
]
FAILURES = [
    # A foreign learner (U-2041-P1's children are L-2041-1 and L-2041-3).
    ("learner.get_profile", {"learner_id": "L-2041-2"}, "AUTHORIZATION_ERROR"),
    ("docs.search_docs", {"query": "audit", "limit": 0}, "VALIDATION_ERROR"),
    ("coral.get_knowledge_node", {"node_id": "NO-SUCH-NODE"}, "RESOURCE_NOT_FOUND"),
]


async def _drive(tools: NodeTools, stack: Stack, sdk: str, negotiation: str) -> dict[str, Any]:
    plan = {
        "sdk": sdk,
        "negotiation": negotiation,
        "url": stack.mcp_url,
        "headers": {"Authorization": f"Bearer {stack.agent_tokens['learning-agent']}"},
        "steps": [
            {"op": "list"},
            {"op": "call", "name": "docs.search_docs", "arguments": {"query": "audit"}},
            {"op": "call", "name": "learner.get_profile", "arguments": {"learner_id": "L-2041-1"}},
            *({"op": "call", "name": n, "arguments": a} for n, a, _ in FAILURES),
            {"op": "call", "name": "nope.missing", "arguments": {}},
            {"op": "list", "params": {"cursor": "page-2"}},
        ],
    }
    finished = await run_node(
        tools, tools.module_command(NODE_PROJECT / "sdk_client.mjs"), json.dumps(plan)
    )
    assert finished.returncode == 0, finished.stderr[-4000:]
    return dict(finished.json())


@pytest.mark.parametrize(("sdk", "negotiation", "revision"), CLIENTS)
async def test_the_typescript_client_lists_calls_and_reads_failures(
    node_tools: NodeTools, stack: Stack, sdk: str, negotiation: str, revision: str
) -> None:
    report = await _drive(node_tools, stack, sdk, negotiation)
    assert report["protocolVersion"] == revision
    listed, search, profile, *failures, unknown, cursor = report["steps"]

    names = [tool["name"] for tool in listed["result"]["tools"]]
    assert names == await listed_tool_names(stack, stack.agent_tokens["learning-agent"])
    assert all("outputSchema" in tool for tool in listed["result"]["tools"])

    # Successes are validated by the client against the output schema it was listed.
    assert search["result"]["structuredContent"]["hits"]
    assert profile["result"]["structuredContent"]["learner_ref"].startswith("nemo_")
    for outcome, (tool, _, code) in zip(failures, FAILURES, strict=True):
        assert "thrown" not in outcome, (tool, outcome)
        envelope = error_envelope(outcome["result"])
        assert (envelope["success"], envelope["error"]["code"]) == (False, code)

    # Protocol errors stay protocol errors.
    assert unknown["thrown"]["code"] == INVALID_PARAMS
    assert cursor["thrown"]["code"] == INVALID_PARAMS
