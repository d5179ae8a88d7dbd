"""MCP hosts signing a person in with OAuth, as Claude, ChatGPT or an IDE would, against a stack
with its own authorization server: the official Python SDK and TypeScript SDK clients each meet
the edge's 401, find the authorization server through the resource metadata, run the
authorization-code flow with PKCE (the sign-in scripted through the server's own pages) and, as
the consenting parent, read their child and are refused another family's. The Inspector CLI
uses such a token; the conformance suite's authorization-server scenarios pass against the local
server."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from nemo_devtools.node import NodeTools
from nemo_devtools.oauth_client import sign_in
from tests.stack import Stack, start_stack

from .conftest import NODE_PROJECT, RUN_SECONDS, error_envelope, run_node

REDIRECT = "http://127.0.0.1:8976/callback"
PARENT, OWN_CHILD, OTHER_CHILD = "U-2041-P1", "L-2041-1", "L-2041-2"


@pytest.fixture(scope="module")
async def oauth_stack(
    owner_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    """A stack whose edge accepts its own authorization server's tokens."""
    stack = await start_stack(owner_dsn, tmp_path_factory.mktemp("oauth-stack"), oauth=True)
    try:
        yield stack
    finally:
        await stack.stop()


async def _browser_sign_in(stack: Stack, url: str, redirect: str = REDIRECT) -> str:
    """What a person's browser does with the authorization URL: sign in, consent, and reach
    the redirect (returned, with the code)."""
    assert stack.oauth is not None
    async with httpx.AsyncClient(timeout=30, trust_env=False) as browser:
        return await sign_in(
            browser, url, user=PARENT, password=stack.oauth.password, redirect_uri=redirect
        )


class _Storage:
    """The host's token store, holding the pre-registered development client."""

    def __init__(self, client_id: str) -> None:
        self.tokens: OAuthToken | None = None
        self.client = OAuthClientInformationFull(
            client_id=client_id,
            redirect_uris=[REDIRECT],
            token_endpoint_auth_method="none",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        )

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def test_the_python_sdk_signs_a_parent_in_who_reads_only_their_child(
    oauth_stack: Stack,
) -> None:
    assert oauth_stack.oauth is not None
    reached: list[str] = []

    async def redirect_handler(url: str) -> None:
        reached.append(await _browser_sign_in(oauth_stack, url))

    async def callback_handler() -> AuthorizationCodeResult:
        params = {k: v[0] for k, v in parse_qs(urlsplit(reached[-1]).query).items()}
        return AuthorizationCodeResult(
            code=params["code"], state=params.get("state"), iss=params.get("iss")
        )

    storage = _Storage(oauth_stack.oauth.client_id)
    auth = OAuthClientProvider(
        oauth_stack.mcp_url,
        OAuthClientMetadata(redirect_uris=[REDIRECT], client_name="nemo tests (Python SDK)"),
        storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    http = httpx2.AsyncClient(auth=auth, timeout=30)
    try:
        async with Client(streamable_http_client(oauth_stack.mcp_url, http_client=http)) as client:
            own = await client.call_tool("learner.get_profile", {"learner_id": OWN_CHILD})
            other = await client.call_tool("learner.get_profile", {"learner_id": OTHER_CHILD})
    finally:
        await http.aclose()
    assert len(reached) == 1  # one sign-in
    assert not own.is_error
    assert own.structured_content is not None
    assert own.structured_content["profile"]["grade"] == 8
    assert other.is_error
    assert json.loads(other.content[0].text)["error"]["code"] == "AUTHORIZATION_ERROR"  # type: ignore[union-attr]
    assert storage.tokens is not None


async def _run_interactive(tools: NodeTools, stack: Stack, plan: dict[str, Any]) -> dict[str, Any]:
    """Run the TypeScript host, doing the person's sign-in when it asks for one."""
    process = await asyncio.create_subprocess_exec(
        *tools.module_command(NODE_PROJECT / "oauth_host.mjs"),
        cwd=tools.root,
        env={**tools.env(), "NEMO_OAUTH_HOST_PLAN": json.dumps(plan)},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        async with asyncio.timeout(RUN_SECONDS):
            asked = json.loads(await process.stdout.readline())
            callback = await _browser_sign_in(stack, asked["authorize"])
            process.stdin.write(callback.encode() + b"\n")
            await process.stdin.drain()
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, err.decode()[-2000:]
    finished: dict[str, Any] = json.loads(out)
    finished["authorize"] = asked["authorize"]
    return finished


async def test_the_typescript_sdk_signs_a_parent_in_who_reads_only_their_child(
    node_tools: NodeTools, oauth_stack: Stack
) -> None:
    assert oauth_stack.oauth is not None
    plan = {
        "url": oauth_stack.mcp_url,
        "clientId": oauth_stack.oauth.client_id,
        "redirectUrl": REDIRECT,
        "steps": [
            {"name": "learner.get_profile", "arguments": {"learner_id": OWN_CHILD}},
            {"name": "learner.get_profile", "arguments": {"learner_id": OTHER_CHILD}},
        ],
    }
    finished = await _run_interactive(node_tools, oauth_stack, plan)
    authorize = parse_qs(urlsplit(finished["authorize"]).query)
    # RFC 8707 and PKCE, as the edge's metadata led the SDK to ask.
    assert authorize["resource"] == [oauth_stack.mcp_url]
    assert authorize["code_challenge_method"] == ["S256"]
    own, other = (step["result"] for step in finished["steps"])
    assert own.get("isError") is not True
    assert own["structuredContent"]["profile"]["grade"] == 8
    assert error_envelope(other)["error"]["code"] == "AUTHORIZATION_ERROR"


async def test_the_inspector_cli_calls_with_a_persons_token(
    node_tools: NodeTools, oauth_stack: Stack
) -> None:
    tokens = await oauth_stack.oauth_tokens(PARENT, scopes=["learner.read"])
    cli = node_tools.package("@modelcontextprotocol/inspector") / "clients" / "cli" / "build"
    command = [
        str(node_tools.node),
        str(cli / "index.js"),
        oauth_stack.mcp_url,
        *("--transport", "http"),
        *("--header", f"Authorization: Bearer {tokens.access_token}"),
        *("--method", "tools/call", "--tool-name", "learner.get_profile"),
        *("--tool-arg", f"learner_id={OWN_CHILD}"),
    ]
    finished = await run_node(node_tools, command)
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert finished.json()["structuredContent"]["profile"]["grade"] == 8


def _checks(output: Path) -> list[dict[str, Any]]:
    return [
        check
        for found in output.glob("*/checks.json")
        for check in json.loads(found.read_text("utf-8"))
    ]


#: The conformance suite's scenarios for an authorization server, all of which apply to the local
#: one (the suite has no authorization scenarios for a server's resource side).
AUTHORIZATION_SCENARIOS = ("authorization-server-metadata-endpoint", "authorization-code-grant")


async def test_the_conformance_authorization_scenarios_pass_against_the_local_server(
    node_tools: NodeTools, oauth_stack: Stack, tmp_path: Path
) -> None:
    assert oauth_stack.oauth is not None
    from nemo_testing.ports import free_port

    port = free_port()
    suite = node_tools.package("@modelcontextprotocol/conformance") / "dist" / "index.js"
    process = await asyncio.create_subprocess_exec(
        str(node_tools.node),
        str(suite),
        "authorization",
        # Every scenario in one run: the code grant reads the metadata scenario's result.
        *("--url", oauth_stack.oauth.issuer),
        *("--client-id", oauth_stack.oauth.client_id, "--resource", oauth_stack.mcp_url),
        *("--port", str(port), "--output-dir", str(tmp_path)),
        cwd=node_tools.root,
        env=node_tools.env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    output = b""
    async with asyncio.timeout(RUN_SECONDS):
        while line := await process.stdout.readline():
            output += line
            # The suite waits for a person at this URL; the scripted sign-in is that person.
            if match := re.search(rb"^(http://\S+/auth\?\S+)$", line.strip()):
                callback = await _browser_sign_in(
                    oauth_stack, match[1].decode(), f"http://127.0.0.1:{port}/callback"
                )
                async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
                    await http.get(callback)
        await process.wait()
    checks = _checks(tmp_path)
    assert checks, output.decode()[-3000:]
    assert {check["id"] for check in checks} >= {
        "authorization-server-metadata",
        "authorization-code-grant",
    }, AUTHORIZATION_SCENARIOS
    failed = [check for check in checks if check["status"] == "FAILURE"]
    assert not failed, [(c["id"], c.get("errorMessage")) for c in failed]
