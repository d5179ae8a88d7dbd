"""Stored grants and policies that can never take effect, found before they surprise anyone.

A broken deny policy denies nothing (broken conditions never match), and a grant for an
environment that does not exist grants nothing; both look fine in a table. :func:`find_dead_rules`
reads the rows as the policy engine would and names each one that can never match: unreadable
conditions, unknown environments, modes, effects or resource scopes (a policy's resource scope is
matched against ``learner:<id>``, so a ``family:`` or ``user`` entry there never matches), a tool
pattern no registered tool has, an agent scope no agent has, conditions no tool in scope meets.
Writing such a row is refused by the database (migrations 0017 and 0022); this finds the ones
written around that.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from nemo_toolplane.patterns import matches_pattern
from nemo_toolplane.policy import (
    BrokenConditions,
    Grant,
    ToolFacts,
    grant_covers_tool,
    parse_conditions,
)
from nemo_toolplane.tool_kinds import Mode

#: Every environment the tool plane can run in (``NEMO_TOOLPLANE_ENVIRONMENT``).
ENVIRONMENTS: Final = ("development", "staging", "production")
_EFFECTS: Final = frozenset({"deny", "require_approval"})
_RESOURCE_SCOPE: Final = re.compile(
    r"\s*(\*|user|(learner|family):[^,\s]+(\s*,\s*(learner|family):[^,\s]+)*)\s*"
)
# What a call is about is "learner:<id>" or nothing: a policy names learners (globs allowed) or
# "*", as the database's check (0025) says.
_POLICY_RESOURCE_ITEM: Final = re.compile(r"\*|learner:[\x21-\x7e]+")


@dataclass(frozen=True)
class Finding:
    """One row that can never match, and why."""

    row: str
    problem: str

    def __str__(self) -> str:
        return f"{self.row}: {self.problem}"


def _environment_problem(scope: str) -> str | None:
    if not any(matches_pattern(scope, environment) for environment in ENVIRONMENTS):
        return f"environment scope {scope!r} covers none of {', '.join(ENVIRONMENTS)}"
    return None


def _grant_problems(row: Mapping[str, Any], tools: Sequence[ToolFacts]) -> list[str]:
    problems = []
    if row["permission"] not in {mode.value for mode in Mode}:
        problems.append(f"unknown mode {row['permission']!r} (expected read, write)")
    if not _RESOURCE_SCOPE.fullmatch(row["resource_scope"]):
        problems.append(f"unknown resource scope {row['resource_scope']!r}")
    if (environment := _environment_problem(row["environment_scope"])) is not None:
        problems.append(environment)
    grant = Grant(row["tool_pattern"], row["resource_scope"], row["environment_scope"], Mode.READ)
    if not any(grant_covers_tool(grant, tool) for tool in tools):
        problems.append(f"tool pattern {row['tool_pattern']!r} covers no registered tool")
    return problems


def _policy_problems(
    row: Mapping[str, Any], agents: Collection[str], tools: Sequence[ToolFacts]
) -> list[str]:
    problems = []
    if row["effect"] not in _EFFECTS:
        problems.append(f"unknown effect {row['effect']!r} (expected deny, require_approval)")
    if (environment := _environment_problem(row["environment_scope"])) is not None:
        problems.append(environment)
    unmatchable = [
        item.strip(" ")
        for item in row["resource_scope"].split(",")
        # Trimmed as the database's check trims (btrim: spaces only).
        if not _POLICY_RESOURCE_ITEM.fullmatch(item.strip(" "))
    ]
    if unmatchable:
        problems.append(
            f'resource scope {unmatchable[0]!r} can never match (a policy names "*" or '
            "learner:<id> entries; family and user scopes belong to grants)"
        )
    if not any(matches_pattern(row["agent_scope"], agent) for agent in agents):
        problems.append(f"agent scope {row['agent_scope']!r} covers no agent")
    in_scope = [
        tool
        for tool in tools
        if matches_pattern(row["tool_scope"], tool.name)
        or matches_pattern(row["tool_scope"], tool.tool_id)
    ]
    if not in_scope:
        problems.append(f"tool scope {row['tool_scope']!r} covers no registered tool")
    try:
        conditions = parse_conditions(row["conditions"])
    except BrokenConditions as broken:
        problems.append(f"broken conditions ({broken}): the policy never matches")
    else:
        if in_scope and not any(conditions.hold_for(tool) for tool in in_scope):
            problems.append("its conditions hold for no tool in its tool scope")
    return problems


def find_dead_rules(
    grants: Sequence[Mapping[str, Any]],
    policies: Sequence[Mapping[str, Any]],
    agents: Collection[str],
    tools: Sequence[ToolFacts],
) -> list[Finding]:
    """Every stored grant and enabled policy that can never match, in a stable order."""
    findings = []
    for row in grants:
        for problem in _grant_problems(row, tools):
            findings.append(
                Finding(f"grant {row['id']} ({row['agent_id']}, {row['tool_pattern']})", problem)
            )
    for row in policies:
        if row["enabled"]:
            for problem in _policy_problems(row, agents, tools):
                findings.append(Finding(f"policy {row['name']}", problem))
    return findings
