"""Agent tokens, OAuth clients, grants and policies as stored in the ``toolplane`` schema.

Tokens are looked up by their SHA-256 only. One statement returns the token's agent with its
grants and the enabled policies; when the token matches nothing the statement returns no row
before touching any other table, so a missing or unknown token is refused without reading them.
An OAuth client is looked up the same way, by its id, to the agent it acts as and the people who
took their consent back from it (``toolplane.host_revocations``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg

from nemo_core.db import Pool
from nemo_core.people import canonical_id
from nemo_toolplane.policy import Effect, Grant, Policy, Verdict
from nemo_toolplane.principal import AgentIdentity, Credential, CredentialKind
from nemo_toolplane.tokens import MAX_TOKEN_LENGTH, hash_token
from nemo_toolplane.tool_kinds import Mode

# Only for the identity found: the agent's grants and every enabled policy, in a stable order.
_RULES = """
  (SELECT coalesce(json_agg(g ORDER BY g.id), '[]'::json) FROM (
     SELECT id, tool_pattern, resource_scope, environment_scope, permission
     FROM toolplane.grants WHERE agent_id = i.agent_id) g) AS grants,
  (SELECT coalesce(json_agg(p ORDER BY p.priority, p.name), '[]'::json) FROM (
     SELECT name, effect, agent_scope, tool_scope, resource_scope, environment_scope,
            conditions, priority, version
     FROM toolplane.policies WHERE enabled) p) AS policies
"""

# The live token (bound to a user or not) of an active agent, with its rules.
_LOAD = f"""
WITH identity AS (
    SELECT t.agent_id, t.id AS token_id, t.user_id, t.expires_at
    FROM toolplane.agent_tokens t
    JOIN toolplane.agents a ON a.id = t.agent_id
    WHERE t.token_hash = $1
      AND t.revoked_at IS NULL
      AND (t.expires_at IS NULL OR t.expires_at > now())
      AND a.status = 'active'
)
SELECT i.agent_id, i.token_id, i.user_id, i.expires_at, {_RULES}
FROM identity i
"""  # noqa: S608  composed of module constants

# The active agent an OAuth client acts as, with its rules.
_LOAD_CLIENT = f"""
WITH identity AS (
    SELECT c.agent_id
    FROM toolplane.oauth_clients c
    JOIN toolplane.agents a ON a.id = c.agent_id
    WHERE c.client_id = $1 AND a.status = 'active'
)
SELECT i.agent_id, {_RULES},
  (SELECT coalesce(array_agg(r.user_id), '{{}}') FROM toolplane.host_revocations r
   WHERE r.client_id = $1) AS revoked_users
FROM identity i
"""  # noqa: S608  composed of module constants
#: Longest client id looked up (the column's bound).
MAX_CLIENT_ID_LENGTH = 512

# Verdicts remembered per set of rules; the set is replaced whenever the rules change.
_MAX_REMEMBERED_VERDICTS = 4096


@dataclass(frozen=True)
class AgentRules:
    """An agent's grants and every enabled policy, in evaluation order."""

    grants: Sequence[Grant]
    policies: Sequence[Policy]
    #: Decisions already made under exactly these rules, keyed by (tool id, resource).
    verdicts: dict[tuple[str, str], Verdict] = field(default_factory=dict, compare=False)

    def remember(self, key: tuple[str, str], verdict: Verdict) -> None:
        if len(self.verdicts) >= _MAX_REMEMBERED_VERDICTS:
            self.verdicts.clear()
        self.verdicts[key] = verdict


@dataclass(frozen=True)
class AuthenticatedAgent:
    """What a valid token brings: who the agent is and the rules it acts under."""

    identity: AgentIdentity
    rules: AgentRules
    #: When the token stops being valid; None when it does not expire.
    expires_at: datetime | None = None


@dataclass(frozen=True)
class ClientAgent:
    """The agent an OAuth client acts as, and the rules it acts under."""

    agent_id: str
    rules: AgentRules
    #: The people (canonical ids) who revoked this client's access to them.
    revoked_users: frozenset[str] = frozenset()

    def revoked_by(self, user_id: str) -> bool:
        """Whether ``user_id`` took their consent back from this client."""
        return canonical_id(user_id) in self.revoked_users


def _rules(row: asyncpg.Record) -> AgentRules:
    grants = tuple(
        Grant(
            tool_pattern=g["tool_pattern"],
            resource_scope=g["resource_scope"],
            environment_scope=g["environment_scope"],
            permission=Mode(g["permission"]),
        )
        for g in row["grants"]
    )
    policies = tuple(
        Policy(
            name=p["name"],
            effect=Effect(p["effect"]),
            agent_scope=p["agent_scope"],
            tool_scope=p["tool_scope"],
            resource_scope=p["resource_scope"],
            environment_scope=p["environment_scope"],
            conditions=p["conditions"],
            version=p["version"],
        )
        for p in row["policies"]
    )
    return AgentRules(grants, policies)


class RulesStore:
    """Reads identities, grants and policies."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def load(self, token: str) -> AuthenticatedAgent | None:
        """The agent of a live token with its rules; None for anything else."""
        if not token or len(token) > MAX_TOKEN_LENGTH:
            return None
        row = await self._pool.fetchrow(_LOAD, hash_token(token))
        if row is None:
            return None
        identity = AgentIdentity(
            agent_id=row["agent_id"],
            credential=Credential(CredentialKind.AGENT_TOKEN, token_id=row["token_id"]),
            bound_user_id=row["user_id"],
        )
        return AuthenticatedAgent(identity, _rules(row), row["expires_at"])

    async def load_client(self, client_id: str) -> ClientAgent | None:
        """The active agent an OAuth client acts as, with its rules; None for an unknown client
        or a disabled agent."""
        if not client_id or len(client_id) > MAX_CLIENT_ID_LENGTH:
            return None
        row = await self._pool.fetchrow(_LOAD_CLIENT, client_id)
        if row is None:
            return None
        revoked = frozenset(canonical_id(user) for user in row["revoked_users"])
        return ClientAgent(row["agent_id"], _rules(row), revoked)
