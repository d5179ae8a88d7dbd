"""Less for an attacker to learn: a tool the agent holds no grant for answers exactly as one that
does not exist (whatever the arguments), application metadata never names a person, and a failed
authentication carries the AUTHENTICATION_ERROR envelope."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from google.protobuf import json_format

from nemo_protos.toolplane.v1 import tool_pb2
from nemo_toolplane.tools import build_registry

from .conftest import AgentTokens, RunningToolPlane
from .mcp_http import modern_call, post
from .test_servicer import call

#: Every tool name research-agent holds no grant for (it reads knowledge and docs only).
UNGRANTED = sorted(
    {tool.name for tool in build_registry().versions()}
    - {"coral.search_knowledge", "coral.get_knowledge_node", "docs.search_docs", "docs.get_doc"}
)
#: Arguments of every shape: none, valid-looking, invalid, not even an object's worth of sense.
ARGUMENTS: list[dict[str, Any]] = [{}, {"learner_id": "L-2041-1"}, {"zz": 1}, {"query": "x" * 5000}]


def _unknown_name(name: str) -> str:
    """A name of the same shape that no tool has."""
    return name.replace(".", ".nope_", 1)


def _without_name(body: dict[str, Any], name: str) -> str:
    return json.dumps(body, sort_keys=True).replace(name, "<tool>")


@pytest.mark.parametrize("name", UNGRANTED)
async def test_an_ungranted_tool_answers_as_a_missing_one_over_mcp(
    toolplane: RunningToolPlane, tokens: AgentTokens, audit_rows: Any, name: str
) -> None:
    session = f"S-probe-{name}"
    async with httpx.AsyncClient(timeout=30) as http:
        for arguments in ARGUMENTS:
            answers = {}
            for probe in (name, _unknown_name(name)):
                reply = await post(
                    toolplane.mcp_url,
                    modern_call(probe, arguments),
                    token=tokens.research,
                    headers={"X-Nemo12-Session-Id": session},
                    client=http,
                )
                answers[probe] = (reply.status_code, _without_name(reply.json(), probe))
            assert answers[name] == answers[_unknown_name(name)], (name, arguments)
            assert '"code": -32602' in answers[name][1]
    rows = [row for row in await audit_rows(session_id=session) if row["status"] == "denied"]
    assert len(rows) == len(ARGUMENTS)
    for row in rows:
        # The operator's record says what really happened.
        assert (row["tool_id"].split(":")[0], row["error_code"]) == (name, "AUTHORIZATION_ERROR")
        assert (row["metadata"]["rule"], row["metadata"]["answered_as"]) == (1, "unknown tool")


@pytest.mark.parametrize("name", UNGRANTED[:4])
async def test_an_ungranted_tool_answers_as_a_missing_one_over_grpc(
    toolplane: RunningToolPlane, tokens: AgentTokens, name: str
) -> None:
    for arguments in ARGUMENTS:
        granted_not = await call(toolplane, tokens.research, name, arguments)
        missing = await call(toolplane, tokens.research, _unknown_name(name), arguments)
        for response, probe in ((granted_not, name), (missing, _unknown_name(name))):
            assert response.tool_id == ""
            assert response.error.code == tool_pb2.ERROR_CODE_RESOURCE_NOT_FOUND
            assert response.error.message == f"no tool {probe!r}"
        assert json_format.MessageToDict(granted_not.error.details) == {}
        assert granted_not.decision == missing.decision


@pytest.fixture
async def personal_metadata(owner: asyncpg.Connection) -> AsyncIterator[str]:
    """An application whose metadata an operator filled with people's keys and contacts."""
    metadata = {
        "url": "https://status.example",
        "owner_user_id": "U-2041-S1",
        "on_call": {
            "users": ["U-2041-A1", "U-2041-S1"],
            "rotation": "weekly",
            "Email": "oncall@x.vn",
        },
        "history": [{"changed_by_user": "U-2041-P1", "status": "active"}],
        "last_status_change": {"status": "active", "user_id": "U-2041-S1", "reason": "back"},
    }
    await owner.execute(
        "INSERT INTO toolplane.applications (id, name, domain, repository, repository_path, "
        "environment, owner, status, metadata) VALUES ('tests-app', 'Tests', 'tests', 'r', "
        "'p', 'production', 'team', 'active', $1)",
        metadata,
    )
    yield "tests-app"
    await owner.execute("DELETE FROM toolplane.applications WHERE id = 'tests-app'")


async def test_application_metadata_never_names_a_person(
    toolplane: RunningToolPlane, tokens: AgentTokens, personal_metadata: str
) -> None:
    async with toolplane.mcp(tokens.engineering) as client:
        result = await client.call_tool("application.get", {"application_id": personal_metadata})
    assert not result.is_error, result.structured_content
    metadata = result.structured_content["metadata"]
    assert metadata == {
        "url": "https://status.example",
        "on_call": {"rotation": "weekly"},
        "history": [{"status": "active"}],
        "last_status_change": {"status": "active", "reason": "back"},
    }
    assert "U-" not in json.dumps(result.structured_content)


async def test_a_failed_authentication_carries_the_authentication_envelope(
    toolplane: RunningToolPlane,
) -> None:
    for token in (None, "nemo_at_not-a-token"):
        reply = await post(toolplane.mcp_url, modern_call("docs.search_docs", {}), token=token)
        assert reply.status_code == 401
        envelope = reply.json()["error"]["data"]
        assert envelope["success"] is False
        assert envelope["error"]["code"] == "AUTHENTICATION_ERROR"
        assert envelope["error"]["retryable"] is False
