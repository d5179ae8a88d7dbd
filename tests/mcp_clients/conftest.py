"""Fixtures of the external-client tests: the official MCP clients from the npm registry, pinned in
``node/package.json`` and ``node/package-lock.json`` and installed once per lockfile (see
:mod:`nemo_devtools.node`), run against the shared stack, which is configured like ``make run``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from nemo_devtools import node
from nemo_toolplane.mcp.endpoint import ERROR_META_KEY
from tests.stack import Stack

NODE_PROJECT = Path(__file__).parent / "node"
#: Longest one client run may take; each finishes in about a second.
RUN_SECONDS = 120


@pytest.fixture(scope="session")
def node_tools() -> node.NodeTools:
    """The pinned npm packages and a Node that runs them (installed on first use)."""
    return node.install(NODE_PROJECT)


@dataclass(frozen=True)
class Finished:
    """What a client process printed and how it ended."""

    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """Its standard output as JSON."""
        return json.loads(self.stdout)


async def run_node(tools: node.NodeTools, command: Sequence[str], stdin: str = "") -> Finished:
    """Run ``command`` with the install's environment, from its directory; killed after
    :data:`RUN_SECONDS`."""
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=tools.root,
        env=tools.env(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(RUN_SECONDS):
            out, err = await process.communicate(stdin.encode())
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return Finished(process.returncode or 0, out.decode(), err.decode())


async def listed_tool_names(stack: Stack, token: str) -> list[str]:
    """The tools an agent's ``tools/list`` names, read with a plain JSON-RPC request."""
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(
            stack.mcp_url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-11-25",
            },
        )
    return [tool["name"] for tool in response.json()["result"]["tools"]]


def error_envelope(result: dict[str, Any]) -> dict[str, Any]:
    """The error envelope of a failed call's result as a client returned it (JSON), checked to be
    where the edge documents it: the text is its JSON, ``_meta`` holds the same, and there is no
    ``structuredContent``."""
    assert result.get("isError") is True, result
    assert "structuredContent" not in result, result
    [block] = result["content"]
    envelope: dict[str, Any] = json.loads(block["text"])
    assert result["_meta"][ERROR_META_KEY] == envelope
    return envelope
