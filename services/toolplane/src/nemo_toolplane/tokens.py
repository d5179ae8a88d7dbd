"""Agent tokens: issued once, stored only as SHA-256, optionally bound to a user.

A token is an identity ("I am learning-agent, acting for U-2041-P1"), never a permission: what the
agent may do comes from its grants and the policies.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from nemo_core.db import Connection

TOKEN_PREFIX = "nemo_at_"  # noqa: S105  the tokens' public prefix, not a token


class TokenError(Exception):
    """The token cannot be issued or revoked (unknown agent, unknown token)."""


class UnknownAgent(TokenError):
    """No agent has that id."""


class AgentNotActive(TokenError):
    """The agent exists but is disabled."""


class UnknownToken(TokenError):
    """No token has that id."""


@dataclass(frozen=True)
class IssuedToken:
    """A freshly issued token; ``token`` is shown once and never stored."""

    token_id: str
    token: str
    agent_id: str
    user_id: str | None


def hash_token(token: str) -> str:
    """The form in which a token is stored and looked up."""
    return hashlib.sha256(token.encode()).hexdigest()


async def issue_token(
    conn: Connection, agent_id: str, *, user_id: str | None = None, label: str = ""
) -> IssuedToken:
    """Create a token for an active agent and store its hash."""
    status = await conn.fetchval("SELECT status FROM toolplane.agents WHERE id = $1", agent_id)
    if status is None:
        raise UnknownAgent(f"no agent {agent_id!r}")
    if status != "active":
        raise AgentNotActive(f"agent {agent_id!r} is {status}, not active")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token_id = await conn.fetchval(
        "INSERT INTO toolplane.agent_tokens (agent_id, token_hash, user_id, label) "
        "VALUES ($1, $2, $3, $4) RETURNING id",
        agent_id,
        hash_token(token),
        user_id,
        label,
    )
    return IssuedToken(token_id=token_id, token=token, agent_id=agent_id, user_id=user_id)


async def revoke_token(conn: Connection, token_id: str) -> datetime:
    """Revoke a token; revoking it again keeps the first revocation time."""
    revoked_at: datetime | None = await conn.fetchval(
        "UPDATE toolplane.agent_tokens SET revoked_at = coalesce(revoked_at, now()) "
        "WHERE id = $1 RETURNING revoked_at",
        token_id,
    )
    if revoked_at is None:
        raise UnknownToken(f"no token {token_id!r}")
    return revoked_at


async def revoke_tokens_labelled(conn: Connection, label: str) -> int:
    """Revoke every live token carrying ``label``; returns how many."""
    result: str = await conn.execute(
        "UPDATE toolplane.agent_tokens SET revoked_at = now() "
        "WHERE label = $1 AND revoked_at IS NULL",
        label,
    )
    return int(result.split()[-1])
