"""Policies mean what they say: a resource scope that could never match is refused when written
and reported by `nemo policies check` alike; a composite tool is denied when a policy denies any
of its parts for that learner; a status change is stored as JSON, not as text holding JSON."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_toolplane.decisions import Decision
from nemo_toolplane.policy import Effect, Grant, Policy, Request, evaluate
from nemo_toolplane.policy_check import find_dead_rules
from nemo_toolplane.registry import Registry
from nemo_toolplane.router import tool_facts
from nemo_toolplane.tool_kinds import Mode
from nemo_toolplane.tools import build_registry
from nemo_toolplane.tools.views import view_tool
from services.toolplane.tests.conftest import (
    AgentTokens,
    OperatorTokens,
    RunningToolPlane,
    rules_change,
)
from services.toolplane.tests.mcp_http import modern_call, post
from services.toolplane.tests.test_approvals import APP, ARGS, _approval_id, _call, _decide

REGISTRY = build_registry()
TOOLS = [tool_facts(tool, REGISTRY) for tool in REGISTRY.versions()]
_COMPOSITE = REGISTRY.resolve("nemo12.get_learner_learning_state")
assert _COMPOSITE is not None
COMPOSITE = _COMPOSITE

_ITEMS = st.one_of(
    st.sampled_from(["*", "user", "family:F-2041-1", "learner:L-2041-1", "learner:L-2041-*"]),
    st.builds(
        lambda kind, key: f"{kind}:{key}",
        st.sampled_from(["learner", "family", "class", ""]),
        st.text("LF-2041*", max_size=8),
    ),
    st.text(max_size=10),
)
_SCOPES = st.lists(_ITEMS, min_size=1, max_size=3).map(lambda items: ",".join(items))


def _policy_row(scope: str) -> dict[str, Any]:
    return {
        "name": "tests-scope",
        "effect": "deny",
        "agent_scope": "*",
        "tool_scope": "learner.*",
        "resource_scope": scope,
        "environment_scope": "*",
        "conditions": None,
        "enabled": True,
    }


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(scope=_SCOPES)
async def test_the_database_and_policies_check_judge_a_policy_resource_scope_alike(
    owner: asyncpg.Connection, scope: str
) -> None:
    if "\x00" in scope:
        return
    problem = await owner.fetchval("SELECT toolplane.policy_resource_scope_problem($1)", scope)
    written = problem is None
    if not written:
        assert "can never match" in problem
    findings = find_dead_rules([], [_policy_row(scope)], ["learning-agent"], TOOLS)
    reported = any("resource scope" in finding.problem for finding in findings)
    assert written is not reported, (scope, findings)
    # A family or the acting user never appear in what a call is about: both are refused.
    if any(
        item.strip() == "user" or item.strip().startswith("family:") for item in scope.split(",")
    ):
        assert not written


@given(
    part=st.sampled_from(COMPOSITE.parts),
    other=st.sampled_from(
        ["learner.get_competency_profile", "assessment.get_mastery", "docs.search_docs"]
    ),
)
def test_a_policy_on_any_part_judges_the_composite_too(part: str, other: str) -> None:
    facts = tool_facts(COMPOSITE, REGISTRY)
    grants = (Grant("nemo12.*", "user", "*", Mode.READ),)

    def decide(policy: Policy, resource: str) -> Decision:
        request = Request("learning-agent", facts, grants, (policy,), "development", resource)
        return evaluate(request).decision

    on_part = Policy("no-part", Effect.DENY, tool_scope=part, resource_scope="learner:L-2041-1")
    assert decide(on_part, "learner:L-2041-1") is Decision.DENY
    assert decide(on_part, "learner:L-2041-3") is Decision.ALLOW
    approve = Policy("ask-part", Effect.REQUIRE_APPROVAL, tool_scope=f"{part}:v1")
    assert decide(approve, "learner:L-2041-3") is Decision.REQUIRE_APPROVAL
    not_a_part = Policy("no-other", Effect.DENY, tool_scope=other)
    assert decide(not_a_part, "learner:L-2041-1") is Decision.ALLOW


def test_two_tools_returning_the_same_view_deny_each_other() -> None:
    # What the registrations contract asks of a second tool returning the profile: each names
    # the other as a part, and a policy on either keeps both from the learner.
    profile = REGISTRY.resolve("learner.get_profile")
    assert profile is not None
    twin = view_tool("learner.get_twin", "profile", "the profile again", profile.output_model)
    registry = Registry(
        [
            *(tool for tool in REGISTRY.versions() if tool.name != profile.name),
            replace(profile, parts=("learner.get_twin",)),
            replace(twin, parts=(profile.name,)),
        ]
    )
    grants = (Grant("learner.*", "user", "*", Mode.READ),)
    for name, other in ((profile.name, twin.name), (twin.name, profile.name)):
        tool = registry.resolve(name)
        assert tool is not None
        policy = Policy("no-other", Effect.DENY, tool_scope=other, resource_scope="learner:L-1")
        request = Request(
            "learning-agent", tool_facts(tool, registry), grants, (policy,), "dev", "learner:L-1"
        )
        assert evaluate(request).decision is Decision.DENY


async def test_the_composite_is_denied_where_a_policy_keeps_one_part_from_the_learner(
    toolplane: RunningToolPlane, tokens: AgentTokens, owner: asyncpg.Connection
) -> None:
    async def state(learner: str) -> dict[str, Any]:
        response = await post(
            toolplane.mcp_url,
            modern_call("nemo12.get_learner_learning_state", {"learner_id": learner}),
            token=tokens.learning_parent,
        )
        result: dict[str, Any] = response.json()["result"]
        return result

    assert (await state("L-2041-1")).get("isError") is not True
    async with rules_change(toolplane):
        await owner.execute(
            "INSERT INTO toolplane.policies (name, effect, tool_scope, resource_scope) "
            "VALUES ('tests-no-profile', 'deny', 'learner.get_profile', 'learner:L-2041-1')"
        )
    try:
        denied = await state("L-2041-1")
        assert denied["_meta"]["dev.nemo/error"]["error"]["code"] == "POLICY_DENIED"
        assert denied["_meta"]["dev.nemo/error"]["error"]["details"]["policy"] == "tests-no-profile"
        assert (await state("L-2041-3")).get("isError") is not True
    finally:
        async with rules_change(toolplane):
            await owner.execute("DELETE FROM toolplane.policies WHERE name = 'tests-no-profile'")


async def test_a_status_change_is_stored_as_a_json_object(
    toolplane: RunningToolPlane,
    tokens: AgentTokens,
    owner: asyncpg.Connection,
    operators: OperatorTokens,
) -> None:
    approval = _approval_id(await _call(toolplane, tokens.engineering, ARGS))
    await _decide(toolplane, approval, approve=True, operator=operators.alice)
    try:
        ran = await _call(toolplane, tokens.engineering, ARGS)
        assert not ran.is_error, ran
        stored = await owner.fetchrow(
            "SELECT jsonb_typeof(metadata -> 'last_status_change') AS kind, "
            "metadata -> 'last_status_change' ->> 'reason' AS reason "
            "FROM toolplane.applications WHERE id = $1",
            APP,
        )
        assert stored is not None
        assert (stored["kind"], stored["reason"]) == ("object", ARGS["reason"])
    finally:
        await owner.execute(
            "UPDATE toolplane.applications SET status = 'active' WHERE id = $1", APP
        )
        await owner.execute(
            "DELETE FROM toolplane.approvals WHERE tool_id = 'application.set_status:v1'"
        )


async def test_writing_a_policy_scoped_to_a_family_or_the_user_is_refused(
    owner: asyncpg.Connection,
) -> None:
    for scope in ("family:F-2041-1", "user", "learner:L-2041-1, family:F-2041-2"):
        with pytest.raises(asyncpg.CheckViolationError, match="can never match"):
            await owner.execute(
                "INSERT INTO toolplane.policies (name, effect, resource_scope) "
                "VALUES ('tests-family', 'deny', $1)",
                scope,
            )
    assert (
        await owner.fetchval("SELECT count(*) FROM toolplane.policies WHERE name = 'tests-family'")
        == 0
    )
