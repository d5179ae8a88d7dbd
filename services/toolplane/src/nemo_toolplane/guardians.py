"""A person's own view of what agents did with the learners linked to them, and of what they
authorised: the learners come from the context service, which alone reads family, guardian and
mentor relations; a learner is named by its pseudonym only, and resolved to an id only for a
person linked to it in person (staff, who reach every learner, are linked to none).

What a person authorised is what acts for them: agent tokens an operator bound to their account,
and the hosts (OAuth clients) that called with an access token naming them. They may revoke
either; a host revoked is refused for them from then on (:mod:`nemo_toolplane.rules.store`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from nemo_core.db import Pool
from nemo_protos.context.v1 import context_service_pb2 as context_pb
from nemo_toolplane.context_client import ContextClient
from nemo_toolplane.envelope import ErrorCode, ToolError
from nemo_toolplane.tokens import LISTED_COLUMNS, StoredToken

#: A learner pseudonym as the context service writes it (24 hex digits; 12 before).
LEARNER_REF: Final = re.compile(r"nemo_[0-9a-f]{12}(?:[0-9a-f]{12})?")


class InvalidLearnerRef(Exception):
    """Not a learner pseudonym."""


class NotLinked(Exception):
    """The person is not linked in person to the learner (or no learner has the ref)."""


class AuthorizationNotFound(Exception):
    """The person authorised no such token or host."""


def learner_resource(learner_id: str) -> str:
    """How audit rows and approvals name what a call was about."""
    return f"learner:{learner_id}"


async def linked_learner_id(context: ContextClient, user_id: str, learner_ref: str) -> str:
    """The id behind ``learner_ref`` when ``user_id`` is linked to that learner in person;
    :class:`InvalidLearnerRef`, :class:`NotLinked` otherwise (``ToolError`` DEPENDENCY_ERROR
    when the context service cannot say)."""
    resolved = await _resolve(context, user_id, learner_ref, "the learner is not one linked to you")
    # Staff reach every learner without being linked to any: theirs is the operators' view.
    if resolved.relation == context_pb.LEARNER_RELATION_UNSPECIFIED:
        raise NotLinked("the learner is not one linked to you")
    return resolved.learner_id


async def reachable_learner_id(context: ContextClient, user_id: str, learner_ref: str) -> str:
    """The id behind ``learner_ref`` for an operator's search: any learner the person may reach
    (staff reach every one); :class:`InvalidLearnerRef`, :class:`NotLinked` otherwise."""
    resolved = await _resolve(
        context, user_id, learner_ref, "no learner you may reach has this pseudonym"
    )
    return resolved.learner_id


async def _resolve(
    context: ContextClient, user_id: str, learner_ref: str, refusal: str
) -> context_pb.ResolveLearnerRefResponse:
    if not LEARNER_REF.fullmatch(learner_ref):
        raise InvalidLearnerRef("learner_ref must be a learner pseudonym (nemo_ and hex digits)")
    try:
        return await context.resolve_learner_ref(learner_ref, user_id)
    except ToolError as refused:
        if refused.code is ErrorCode.AUTHORIZATION_ERROR:
            raise NotLinked(refusal) from None
        raise


_RELATIONS: Final = {
    context_pb.LEARNER_RELATION_SELF: "self",
    context_pb.LEARNER_RELATION_FAMILY_MEMBER: "family_member",
    context_pb.LEARNER_RELATION_GUARDIAN: "guardian",
    context_pb.LEARNER_RELATION_MENTOR: "mentor",
}


def relation_name(relation: context_pb.LearnerRelation.ValueType) -> str:
    return _RELATIONS.get(relation, "")


@dataclass(frozen=True)
class Host:
    client_id: str
    agent_id: str
    last_used_at: datetime
    revoked_at: datetime | None


async def authorizations(pool: Pool, user_id: str) -> tuple[list[StoredToken], list[Host]]:
    """The agent tokens bound to ``user_id`` (newest first) and the hosts that acted for them
    (most recent first)."""
    async with pool.acquire() as conn:
        tokens = await conn.fetch(
            f"SELECT {LISTED_COLUMNS} FROM toolplane.agent_tokens WHERE user_id = $1 "  # noqa: S608  a module constant
            "ORDER BY created_at DESC, id",
            user_id,
        )
        hosts = await conn.fetch(
            """
            SELECT used.client_id, used.agent_id, used.last_used_at, r.revoked_at
            FROM (
                SELECT client_id, (array_agg(agent_id ORDER BY id DESC))[1] AS agent_id,
                       max("timestamp") AS last_used_at
                FROM toolplane.audit_logs
                -- A client no registered agent answers for was refused: it never acted.
                WHERE subject = $1 AND client_id IS NOT NULL AND agent_id IS NOT NULL
                GROUP BY client_id
            ) AS used
            LEFT JOIN toolplane.host_revocations AS r
              ON r.user_id = $1 AND r.client_id = used.client_id
            ORDER BY used.last_used_at DESC
            """,
            user_id,
        )
    return [StoredToken(**dict(row)) for row in tokens], [Host(**dict(row)) for row in hosts]


async def revoke_bound_token(pool: Pool, user_id: str, token_id: str) -> datetime:
    """Revoke an agent token bound to ``user_id``, by them; the first revocation stands."""
    revoked_at: datetime | None = await pool.fetchval(
        "UPDATE toolplane.agent_tokens SET revoked_at = coalesce(revoked_at, now()), "
        "revoked_by = CASE WHEN revoked_at IS NULL THEN $2 ELSE revoked_by END "
        "WHERE id = $1 AND user_id = $2 RETURNING revoked_at",
        token_id,
        user_id,
    )
    if revoked_at is None:
        raise AuthorizationNotFound("no agent token with this id is bound to you")
    return revoked_at


async def revoke_host(pool: Pool, user_id: str, client_id: str) -> datetime:
    """Refuse ``client_id``'s access tokens for ``user_id`` from now on; only a host that acted
    for them can be revoked. The first revocation stands."""
    async with pool.acquire() as conn, conn.transaction():
        acted = await conn.fetchval(
            "SELECT EXISTS (SELECT FROM toolplane.audit_logs "
            "WHERE subject = $1 AND client_id = $2)",
            user_id,
            client_id,
        )
        if not acted:
            raise AuthorizationNotFound("no host with this client id acted for you")
        await conn.execute(
            "INSERT INTO toolplane.host_revocations (user_id, client_id, revoked_by) "
            "VALUES ($1, $2, $1) ON CONFLICT (user_id, client_id) DO NOTHING",
            user_id,
            client_id,
        )
        revoked_at: datetime = await conn.fetchval(
            "SELECT revoked_at FROM toolplane.host_revocations "
            "WHERE user_id = $1 AND client_id = $2",
            user_id,
            client_id,
        )
    return revoked_at
