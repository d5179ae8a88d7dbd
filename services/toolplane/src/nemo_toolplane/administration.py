"""What operators read and change of the agents' rules: the agents with their tokens, grants and
OAuth clients; grants created and removed by a named operator; the policies as the tool plane
applies them, with the rows that can never match (:mod:`.policy_check`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg

from nemo_core.db import Connection, Pool
from nemo_toolplane.policy_check import Finding, find_dead_rules
from nemo_toolplane.registry import Registry
from nemo_toolplane.router import tool_facts
from nemo_toolplane.tokens import LISTED_COLUMNS, StoredToken


@dataclass(frozen=True)
class StoredGrant:
    grant_id: int
    agent_id: str
    tool_pattern: str
    resource_scope: str
    environment_scope: str
    permission: str
    created_by: str | None


@dataclass(frozen=True)
class StoredAgent:
    agent_id: str
    name: str
    status: str
    description: str
    tokens: tuple[StoredToken, ...]
    grants: tuple[StoredGrant, ...]
    oauth_client_ids: tuple[str, ...]


class UnknownGrant(Exception):
    """No grant has that id."""


class InvalidGrant(Exception):
    """The grant could never match; the message says why (the database's own check)."""


class UnknownAgentForGrant(Exception):
    """No agent has that id."""


_GRANT_COLUMNS = (
    "id AS grant_id, agent_id, tool_pattern, resource_scope, environment_scope, permission, "
    "created_by"
)


async def list_agents(pool: Pool) -> list[StoredAgent]:
    """Every agent, by id, with its tokens (newest first), grants and OAuth clients."""
    async with pool.acquire() as conn:
        agents = await conn.fetch(
            "SELECT id, name, status, description FROM toolplane.agents ORDER BY id"
        )
        tokens = await conn.fetch(
            f"SELECT {LISTED_COLUMNS} FROM toolplane.agent_tokens ORDER BY created_at DESC, id"
        )
        grants = await conn.fetch(f"SELECT {_GRANT_COLUMNS} FROM toolplane.grants ORDER BY id")
        clients = await conn.fetch(
            "SELECT agent_id, client_id FROM toolplane.oauth_clients ORDER BY client_id"
        )

    def of(rows: list[asyncpg.Record], agent_id: str) -> list[dict[str, Any]]:
        return [dict(row) for row in rows if row["agent_id"] == agent_id]

    return [
        StoredAgent(
            agent_id=agent["id"],
            name=agent["name"],
            status=agent["status"],
            description=agent["description"],
            tokens=tuple(StoredToken(**row) for row in of(tokens, agent["id"])),
            grants=tuple(StoredGrant(**row) for row in of(grants, agent["id"])),
            oauth_client_ids=tuple(row["client_id"] for row in of(clients, agent["id"])),
        )
        for agent in agents
    ]


async def create_grant(
    pool: Pool,
    *,
    agent_id: str,
    tool_pattern: str,
    resource_scope: str,
    environment_scope: str,
    permission: str,
    created_by: str,
) -> StoredGrant:
    """Store a grant made by ``created_by``; :class:`InvalidGrant` when the database refuses it
    as one that could never match, :class:`UnknownAgentForGrant` for an unknown agent."""
    try:
        row = await pool.fetchrow(
            "INSERT INTO toolplane.grants (agent_id, tool_pattern, resource_scope, "
            "environment_scope, permission, created_by) VALUES ($1, $2, $3, $4, $5, $6) "
            f"RETURNING {_GRANT_COLUMNS}",
            agent_id,
            tool_pattern,
            resource_scope,
            environment_scope,
            permission,
            created_by,
        )
    except asyncpg.ForeignKeyViolationError:
        raise UnknownAgentForGrant(f"no agent {agent_id!r}") from None
    except asyncpg.UniqueViolationError:
        raise InvalidGrant("the agent holds this grant already") from None
    except asyncpg.CheckViolationError as refused:
        raise InvalidGrant(
            refused.args[0] if refused.args else "the grant can never match"
        ) from None
    assert row is not None  # noqa: S101  INSERT ... RETURNING returns its row
    return StoredGrant(**dict(row))


async def delete_grant(pool: Pool, grant_id: int) -> None:
    """Remove a grant; :class:`UnknownGrant` when there is none."""
    deleted = await pool.fetchval(
        "DELETE FROM toolplane.grants WHERE id = $1 RETURNING id", grant_id
    )
    if deleted is None:
        raise UnknownGrant(f"no grant {grant_id}")


_POLICY_COLUMNS = (
    "name, description, effect, agent_scope, tool_scope, resource_scope, environment_scope, "
    "coalesce(conditions, '') AS conditions, priority, enabled, version, approvers"
)


async def list_policies(pool: Pool) -> list[dict[str, Any]]:
    """Every policy in the order the policy engine applies them."""
    rows = await pool.fetch(
        f"SELECT {_POLICY_COLUMNS} FROM toolplane.policies ORDER BY priority, name"
    )
    return [dict(row) for row in rows]


async def dead_rules(conn: Connection | Pool, registry: Registry) -> tuple[int, int, list[Finding]]:
    """The stored grants and enabled policies that can never match (``nemo policies check``):
    how many grants and policies were read, and the findings."""
    grants = await conn.fetch(
        "SELECT id, agent_id, tool_pattern, resource_scope, environment_scope, permission "
        "FROM toolplane.grants ORDER BY id"
    )
    policies = await conn.fetch(
        "SELECT name, effect, agent_scope, tool_scope, resource_scope, environment_scope, "
        "conditions, enabled FROM toolplane.policies ORDER BY priority, name"
    )
    agents = [row["id"] for row in await conn.fetch("SELECT id FROM toolplane.agents")]
    tools = [tool_facts(tool, registry) for tool in registry.versions()]
    findings = find_dead_rules(
        [dict(row) for row in grants], [dict(row) for row in policies], agents, tools
    )
    return len(grants), len(policies), findings
