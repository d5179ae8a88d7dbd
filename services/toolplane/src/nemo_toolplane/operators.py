"""Operators: the people who decide approvals, each with credentials of their own.

An approval is only as accountable as the identity behind it, so an operator is not a name typed
next to a shared credential: it is a row with its own tokens, issued once, stored only as SHA-256
and revoked like agent tokens. An operator may be linked to their platform account (``user_id``),
and nobody approves a call made on their own behalf.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from nemo_core.db import Connection, Pool
from nemo_core.people import canonical_id, same_person
from nemo_toolplane.tokens import MAX_TOKEN_LENGTH, TokenError, hash_token, revoke_in

OPERATOR_TOKEN_PREFIX = "nemo_ot_"  # noqa: S105  the public prefix, not a token


class UnknownOperator(TokenError):
    """No active operator has that id."""


@dataclass(frozen=True)
class Operator:
    """An authenticated operator: who, their platform account, and the credential used."""

    operator_id: str
    user_id: str | None
    #: The credential that proved them: an operator token's id, or ``oauth:<jti>`` for a
    #: person's access token.
    token_id: str

    @property
    def identities(self) -> frozenset[str]:
        """The canonical ids (:func:`nemo_core.people.canonical_id`) a call made on this
        operator's own behalf would carry as its user, or an approval as its token's issuer."""
        return frozenset(
            canonical
            for value in (self.operator_id, self.user_id)
            if (canonical := canonical_id(value))
        )

    def is_any_of(self, ids: Iterable[str | None]) -> bool:
        """Whether any of ``ids`` names this operator or their platform account, canonically."""
        return any(canonical_id(value) in self.identities for value in ids if value)


@dataclass(frozen=True)
class IssuedOperatorToken:
    """A freshly issued operator credential; ``token`` is shown once and never stored."""

    token_id: str
    token: str
    operator_id: str


_AUTHENTICATE = """
SELECT o.id AS operator_id, o.user_id, t.id AS token_id
FROM toolplane.operator_tokens t
JOIN toolplane.operators o ON o.id = t.operator_id
WHERE t.token_hash = $1 AND t.revoked_at IS NULL
  AND (t.expires_at IS NULL OR t.expires_at > now()) AND o.status = 'active'
"""


async def authenticate(source: Pool | Connection, token: str | None) -> Operator | None:
    """The operator a live credential belongs to; None for anything else."""
    if not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    row = await source.fetchrow(_AUTHENTICATE, hash_token(token))
    return Operator(**dict(row)) if row is not None else None


async def operator_of_user(
    source: Pool | Connection, user_id: str
) -> tuple[str, str | None] | None:
    """The active operator linked to the platform account ``user_id`` (compared canonically), as
    (operator id, their recorded account); the first by id when several are."""
    rows = await source.fetch(
        "SELECT id, user_id FROM toolplane.operators "
        "WHERE status = 'active' AND user_id IS NOT NULL ORDER BY id"
    )
    return next(
        ((row["id"], row["user_id"]) for row in rows if same_person(row["user_id"], user_id)), None
    )


async def add_operator(
    conn: Connection, operator_id: str, *, name: str = "", user_id: str | None = None
) -> None:
    """Register an operator (or update their name and account link)."""
    await conn.execute(
        "INSERT INTO toolplane.operators (id, name, user_id) VALUES ($1, $2, $3) "
        "ON CONFLICT (id) DO UPDATE SET name = excluded.name, user_id = excluded.user_id",
        operator_id,
        name,
        user_id,
    )


async def issue_operator_token(
    conn: Connection, operator_id: str, *, label: str = ""
) -> IssuedOperatorToken:
    """A new credential for an active operator; only its hash is stored."""
    status = await conn.fetchval(
        "SELECT status FROM toolplane.operators WHERE id = $1", operator_id
    )
    if status != "active":
        raise UnknownOperator(f"no active operator {operator_id!r}")
    token = OPERATOR_TOKEN_PREFIX + secrets.token_urlsafe(32)
    token_id = await conn.fetchval(
        "INSERT INTO toolplane.operator_tokens (operator_id, token_hash, label) "
        "VALUES ($1, $2, $3) RETURNING id",
        operator_id,
        hash_token(token),
        label,
    )
    return IssuedOperatorToken(token_id=token_id, token=token, operator_id=operator_id)


async def revoke_operator_token(conn: Connection, token_id: str) -> datetime:
    """Revoke a credential; revoking it again keeps the first revocation time."""
    revoked_at = await revoke_in(conn, "toolplane.operator_tokens", token_id)
    if revoked_at is None:
        raise UnknownOperator(f"no operator token {token_id!r}")
    return revoked_at
