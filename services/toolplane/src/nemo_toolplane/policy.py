"""The policy engine: one pure function, seven rules, strictest first.

====  ====================================================  ================  ===================
rule  when                                                  decision          code
====  ====================================================  ================  ===================
1     no grant of the agent covers the tool                 deny              AUTHORIZATION_ERROR
2     no such grant covers the current environment          deny              AUTHORIZATION_ERROR
3     the tool writes and no such grant allows writing      deny              AUTHORIZATION_ERROR
4     an enabled ``deny`` policy matches                    deny              POLICY_DENIED
5     an enabled ``require_approval`` policy matches        require_approval  APPROVAL_REQUIRED
6     the tool is CRITICAL (no policy can lift this)        require_approval  APPROVAL_REQUIRED
7     otherwise                                             allow             -
====  ====================================================  ================  ===================

The table is :data:`RULES`; :func:`evaluate` walks it in order and the first rule that fires
decides. ``tools/list`` shows a tool when rules 1 to 3 (:data:`GRANT_RULES`) let it through.

Patterns (grant tool patterns, policy scopes) are comma-separated lists of items, each an exact
value or a glob (``*``, ``learner.update_*``). A grant's tool pattern holding ``:`` names exact
versions (``learner.get_profile:v1``); any other pattern matches the tool's bare name. A policy's
``conditions`` is a JSON object with the optional keys ``risk_at_least`` (LOW, MEDIUM, HIGH,
CRITICAL) and ``mode`` (read, write); conditions that are not such an object (broken JSON, an
unknown key, an unknown value) make the policy **not match**: a broken deny policy denies nothing,
which is logged rather than silent.

A composite tool (one returning what other tools return, its *parts*) is matched by a policy that
matches it or any of its parts, each judged with its own name, risk and mode: a policy keeping
``learner.get_profile`` away from a learner keeps the composite that carries the same profile
away too.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase
from functools import lru_cache

from nemo_toolplane.decisions import Decision
from nemo_toolplane.envelope import ErrorCode
from nemo_toolplane.patterns import matches_pattern
from nemo_toolplane.tool_kinds import Mode, Risk

logger = logging.getLogger(__name__)


class Effect(StrEnum):
    DENY = "deny"
    REQUIRE_APPROVAL = "require_approval"


@dataclass(frozen=True)
class Grant:
    """A grant of one agent: which tools, on which resources, in which environments, how."""

    tool_pattern: str
    resource_scope: str
    environment_scope: str
    permission: Mode


@dataclass(frozen=True)
class Policy:
    """A policy row; ``conditions`` is the raw stored text, parsed (and judged) here."""

    name: str
    effect: Effect
    agent_scope: str = "*"
    tool_scope: str = "*"
    resource_scope: str = "*"
    environment_scope: str = "*"
    conditions: str | None = None
    version: int = 1

    @property
    def versioned_name(self) -> str:
        return f"{self.name}@v{self.version}"


@dataclass(frozen=True)
class ToolFacts:
    """What the engine knows of a tool: its identity, risk and mode (never its code), and for a
    composite the facts of its parts."""

    tool_id: str
    name: str
    risk: Risk
    mode: Mode
    parts: tuple[ToolFacts, ...] = ()


@dataclass(frozen=True)
class Request:
    """Everything one decision depends on."""

    agent_id: str
    tool: ToolFacts
    grants: Sequence[Grant]
    policies: Sequence[Policy]
    environment: str
    #: The resource the call is about ("learner:L-2041-1"), or "" when none.
    resource: str = ""


@dataclass(frozen=True)
class Verdict:
    """The decision, the rule that made it, and what the next steps need."""

    decision: Decision
    rule: int
    reason: str
    code: ErrorCode | None = None
    policy: Policy | None = None
    #: Grants that passed rules 1 to 3; their resource scopes bound resource authorization.
    grants: tuple[Grant, ...] = ()


def grant_covers_tool(grant: Grant, tool: ToolFacts) -> bool:
    """A pattern with a version names ids; any other pattern names bare tool names."""
    items = [item.strip() for item in grant.tool_pattern.split(",")]
    return any(
        item and fnmatchcase(tool.tool_id if ":" in item else tool.name, item) for item in items
    )


@dataclass(frozen=True)
class Conditions:
    """Parsed policy conditions; absent keys do not constrain."""

    risk_at_least: Risk | None = None
    mode: Mode | None = None

    def hold_for(self, tool: ToolFacts) -> bool:
        if self.risk_at_least is not None and tool.risk.rank < self.risk_at_least.rank:
            return False
        return self.mode is None or tool.mode is self.mode


class BrokenConditions(ValueError):
    """Policy conditions that are not a valid conditions object."""


@lru_cache(maxsize=256)
def parse_conditions(raw: str | None) -> Conditions:
    """Parse stored conditions; ``None`` or blank means none. Raises :class:`BrokenConditions`."""
    # Blank as the database's check reads it (btrim trims spaces only): a lone "\r" is broken JSON.
    if raw is None or not raw.strip(" "):
        return Conditions()
    try:
        value = json.loads(raw)
    except ValueError:
        raise BrokenConditions("not JSON") from None
    if not isinstance(value, dict):
        raise BrokenConditions("not a JSON object")
    unknown = set(value) - {"risk_at_least", "mode"}
    if unknown:
        raise BrokenConditions(f"unknown keys {sorted(unknown)}")
    try:
        risk = value.get("risk_at_least")
        mode = value.get("mode")
        return Conditions(
            risk_at_least=Risk(risk) if risk is not None else None,
            mode=Mode(mode) if mode is not None else None,
        )
    except (ValueError, TypeError):
        raise BrokenConditions("unknown risk or mode") from None


def policy_matches(policy: Policy, request: Request) -> bool:
    """Whether an (enabled) policy applies to the request's tool or to one of its parts; broken
    conditions never match."""
    in_scope = (
        matches_pattern(policy.agent_scope, request.agent_id)
        # "*" also matches a call about no resource ("").
        and matches_pattern(policy.resource_scope, request.resource)
        and matches_pattern(policy.environment_scope, request.environment)
    )
    tools = [tool for tool in (request.tool, *request.tool.parts) if _names(policy, tool)]
    if not (in_scope and tools):
        return False
    try:
        conditions = parse_conditions(policy.conditions)
    except BrokenConditions as broken:
        logger.warning(
            "policy %s has broken conditions and does not match",
            policy.name,
            extra={"policy": policy.name, "problem": str(broken)},
        )
        return False
    return any(conditions.hold_for(tool) for tool in tools)


def _names(policy: Policy, tool: ToolFacts) -> bool:
    """Whether the policy's tool scope names the tool (by bare name or versioned id)."""
    return matches_pattern(policy.tool_scope, tool.name) or matches_pattern(
        policy.tool_scope, tool.tool_id
    )


@dataclass(frozen=True)
class _Facts:
    """What the rules look at, computed once per request."""

    request: Request
    tool_grants: tuple[Grant, ...]
    environment_grants: tuple[Grant, ...]
    usable_grants: tuple[Grant, ...]

    def first_policy(self, effect: Effect) -> Policy | None:
        for policy in self.request.policies:
            if policy.effect is effect and policy_matches(policy, self.request):
                return policy
        return None


def _facts(request: Request) -> _Facts:
    tool_grants = tuple(g for g in request.grants if grant_covers_tool(g, request.tool))
    environment_grants = tuple(
        g for g in tool_grants if matches_pattern(g.environment_scope, request.environment)
    )
    usable = tuple(
        g
        for g in environment_grants
        if request.tool.mode is Mode.READ or g.permission is Mode.WRITE
    )
    return _Facts(request, tool_grants, environment_grants, usable)


@dataclass(frozen=True)
class Rule:
    """One row of the rule table: when it fires, and what it decides."""

    number: int
    reason: str
    decision: Decision
    code: ErrorCode | None
    #: Returns a truthy value when the rule fires; a :class:`Policy` names the policy that did.
    fires: Callable[[_Facts], object]


RULES: tuple[Rule, ...] = (
    Rule(1, "the agent holds no grant for this tool", Decision.DENY,
         ErrorCode.AUTHORIZATION_ERROR, lambda f: not f.tool_grants),
    Rule(2, "no grant for this tool covers this environment", Decision.DENY,
         ErrorCode.AUTHORIZATION_ERROR, lambda f: not f.environment_grants),
    Rule(3, "this tool writes and the grant only allows reading", Decision.DENY,
         ErrorCode.AUTHORIZATION_ERROR, lambda f: not f.usable_grants),
    Rule(4, "a deny policy matches", Decision.DENY,
         ErrorCode.POLICY_DENIED, lambda f: f.first_policy(Effect.DENY)),
    Rule(5, "an approval policy matches", Decision.REQUIRE_APPROVAL,
         ErrorCode.APPROVAL_REQUIRED, lambda f: f.first_policy(Effect.REQUIRE_APPROVAL)),
    Rule(6, "CRITICAL tools always need a person's approval", Decision.REQUIRE_APPROVAL,
         ErrorCode.APPROVAL_REQUIRED, lambda f: f.request.tool.risk is Risk.CRITICAL),
    Rule(7, "allowed", Decision.ALLOW, None, lambda f: True),
)  # fmt: skip

#: The rules that decide whether the agent may see a tool at all (``tools/list``).
GRANT_RULES = RULES[:3]


def evaluate(request: Request) -> Verdict:
    """Walk :data:`RULES` in order; the first rule that fires decides."""
    facts = _facts(request)
    for rule in RULES:
        fired = rule.fires(facts)
        if fired:
            return Verdict(
                decision=rule.decision,
                rule=rule.number,
                reason=rule.reason,
                code=rule.code,
                policy=fired if isinstance(fired, Policy) else None,
                grants=facts.usable_grants,
            )
    raise AssertionError("the last rule always fires")


def visible(request: Request) -> bool:
    """Whether the agent may see the tool: none of rules 1 to 3 fires."""
    facts = _facts(request)
    return not any(rule.fires(facts) for rule in GRANT_RULES)
