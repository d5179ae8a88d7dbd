"""Policies that cannot silently fail open: the database refuses grants and policies that could
never match, with a message saying why, by the same rules the policy engine reads conditions
with; `nemo policies check` reports rows written around those checks and exits non-zero."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nemo_ops.cli import main as nemo
from nemo_toolplane.policy import BrokenConditions, parse_conditions
from nemo_toolplane.policy_check import find_dead_rules
from nemo_toolplane.router import tool_facts
from nemo_toolplane.tools import build_registry

INSERT_POLICY = (
    "INSERT INTO toolplane.policies (name, effect, environment_scope, conditions) "
    "VALUES ($1, $2, $3, $4)"
)
INSERT_GRANT = (
    "INSERT INTO toolplane.grants (agent_id, tool_pattern, resource_scope, environment_scope, "
    "permission) VALUES ('research-agent', 'docs.*', $1, $2, $3)"
)


@pytest.mark.parametrize(
    ("effect", "environment", "conditions", "problem"),
    [
        ("deny", "*", '{"mode": "read"', "conditions are not valid JSON"),
        ("deny", "*", '["mode", "read"]', "conditions must be a JSON object"),
        ("deny", "*", '{"mode": "read", "owner": "x"}', 'unknown condition "owner"'),
        ("deny", "*", '{"risk_at_least": "EXTREME"}', 'unknown risk level "EXTREME"'),
        ("deny", "*", '{"risk_at_least": 3}', "unknown risk level 3"),
        ("deny", "*", '{"mode": "delete"}', 'unknown mode "delete"'),
        ("deny", "prod", None, 'unknown environment "prod"'),
        ("deny", "staging, qa", None, 'unknown environment "qa"'),
        ("allow", "*", None, 'unknown effect "allow"'),
    ],
)
async def test_a_policy_that_could_never_match_is_refused_precisely(
    owner: asyncpg.Connection, effect: str, environment: str, conditions: str | None, problem: str
) -> None:
    with pytest.raises(asyncpg.CheckViolationError) as refused:
        await owner.execute(INSERT_POLICY, "tests-refused", effect, environment, conditions)
    assert str(refused.value).startswith("policy tests-refused: ")
    assert problem in str(refused.value)
    assert (
        await owner.fetchval("SELECT count(*) FROM toolplane.policies WHERE name = 'tests-refused'")
        == 0
    )


@pytest.mark.parametrize(
    ("scope", "environment", "permission", "problem"),
    [
        ("*", "*", "execute", 'unknown mode "execute"'),
        ("*", "production,live", "read", 'unknown environment "live"'),
        ("users", "*", "read", 'unknown resource scope "users"'),
        ("learner:", "*", "read", "unknown resource scope"),
        ("class:C-1", "*", "read", "unknown resource scope"),
    ],
)
async def test_a_grant_that_could_never_match_is_refused_precisely(
    owner: asyncpg.Connection, scope: str, environment: str, permission: str, problem: str
) -> None:
    with pytest.raises(asyncpg.CheckViolationError) as refused:
        await owner.execute(INSERT_GRANT, scope, environment, permission)
    assert problem in str(refused.value)
    assert str(refused.value).startswith("grant of research-agent for docs.*:")


_VALUES = st.one_of(
    st.sampled_from(["LOW", "MEDIUM", "HIGH", "CRITICAL", "read", "write", "low", "READ", ""]),
    st.integers(-2, 5),
    st.booleans(),
    st.none(),
    st.lists(st.sampled_from(["HIGH", "read"]), max_size=2),
)
_CONDITIONS = st.one_of(
    st.dictionaries(st.sampled_from(["risk_at_least", "mode", "owner", "Mode"]), _VALUES),
    st.lists(_VALUES, max_size=2),
    _VALUES,
).map(json.dumps) | st.text(
    # What PostgreSQL text can hold: no NUL, no lone surrogate (no UTF-8 encodes one).
    st.characters(exclude_characters="\x00", exclude_categories=["Cs"]),
    max_size=12,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(conditions=_CONDITIONS)
@example(conditions="\r")
@example(conditions="  ")
async def test_the_database_and_the_engine_read_conditions_alike(
    owner: asyncpg.Connection, conditions: str
) -> None:
    try:
        parse_conditions(conditions)
        engine_accepts = True
    except BrokenConditions:
        engine_accepts = False
    problem = await owner.fetchval("SELECT toolplane.conditions_problem($1)", conditions)
    assert (problem is None) is engine_accepts, (conditions, problem)


@pytest.fixture
async def rows_written_around_the_checks(owner: asyncpg.Connection) -> AsyncIterator[None]:
    """A broken deny policy and a grant for no environment, as written before the checks."""
    await owner.execute("ALTER TABLE toolplane.policies DISABLE TRIGGER policies_check")
    await owner.execute("ALTER TABLE toolplane.grants DISABLE TRIGGER grants_check")
    try:
        await owner.execute(INSERT_POLICY, "tests-broken-deny", "deny", "*", '{"mode": "reed"}')
        await owner.execute(INSERT_GRANT, "*", "prod", "read")
    finally:
        await owner.execute("ALTER TABLE toolplane.policies ENABLE TRIGGER policies_check")
        await owner.execute("ALTER TABLE toolplane.grants ENABLE TRIGGER grants_check")
    yield
    await owner.execute("DELETE FROM toolplane.policies WHERE name = 'tests-broken-deny'")
    await owner.execute("DELETE FROM toolplane.grants WHERE environment_scope = 'prod'")


async def test_policies_check_passes_on_the_demo_rules(
    owner_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await asyncio.to_thread(nemo, ["policies", "check", "--database-url", owner_dsn])
    out = capsys.readouterr()
    assert code == 0, out.out
    assert "0 problem(s)" in out.err


async def test_policies_check_reports_rows_that_can_never_match(
    owner_dsn: str,
    rows_written_around_the_checks: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = await asyncio.to_thread(nemo, ["policies", "check", "--database-url", owner_dsn])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert any(line.startswith("policy tests-broken-deny: broken conditions") for line in lines), (
        lines
    )
    assert any("(research-agent, docs.*): environment scope 'prod'" in line for line in lines)


def test_findings_name_every_kind_of_dead_rule() -> None:
    registry = build_registry()
    tools = [tool_facts(tool, registry) for tool in registry.versions()]
    grant: dict[str, Any] = {
        "id": 1,
        "agent_id": "a",
        "tool_pattern": "nothing.*",
        "resource_scope": "*",
        "environment_scope": "*",
        "permission": "read",
    }
    policy: dict[str, Any] = {
        "name": "p",
        "effect": "deny",
        "agent_scope": "ghost-*",
        "tool_scope": "docs.*",
        "resource_scope": "*",
        "environment_scope": "*",
        "conditions": '{"risk_at_least": "HIGH"}',
        "enabled": True,
    }
    problems = [finding.problem for finding in find_dead_rules([grant], [policy], ["a"], tools)]
    assert problems == [
        "tool pattern 'nothing.*' covers no registered tool",
        "agent scope 'ghost-*' covers no agent",
        "its conditions hold for no tool in its tool scope",
    ]
    assert find_dead_rules([], [{**policy, "enabled": False}], ["a"], tools) == []
