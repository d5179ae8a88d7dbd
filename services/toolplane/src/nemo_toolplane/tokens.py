"""Agent tokens: issued once, stored only as SHA-256, optionally bound to a user.

A token is an identity ("I am learning-agent, acting for U-2041-P1"), never a permission: what the
agent may do comes from its grants and the policies. A user id an agent sends itself is only
recorded, so an unbound token reaches no learner through grants scoped to the user: issuing one
for an agent that holds such grants is refused unless asked for explicitly, since it is almost
always a token that was meant to be bound.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from nemo_core.db import Connection

TOKEN_PREFIX = "nemo_at_"  # noqa: S105  the tokens' public prefix, not a token
# Long enough for any token we issue, short enough that hashing a junk header costs nothing.
MAX_TOKEN_LENGTH = 256


class TokenError(Exception):
    """The token cannot be issued or revoked (unknown agent, unknown token)."""


class UnknownAgent(TokenError):
    """No agent has that id."""


class AgentNotActive(TokenError):
    """The agent exists but is disabled."""


class UnknownToken(TokenError):
    """No token has that id."""


class UserRequired(TokenError):
    """The agent holds grants scoped to the user it acts for, and no user was given."""


@dataclass(frozen=True)
class IssuedToken:
    """A freshly issued token; ``token`` is shown once and never stored."""

    token_id: str
    token: str
    agent_id: str
    user_id: str | None
    #: What the token can and cannot do, in a sentence for the operator who issued it.
    reach: str = ""


@dataclass(frozen=True)
class StoredToken:
    """An agent token as people see it listed: never its value."""

    token_id: str
    agent_id: str
    user_id: str | None
    label: str
    created_at: datetime
    revoked_at: datetime | None
    issued_by: str | None
    revoked_by: str | None


#: The columns of :class:`StoredToken`, in ``toolplane.agent_tokens``.
LISTED_COLUMNS = (
    "id AS token_id, agent_id, user_id, label, created_at, revoked_at, issued_by, revoked_by"
)


def hash_token(token: str) -> str:
    """The form in which a token is stored and looked up."""
    return hashlib.sha256(token.encode()).hexdigest()


async def issue_token(
    conn: Connection,
    agent_id: str,
    *,
    user_id: str | None = None,
    label: str = "",
    unbound: bool = False,
    issued_by: str | None = None,
) -> IssuedToken:
    """Create a token for an active agent and store its hash, with the operator who issued it
    (None only where no person is involved: the demo stacks' own tokens).

    Without ``user_id``, an agent holding grants scoped to the user gets a token only when
    ``unbound`` says so (:class:`UserRequired` otherwise).
    """
    status = await conn.fetchval("SELECT status FROM toolplane.agents WHERE id = $1", agent_id)
    if status is None:
        raise UnknownAgent(f"no agent {agent_id!r}")
    if status != "active":
        raise AgentNotActive(f"agent {agent_id!r} is {status}, not active")
    user_scoped: list[str] = await conn.fetchval(
        "SELECT coalesce(array_agg(tool_pattern ORDER BY tool_pattern), '{}') "
        "FROM toolplane.grants WHERE agent_id = $1 AND btrim(resource_scope) = 'user'",
        agent_id,
    )
    if user_id is None and user_scoped and not unbound:
        raise UserRequired(
            f"agent {agent_id!r} reads learners for the user it acts for "
            f"({', '.join(user_scoped)}); an unbound token reaches none of them, since a user id "
            "the agent sends is recorded, never trusted. Bind the token to a user, or ask for "
            "an unbound token explicitly"
        )
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token_id = await conn.fetchval(
        "INSERT INTO toolplane.agent_tokens (agent_id, token_hash, user_id, label, issued_by) "
        "VALUES ($1, $2, $3, $4, $5) RETURNING id",
        agent_id,
        hash_token(token),
        user_id,
        label,
        issued_by,
    )
    return IssuedToken(
        token_id=token_id,
        token=token,
        agent_id=agent_id,
        user_id=user_id,
        reach=describe_reach(user_id, user_scoped),
    )


def describe_reach(user_id: str | None, user_scoped: list[str]) -> str:
    """What a token can and cannot do, for the operator issuing it."""
    if user_id is not None:
        return (
            f"acts for {user_id} only (a user id the agent sends is ignored); reaches the "
            "learners that user may reach through grants scoped to the user"
        )
    if user_scoped:
        return (
            "bound to no user: grants scoped to the user reach no learner "
            f"({', '.join(user_scoped)}); a user id the agent sends is recorded, never trusted "
            "(unless an internal caller trusted to vouch for users sends it); grants with a "
            "fixed scope work as granted"
        )
    return "bound to no user: the agent's grants have fixed scopes and work as granted"


async def revoke_token(
    conn: Connection, token_id: str, *, revoked_by: str | None = None
) -> datetime:
    """Revoke a token, recording who did; revoking it again keeps the first revocation (its
    time and who made it)."""
    revoked_at: datetime | None = await conn.fetchval(
        "UPDATE toolplane.agent_tokens SET revoked_at = coalesce(revoked_at, now()), "
        "revoked_by = CASE WHEN revoked_at IS NULL THEN $2 ELSE revoked_by END "
        "WHERE id = $1 RETURNING revoked_at",
        token_id,
        revoked_by,
    )
    if revoked_at is None:
        raise UnknownToken(f"no token {token_id!r}")
    return revoked_at


async def revoke_in(conn: Connection, table: str, token_id: str) -> datetime | None:
    """Revoke a credential of ``table`` (agent or operator tokens), keeping the first revocation
    time; None when no credential has that id."""
    revoked_at: datetime | None = await conn.fetchval(
        f"UPDATE {table} SET revoked_at = coalesce(revoked_at, now()) "  # noqa: S608  a module constant
        "WHERE id = $1 RETURNING revoked_at",
        token_id,
    )
    return revoked_at


async def revoke_tokens_labelled(conn: Connection, label: str) -> int:
    """Revoke every live token carrying ``label``; returns how many."""
    result: str = await conn.execute(
        "UPDATE toolplane.agent_tokens SET revoked_at = now() "
        "WHERE label = $1 AND revoked_at IS NULL",
        label,
    )
    return int(result.split()[-1])
