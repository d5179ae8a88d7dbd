"""The MCP Inspector's command-line client against the local stack: it lists the tools (and finds
their schemas portable), calls one, and shows each failure as the tool's own error result."""

from __future__ import annotations

import json

import pytest

from nemo_devtools.node import NodeTools
from tests.stack import Stack

from .conftest import error_envelope, listed_tool_names, run_node

#: The Inspector's exit code for a call whose result has isError (its EXIT_CODES.TOOL_ERROR).
TOOL_ERROR_EXIT = 5


def _inspector(tools: NodeTools, stack: Stack, *arguments: str) -> list[str]:
    cli = tools.package("@modelcontextprotocol/inspector") / "clients" / "cli" / "build"
    token = stack.agent_tokens["learning-agent"]
    return [
        str(tools.node),
        str(cli / "index.js"),
        stack.mcp_url,
        "--transport",
        "http",
        "--header",
        f"Authorization: Bearer {token}",
        *arguments,
    ]


async def test_the_inspector_lists_portable_tools(node_tools: NodeTools, stack: Stack) -> None:
    listed = await run_node(
        node_tools, _inspector(node_tools, stack, "--method", "tools/list", "--strict")
    )
    # --strict exits 6 when a tool schema would not port to other clients.
    assert listed.returncode == 0, listed.stderr[-4000:]
    names = [tool["name"] for tool in listed.json()["tools"]]
    assert names == await listed_tool_names(stack, stack.agent_tokens["learning-agent"])


async def test_the_inspector_calls_a_tool(node_tools: NodeTools, stack: Stack) -> None:
    called = await run_node(
        node_tools,
        _inspector(
            node_tools,
            stack,
            *("--method", "tools/call", "--tool-name", "docs.search_docs"),
            *("--tool-arg", "query=audit"),
        ),
    )
    assert called.returncode == 0, called.stderr[-4000:]
    result = called.json()
    assert result["structuredContent"]["hits"]
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("learner.get_profile", ["learner_id=L-2041-2"], "AUTHORIZATION_ERROR"),
        ("docs.search_docs", ["query=audit", "limit=0"], "VALIDATION_ERROR"),
        ("coral.get_knowledge_node", ["node_id=NO-SUCH-NODE"], "RESOURCE_NOT_FOUND"),
    ],
)
async def test_the_inspector_shows_a_failed_call_as_its_error_result(
    node_tools: NodeTools, stack: Stack, tool: str, arguments: list[str], code: str
) -> None:
    called = await run_node(
        node_tools,
        _inspector(
            node_tools,
            stack,
            *("--method", "tools/call", "--tool-name", tool),
            *("--tool-arg", *arguments),
        ),
    )
    # The result is printed, then the Inspector exits with its isError code (not a validation
    # failure of the result against the tool's output schema).
    assert called.returncode == TOOL_ERROR_EXIT, called.stderr[-4000:]
    assert json.loads(called.stderr.strip().splitlines()[-1])["error"]["code"] == "tool_is_error"
    envelope = error_envelope(called.json())
    assert envelope["error"]["code"] == code
