"""CheckLearnerAccess: may a user (through an agent's grant) reach a learner?

Knowing a learner id is not permission. A grant's resource scope decides:

| scope | reaches |
| --- | --- |
| ``*`` | every learner (internal aggregate and research agents) |
| ``user`` | learners the user the agent acts for may reach (:data:`USER_SCOPE_CHAIN`, in order) |
| ``learner:L-2041-1,learner:L-2041-2`` | the listed learners |
| ``family:F-2041-1`` | every learner of the listed families |

``learner:`` and ``family:`` entries may be mixed in one comma-separated list. A mentor reaches only
learners with an *active* assignment: agents acting for mentors are a new surface, opened narrowly.

A learner that does not exist gets exactly the answer of a learner the user may not reach, so the
check cannot be used to probe which ids exist. This is the only place that reads family, guardian
and mentor relations; it runs in a transaction bound to the one learner asked about.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import grpc

from nemo.context.v1 import context_service_pb2 as pb
from nemo_context.ids import check_learner_id, is_key
from nemo_core.db import Pool, learner_transaction
from nemo_core.errors import ServiceError

INVALID_RESOURCE_SCOPE: Final = "INVALID_RESOURCE_SCOPE"


@dataclass(frozen=True)
class LearnerFacts:
    """How one user relates to one existing learner."""

    family_id: str
    is_self: bool
    is_family_member: bool
    is_guardian: bool
    is_staff: bool
    is_active_mentor: bool


#: The ``user`` scope, in order: the first relation that holds is the basis of access.
USER_SCOPE_CHAIN: Final = (
    ("is_self", pb.ACCESS_BASIS_SELF),
    ("is_family_member", pb.ACCESS_BASIS_FAMILY_MEMBER),
    ("is_guardian", pb.ACCESS_BASIS_GUARDIAN),
    ("is_staff", pb.ACCESS_BASIS_STAFF),
    ("is_active_mentor", pb.ACCESS_BASIS_MENTOR),
)


@dataclass(frozen=True)
class ResourceScope:
    """A parsed resource scope."""

    everything: bool = False
    user: bool = False
    learner_ids: frozenset[str] = frozenset()
    family_ids: frozenset[str] = frozenset()


def _scope_error(message: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.INVALID_ARGUMENT, INVALID_RESOURCE_SCOPE, message)


def parse_scope(text: str) -> ResourceScope:
    """Parse ``*``, ``user`` or a list of ``learner:<id>`` / ``family:<id>`` entries."""
    scope = text.strip()
    if scope == "*":
        return ResourceScope(everything=True)
    if scope == "user":
        return ResourceScope(user=True)
    learners: set[str] = set()
    families: set[str] = set()
    for entry in scope.split(","):
        kind, separator, key = entry.strip().partition(":")
        key = key.strip()
        if not separator or not key or any(char.isspace() for char in key):
            raise _scope_error(
                'resource_scope must be "*", "user", or comma-separated "learner:<id>" and '
                '"family:<id>" entries'
            )
        if kind == "learner":
            learners.add(key)
        elif kind == "family":
            families.add(key)
        else:
            raise _scope_error(f'unknown resource scope kind "{kind}"; expected learner or family')
    return ResourceScope(learner_ids=frozenset(learners), family_ids=frozenset(families))


def decide(
    scope: ResourceScope, learner_id: str, facts: LearnerFacts | None
) -> pb.CheckLearnerAccessResponse:
    """The access decision; pure, so every rule is testable without a database."""
    if facts is None:
        return pb.CheckLearnerAccessResponse(allowed=False)
    basis = pb.ACCESS_BASIS_UNSPECIFIED
    if scope.everything:
        basis = pb.ACCESS_BASIS_SCOPE_ALL
    elif scope.user:
        basis = next(
            (basis for fact, basis in USER_SCOPE_CHAIN if getattr(facts, fact)),
            pb.ACCESS_BASIS_UNSPECIFIED,
        )
    elif learner_id in scope.learner_ids:
        basis = pb.ACCESS_BASIS_SCOPE_LEARNER_LIST
    elif facts.family_id in scope.family_ids:
        basis = pb.ACCESS_BASIS_SCOPE_FAMILY
    return pb.CheckLearnerAccessResponse(allowed=basis != pb.ACCESS_BASIS_UNSPECIFIED, basis=basis)


# One statement for every relation; an empty user id matches no user, no member and no mentor.
_FACTS_QUERY = """
SELECT
    l.family_id,
    coalesce(l.user_id = $2, false) AS is_self,
    EXISTS (
        SELECT FROM learning.family_members AS m
        WHERE m.family_id = l.family_id AND m.user_id = $2
          AND m.relation IN ('owner', 'guardian', 'supporter')
    ) AS is_family_member,
    EXISTS (
        SELECT FROM learning.guardians AS g WHERE g.learner_id = l.id AND g.user_id = $2
    ) AS is_guardian,
    EXISTS (
        SELECT FROM learning.users AS u WHERE u.id = $2 AND u.role IN ('admin', 'staff')
    ) AS is_staff,
    EXISTS (
        SELECT FROM learning.mentor_assignments AS a
        WHERE a.learner_id = l.id AND a.mentor_user_id = $2 AND a.status = 'active'
    ) AS is_active_mentor
FROM learning.learners AS l
WHERE l.id = $1
"""


async def load_facts(pool: Pool, learner_id: str, user_id: str) -> LearnerFacts | None:
    """The relations between ``user_id`` and ``learner_id``, read bound to that learner only."""
    async with learner_transaction(pool, [learner_id], readonly=True) as conn:
        row = await conn.fetchrow(_FACTS_QUERY, learner_id, user_id or None)
    if row is None:
        return None
    return LearnerFacts(**dict(row))


async def check_learner_access(
    pool: Pool, request: pb.CheckLearnerAccessRequest
) -> pb.CheckLearnerAccessResponse:
    """Validate the request, read the facts, decide."""
    learner_id = request.learner_id
    check_learner_id(learner_id)
    scope = parse_scope(request.resource_scope)
    # A user id no user key can be (an agent may send any header) is no user: it relates to no
    # learner, so it gets the answer of any user who may not reach this one.
    user_id = request.user_id if is_key(request.user_id) else ""
    if scope.user and not user_id:
        # No user to act for reaches no learner, whoever the learner is.
        return pb.CheckLearnerAccessResponse(allowed=False)
    facts = await load_facts(pool, learner_id, user_id)
    return decide(scope, learner_id, facts)
