"""Two people's sessions through the same edge replica, at once, never see each other's results:
many interleaved calls for each credential kind (an agent token bound to the person, an OAuth
access token over MCP and over gRPC, a user the platform vouches for over gRPC), each answered
with its own person's child and audited under its own person."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from nemo_protos.toolplane.v1 import toolplane_service_pb2 as pb
from nemo_testing.oauth import OAuthServer
from nemo_toolplane.tokens import issue_token
from services.toolplane.tests.conftest import RunningToolPlane
from services.toolplane.tests.mcp_http import modern_call, post
from services.toolplane.tests.test_servicer import agent, arguments

#: Each person and the children they may reach; the other person's children they may not.
CHILDREN = {"U-2041-P1": ("L-2041-1", "L-2041-3"), "U-2041-P2": ("L-2041-2",)}
CALLS_PER_KIND = 80

#: One call: (person, learner) -> (learner_ref of the answer or None when refused, call id).
Caller = Callable[[str, str], Awaitable[tuple[str | None, str]]]


def _mcp(plane: RunningToolPlane, credentials: dict[str, str]) -> Caller:
    async def one(person: str, learner: str) -> tuple[str | None, str]:
        response = await post(
            plane.mcp_url,
            modern_call("learner.get_profile", {"learner_id": learner}),
            token=credentials[person],
            headers={"X-Nemo12-Session-Id": f"S-tenant-{person}"},
        )
        result = response.json()["result"]
        ref = None if result.get("isError") else result["structuredContent"]["learner_ref"]
        return ref, response.headers["x-nemo-call-id"]

    return one


def _grpc(plane: RunningToolPlane, credentials: dict[str, str], caller: str = "internal") -> Caller:
    vouching = caller == "platform"

    async def one(person: str, learner: str) -> tuple[str | None, str]:
        response = await plane.tools_stub(caller).CallTool(
            pb.CallToolRequest(
                tool="learner.get_profile",
                arguments=arguments({"learner_id": learner}),
                session_id=f"S-tenant-{person}",
                user_id=person if vouching else "",
            ),
            metadata=agent(credentials[person]),
            timeout=10,
        )
        ref = str(response.result["learner_ref"]) if response.success else None
        return ref, response.call_id

    return one


async def _interleaved(call: Caller, owner: Any, plane: RunningToolPlane) -> None:
    # Each person's own children's pseudonyms, read one at a time first.
    refs = {
        learner: (await call(person, learner))[0]
        for person, own in CHILDREN.items()
        for learner in own
    }
    assert all(refs.values())
    assert len(set(refs.values())) == len(refs)
    everyone = [learner for own in CHILDREN.values() for learner in own]
    plan = [
        (person, random.choice(everyone))  # noqa: S311  a shuffle, not a secret
        for person in CHILDREN
        for _ in range(CALLS_PER_KIND // len(CHILDREN))
    ]
    random.shuffle(plan)
    answers = await asyncio.gather(*(call(person, learner) for person, learner in plan))
    await plane.plane.audit.flush()
    for (person, learner), (ref, call_id) in zip(plan, answers, strict=True):
        if learner in CHILDREN[person]:
            assert ref == refs[learner], (person, learner)
        else:
            assert ref is None, (person, learner)
        row = await owner.fetchrow(
            "SELECT user_id, session_id, resource FROM toolplane.audit_logs WHERE call_id = $1",
            call_id,
        )
        assert (row["user_id"], row["session_id"], row["resource"]) == (
            person,
            f"S-tenant-{person}",
            f"learner:{learner}",
        )


@pytest.fixture(scope="module")
async def bound_tokens(owner: Any) -> dict[str, str]:
    return {
        person: (await issue_token(owner, "learning-agent", user_id=person, label="tests")).token
        for person in CHILDREN
    }


@pytest.fixture(scope="module")
async def oauth_tokens(oauth_server: OAuthServer, oauth_plane: RunningToolPlane) -> dict[str, str]:
    resource = oauth_plane.settings.oauth_resource
    return {
        person: (
            await oauth_server.tokens(person, resource=resource, scopes=["learner.read"])
        ).access_token
        for person in CHILDREN
    }


@pytest.mark.parametrize("edge", ["mcp", "grpc"])
async def test_agent_tokens_bound_to_two_people_never_cross(
    oauth_plane: RunningToolPlane, owner: Any, bound_tokens: dict[str, str], edge: str
) -> None:
    call = _mcp(oauth_plane, bound_tokens) if edge == "mcp" else _grpc(oauth_plane, bound_tokens)
    await _interleaved(call, owner, oauth_plane)


@pytest.mark.parametrize("edge", ["mcp", "grpc"])
async def test_two_peoples_oauth_tokens_never_cross(
    oauth_plane: RunningToolPlane, owner: Any, oauth_tokens: dict[str, str], edge: str
) -> None:
    call = _mcp(oauth_plane, oauth_tokens) if edge == "mcp" else _grpc(oauth_plane, oauth_tokens)
    await _interleaved(call, owner, oauth_plane)


async def test_two_people_the_platform_vouches_for_never_cross(
    oauth_plane: RunningToolPlane, owner: Any
) -> None:
    unbound = (await issue_token(owner, "learning-agent", label="tests", unbound=True)).token
    call = _grpc(oauth_plane, dict.fromkeys(CHILDREN, unbound), caller="platform")
    await _interleaved(call, owner, oauth_plane)
