"""The policy engine, rule by rule: every row is one request and the decision it must get."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nemo_toolplane.decisions import Decision
from nemo_toolplane.envelope import ErrorCode
from nemo_toolplane.policy import (
    RULES,
    Effect,
    Grant,
    Policy,
    Request,
    ToolFacts,
    evaluate,
    visible,
)
from nemo_toolplane.tool_kinds import Mode, Risk

READ = ToolFacts("learner.get_profile:v1", "learner.get_profile", Risk.LOW, Mode.READ)
WRITE_LEARNER = ToolFacts(
    "learner.update_profile:v1", "learner.update_profile", Risk.HIGH, Mode.WRITE
)
WRITE_APP = ToolFacts("application.set_status:v1", "application.set_status", Risk.HIGH, Mode.WRITE)
WRITE_MEDIUM = ToolFacts("learning.create_plan:v1", "learning.create_plan", Risk.MEDIUM, Mode.WRITE)
CRITICAL = ToolFacts("ops.purge_data:v1", "ops.purge_data", Risk.CRITICAL, Mode.WRITE)


def grant(pattern: str, permission: Mode = Mode.READ, env: str = "*", scope: str = "user") -> Grant:
    return Grant(
        tool_pattern=pattern, resource_scope=scope, environment_scope=env, permission=permission
    )


DENY_LEARNER_WRITES = Policy("deny-learner-writes", Effect.DENY, tool_scope="learner.update_*")
APPROVE_HIGH_WRITES = Policy(
    "approve-high-risk-writes",
    Effect.REQUIRE_APPROVAL,
    conditions='{"risk_at_least": "HIGH", "mode": "write"}',
)
APPROVE_PRODUCTION_WRITES = Policy(
    "approve-production-writes",
    Effect.REQUIRE_APPROVAL,
    environment_scope="production",
    conditions='{"mode": "write"}',
)
DEMO_POLICIES = (DENY_LEARNER_WRITES, APPROVE_HIGH_WRITES, APPROVE_PRODUCTION_WRITES)
MIGRATIONS = Path(__file__).resolve().parents[3] / "ops" / "src" / "nemo_ops" / "migrations"


@dataclass(frozen=True)
class Case:
    name: str
    tool: ToolFacts
    grants: tuple[Grant, ...]
    expect: tuple[Decision, int, ErrorCode | None, str | None]
    policies: tuple[Policy, ...] = ()
    environment: str = "development"
    resource: str = ""
    agent: str = "learning-agent"
    tags: tuple[str, ...] = field(default=())


ALLOW = (Decision.ALLOW, 7, None, None)
NO_GRANT = (Decision.DENY, 1, ErrorCode.AUTHORIZATION_ERROR, None)
WRONG_ENV = (Decision.DENY, 2, ErrorCode.AUTHORIZATION_ERROR, None)
READ_GRANT_FOR_WRITE = (Decision.DENY, 3, ErrorCode.AUTHORIZATION_ERROR, None)


def denied_by(policy: str) -> tuple[Decision, int, ErrorCode | None, str | None]:
    return (Decision.DENY, 4, ErrorCode.POLICY_DENIED, policy)


def approval_by(
    policy: str | None, rule: int = 5
) -> tuple[Decision, int, ErrorCode | None, str | None]:
    return (Decision.REQUIRE_APPROVAL, rule, ErrorCode.APPROVAL_REQUIRED, policy)


CASES = [
    # Rule 1: a grant must cover the tool.
    Case("no grants at all", READ, (), NO_GRANT),
    Case("a grant for another tool", READ, (grant("coral.search_knowledge"),), NO_GRANT),
    Case("a glob grant covers the domain", READ, (grant("learner.*"),), ALLOW),
    Case("a bare name covers every version", READ, (grant("learner.get_profile"),), ALLOW),
    Case("the exact versioned id", READ, (grant("learner.get_profile:v1"),), ALLOW),
    Case("another version's id does not", READ, (grant("learner.get_profile:v2"),), NO_GRANT),
    Case("a comma list", READ, (grant("coral.search_knowledge, learner.get_profile"),), ALLOW),
    Case("a comma list with a versioned id", READ,
         (grant("coral.search_knowledge, learner.get_profile:v1"),), ALLOW),
    Case("an empty pattern item covers nothing", READ, (grant(" , "),), NO_GRANT),
    Case("a bare name does not cover a longer name", READ, (grant("learner.get_profile_v"),),
         NO_GRANT),
    Case("a glob of another domain", READ, (grant("learning.*"),), NO_GRANT),
    # Rule 2: the grant must cover the environment.
    Case("grant only in production", READ, (grant("learner.*", env="production"),), WRONG_ENV),
    Case("grant in a list of environments", READ,
         (grant("learner.*", env="staging,development"),), ALLOW),
    Case("one of two grants covers the environment", READ,
         (grant("learner.*", env="production"), grant("learner.get_profile")), ALLOW),
    # Rule 3: a write tool needs a write grant.
    Case("write tool, read grant", WRITE_APP,
         (grant("application.set_status"),), READ_GRANT_FOR_WRITE),
    Case("write tool, write grant, no policy", WRITE_APP,
         (grant("application.set_status", Mode.WRITE),), ALLOW),
    Case("a write grant also allows reading", READ, (grant("learner.*", Mode.WRITE),), ALLOW),
    # Rule order among 1-3: environment before permission.
    Case("read grant in another environment", WRITE_APP,
         (grant("application.set_status", env="production"),), WRONG_ENV),
    # Rule 4: deny policies.
    Case("deny-learner-writes stops update_profile", WRITE_LEARNER,
         (grant("learner.update_profile", Mode.WRITE),), denied_by("deny-learner-writes"),
         DEMO_POLICIES),
    Case("grant rules come before policies", WRITE_LEARNER,
         (grant("learner.update_profile"),), READ_GRANT_FOR_WRITE, DEMO_POLICIES),
    Case("deny wins over require-approval", WRITE_LEARNER,
         (grant("learner.update_profile", Mode.WRITE),), denied_by("deny-learner-writes"),
         (APPROVE_HIGH_WRITES, DENY_LEARNER_WRITES)),
    Case("deny policy for another agent", WRITE_LEARNER,
         (grant("learner.update_profile", Mode.WRITE),), approval_by("approve-high-risk-writes"),
         (Policy("deny-research", Effect.DENY, agent_scope="research-agent"), APPROVE_HIGH_WRITES)),
    Case("deny policy listing the agent", READ, (grant("learner.*"),), denied_by("deny-two"),
         (Policy("deny-two", Effect.DENY, agent_scope="research-agent, learning-agent"),)),
    Case("deny by resource scope, matching learner", READ, (grant("learner.*"),),
         denied_by("deny-l2"), (Policy("deny-l2", Effect.DENY, resource_scope="learner:L-2041-2"),),
         resource="learner:L-2041-2"),
    Case("deny by resource scope, other learner", READ, (grant("learner.*"),), ALLOW,
         (Policy("deny-l2", Effect.DENY, resource_scope="learner:L-2041-2"),),
         resource="learner:L-2041-1"),
    Case("a resource glob does not match a call about no resource", READ, (grant("learner.*"),),
         ALLOW, (Policy("deny-learners", Effect.DENY, resource_scope="learner:*"),)),
    Case("deny by versioned tool id", READ, (grant("learner.*"),), denied_by("deny-v1"),
         (Policy("deny-v1", Effect.DENY, tool_scope="learner.get_profile:v1"),)),
    Case("deny by exact bare tool name", READ, (grant("learner.*"),), denied_by("deny-name"),
         (Policy("deny-name", Effect.DENY, tool_scope="learner.get_profile"),)),
    Case("deny by another tool's name", READ, (grant("learner.*"),), ALLOW,
         (Policy("deny-name", Effect.DENY, tool_scope="learner.get_profiles, learner.get"),)),
    Case("deny by another version's id", READ, (grant("learner.*"),), ALLOW,
         (Policy("deny-v2", Effect.DENY, tool_scope="learner.get_profile:v2"),)),
    Case("deny with a mode condition the tool meets", READ, (grant("learner.*"),),
         denied_by("deny-reads"),
         (Policy("deny-reads", Effect.DENY, conditions='{"mode": "read"}'),)),
    Case("deny with a mode condition the tool does not meet", READ, (grant("learner.*"),), ALLOW,
         (Policy("deny-writes", Effect.DENY, conditions='{"mode": "write"}'),)),
    Case("deny from exactly the risk the tool has", WRITE_MEDIUM,
         (grant("learning.*", Mode.WRITE),), denied_by("deny-medium"),
         (Policy("deny-medium", Effect.DENY, conditions='{"risk_at_least": "MEDIUM"}'),)),
    Case("deny from a lower risk", WRITE_APP, (grant("application.*", Mode.WRITE),),
         denied_by("deny-low"),
         (Policy("deny-low", Effect.DENY,
                 conditions='{"risk_at_least": "LOW", "mode": "write"}'),)),
    Case("both conditions must hold", WRITE_MEDIUM, (grant("learning.*", Mode.WRITE),), ALLOW,
         (Policy("deny-high-writes", Effect.DENY,
                 conditions='{"risk_at_least": "HIGH", "mode": "write"}'),)),
    Case("a deny policy for the agent in another environment", READ, (grant("learner.*"),), ALLOW,
         (Policy("deny-staging", Effect.DENY, agent_scope="learning-agent",
                 environment_scope="staging"),)),
    Case("an empty item in a scope list matches nothing", READ, (grant("learner.*"),), ALLOW,
         (Policy("deny-blank-item", Effect.DENY, tool_scope=" , ,"),)),
    Case("deny in production only, in development", READ, (grant("learner.*"),), ALLOW,
         (Policy("deny-prod", Effect.DENY, environment_scope="production"),)),
    Case("deny in production only, in production", READ, (grant("learner.*"),),
         denied_by("deny-prod"),
         (Policy("deny-prod", Effect.DENY, environment_scope="production"),),
         environment="production"),
    Case("deny with a risk condition the tool does not reach", READ, (grant("learner.*"),), ALLOW,
         (Policy("deny-high", Effect.DENY, conditions='{"risk_at_least": "HIGH"}'),)),
    Case("empty conditions match", READ, (grant("learner.*"),), denied_by("deny-empty"),
         (Policy("deny-empty", Effect.DENY, conditions="{}"),)),
    Case("blank conditions match", READ, (grant("learner.*"),), denied_by("deny-blank"),
         (Policy("deny-blank", Effect.DENY, conditions="  "),)),
    # Broken conditions never match: a broken deny policy denies nothing.
    Case("broken JSON", READ, (grant("learner.*"),), ALLOW,
         (Policy("deny-broken", Effect.DENY, conditions='{"mode": "read"'),)),
    Case("conditions not an object", READ, (grant("learner.*"),), ALLOW,
         (Policy("deny-broken", Effect.DENY, conditions='["mode", "read"]'),)),
    Case("an unknown condition key", READ, (grant("learner.*"),), ALLOW,
         (Policy("deny-broken", Effect.DENY, conditions='{"mode": "read", "owner": "x"}'),)),
    Case("an unknown risk", READ, (grant("learner.*"),), ALLOW,
         (Policy("deny-broken", Effect.DENY, conditions='{"risk_at_least": "EXTREME"}'),)),
    Case("a broken deny does not hide a sound one after it", READ, (grant("learner.*"),),
         denied_by("deny-sound"),
         (Policy("deny-broken", Effect.DENY, conditions="nope"),
          Policy("deny-sound", Effect.DENY, conditions='{"mode": "read"}'))),
    # Rule 5: require-approval policies.
    Case("HIGH write needs approval", WRITE_APP, (grant("application.set_status", Mode.WRITE),),
         approval_by("approve-high-risk-writes"), DEMO_POLICIES),
    Case("MEDIUM write in development is allowed", WRITE_MEDIUM,
         (grant("learning.*", Mode.WRITE),), ALLOW, DEMO_POLICIES),
    Case("MEDIUM write in production needs approval", WRITE_MEDIUM,
         (grant("learning.*", Mode.WRITE),), approval_by("approve-production-writes"),
         DEMO_POLICIES, environment="production"),
    Case("reads in production need nothing", READ, (grant("learner.*"),), ALLOW, DEMO_POLICIES,
         environment="production"),
    Case("policies apply in priority order", WRITE_APP,
         (grant("application.set_status", Mode.WRITE),), approval_by("approve-production-writes"),
         (APPROVE_PRODUCTION_WRITES, APPROVE_HIGH_WRITES), environment="production"),
    # Rule 6: CRITICAL always needs approval, and no policy lifts it (a deny still wins).
    Case("CRITICAL without any policy", CRITICAL,
         (grant("ops.*", Mode.WRITE),), approval_by(None, 6)),
    Case("CRITICAL under a deny policy", CRITICAL, (grant("ops.*", Mode.WRITE),),
         denied_by("deny-ops"), (Policy("deny-ops", Effect.DENY, tool_scope="ops.*"),)),
    Case("CRITICAL with a broken approval policy", CRITICAL, (grant("ops.*", Mode.WRITE),),
         approval_by(None, 6),
         (Policy("approve-broken", Effect.REQUIRE_APPROVAL, conditions="{"),)),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_rule_table(case: Case) -> None:
    verdict = evaluate(
        Request(
            agent_id=case.agent,
            tool=case.tool,
            grants=case.grants,
            policies=case.policies,
            environment=case.environment,
            resource=case.resource,
        )
    )
    policy = verdict.policy.name if verdict.policy else None
    assert (verdict.decision, verdict.rule, verdict.code, policy) == case.expect


def test_every_rule_is_exercised_by_the_table() -> None:
    fired = {case.expect[1] for case in CASES}
    assert fired == {rule.number for rule in RULES} == set(range(1, 8))


def test_the_rule_table_is_in_order_and_strictest_first() -> None:
    assert [rule.number for rule in RULES] == list(range(1, 8))
    assert [rule.decision for rule in RULES] == [Decision.DENY] * 4 + [
        Decision.REQUIRE_APPROVAL
    ] * 2 + [Decision.ALLOW]


def test_a_broken_policy_is_reported_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    broken = Policy("deny-broken", Effect.DENY, conditions="{oops")
    evaluate(Request("learning-agent", READ, (grant("learner.*"),), (broken,), "development"))
    [record] = [r for r in caplog.records if "broken conditions" in r.getMessage()]
    assert record.__dict__["policy"] == "deny-broken"


def test_the_verdict_keeps_the_grants_that_passed_for_resource_authorization() -> None:
    family = grant("learner.get_profile", scope="family:F-2041-1")
    other_env = grant("learner.*", env="production", scope="*")
    verdict = evaluate(
        Request("learning-agent", READ, (family, other_env, grant("coral.*")), (), "development")
    )
    assert verdict.grants == (family,)


def test_listing_applies_only_the_grant_rules() -> None:
    write_grant = (grant("learner.update_profile", Mode.WRITE),)
    # deny-learner-writes decides at call time; the tool is still listed for a write grant.
    assert visible(
        Request("learning-agent", WRITE_LEARNER, write_grant, DEMO_POLICIES, "development")
    )
    assert not visible(
        Request("learning-agent", WRITE_LEARNER, (grant("learner.*"),), (), "development")
    )
    assert not visible(
        Request("learning-agent", READ, (grant("learner.*", env="production"),), (), "development")
    )


def _check_values(column: str) -> set[str]:
    """The values the database accepts in a column (its CHECK constraint in migration 0005)."""
    sql = (MIGRATIONS / "0005_toolplane.sql").read_text(encoding="utf-8")
    match = re.search(rf"\b{column}\s+text NOT NULL CHECK \({column} IN \(([^)]*)\)\)", sql)
    assert match is not None, column
    return {value.strip().strip("'") for value in match.group(1).split(",")}


def test_decisions_and_effects_are_the_values_the_database_stores() -> None:
    # Every decision is written to the audit log, every stored effect is read back as one.
    assert {decision.value for decision in Decision} == _check_values("decision")
    assert {effect.value for effect in Effect} == _check_values("effect")


def test_every_rule_tells_the_agent_why_in_its_own_words() -> None:
    reasons = [rule.reason for rule in RULES]
    assert all(reason and reason == reason.strip() for reason in reasons)
    assert len(set(reasons)) == len(RULES)
    denied = evaluate(Request("learning-agent", READ, (), (), "development"))
    assert denied.reason == RULES[0].reason != ""


def test_a_policy_is_named_with_its_version_the_first_by_default() -> None:
    assert Policy("deny-x", Effect.DENY).versioned_name == "deny-x@v1"
    assert Policy("deny-x", Effect.DENY, version=4).versioned_name == "deny-x@v4"


@pytest.mark.parametrize(
    ("conditions", "problem"),
    [
        ('{"mode": "read"', "not JSON"),
        ('["mode", "read"]', "not a JSON object"),
        ('"read"', "not a JSON object"),
        ('{"mode": "read", "owner": "x", "actor": 1}', "unknown keys ['actor', 'owner']"),
        ('{"risk_at_least": "EXTREME"}', "unknown risk or mode"),
        ('{"mode": "delete"}', "unknown risk or mode"),
        ('{"mode": ["read"]}', "unknown risk or mode"),
    ],
)
def test_a_broken_policy_is_logged_with_what_is_wrong(
    caplog: pytest.LogCaptureFixture, conditions: str, problem: str
) -> None:
    broken = Policy("deny-broken", Effect.DENY, conditions=conditions)
    verdict = evaluate(Request("learning-agent", READ, (grant("learner.*"),), (broken,), "dev"))
    assert verdict.decision is Decision.ALLOW  # a broken deny denies nothing
    [record] = [r for r in caplog.records if r.name == "nemo_toolplane.policy"]
    assert record.levelname == "WARNING"
    assert "deny-broken" in record.getMessage()
    assert "broken conditions" in record.getMessage()
    assert (record.__dict__["policy"], record.__dict__["problem"]) == ("deny-broken", problem)
