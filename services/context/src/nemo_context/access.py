"""May a user, through an agent's grants, reach a learner? Decided here, for agent views in the
same transaction that reads the view (``BuildContext``), and for other calls by
``CheckLearnerAccess``.

Knowing a learner id is not permission. A grant's resource scope decides:

| scope | reaches |
| --- | --- |
| ``*`` | every learner (internal aggregate and research agents) |
| ``user`` | learners the user the agent acts for may reach (:data:`USER_SCOPE_CHAIN`, in order) |
| ``learner:L-2041-1,learner:L-2041-2`` | the listed learners |
| ``family:F-2041-1`` | every learner of the listed families |

``learner:`` and ``family:`` entries may be mixed in one comma-separated list. A mentor reaches only
learners with an *active* assignment: agents acting for mentors are a new surface, opened narrowly.

The ``user`` scope counts only a user the agent cannot choose: one its token is bound to, or one
an internal caller trusted to vouch for users named (:data:`VOUCHED_SOURCES`). A user id the agent
sent itself (a header, a request field) is kept for attribution and reaches nobody, whatever that
user could reach: otherwise any unbound token plus a staff member's id would read every learner.

A learner that does not exist gets exactly the answer of a learner the user may not reach (same
refusal, same rule, the same statements run), so no answer can be used to probe which ids exist.
This is the only place that reads family, guardian and mentor relations; it runs in a transaction
bound to the one learner asked about.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, TypeAlias

import grpc

from nemo_context.errors import service_error
from nemo_context.ids import check_learner_id
from nemo_core.db import Connection, Pool, learner_transaction
from nemo_core.errors import ServiceError
from nemo_core.identifiers import is_key
from nemo_protos.context.v1 import context_service_pb2 as pb
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason
from nemo_protos.type.v1 import user_source_pb2

UserSource: TypeAlias = user_source_pb2.UserSource.ValueType

#: Sources of a user that count for the ``user`` scope: the agent cannot choose these.
VOUCHED_SOURCES: Final = frozenset(
    {user_source_pb2.USER_SOURCE_TOKEN, user_source_pb2.USER_SOURCE_CALLER}
)


class RefusalRule(StrEnum):
    """Why access was refused, as the caller's audit log records it. None of them tells a learner
    that does not exist from one out of reach."""

    NO_USER = "no_user"
    """``user`` scope, and the agent acts for nobody."""
    USER_NOT_VOUCHED = "user_not_vouched"
    """``user`` scope, and the user came from the agent, not from its token or a trusted caller."""
    NO_RELATION = "no_relation"
    """``user`` scope, and no relation of the user reaches the learner (or there is no learner)."""
    NOT_IN_SCOPE = "not_in_scope"
    """A fixed scope (``*``, learners, families) does not reach the learner (or there is none)."""


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


@dataclass(frozen=True)
class Reach:
    """Who asks: the user the agent acts for, where that user came from, and the scopes of the
    grants covering the call (the learner must be within one)."""

    user_id: str
    user_source: UserSource
    scopes: tuple[ResourceScope, ...]

    @property
    def vouched_user(self) -> str:
        """The user the ``user`` scope may count; "" when there is none that counts."""
        return self.user_id if self.user_source in VOUCHED_SOURCES else ""


@dataclass(frozen=True)
class Decision:
    """Whether access holds, on which basis, or which rules refused it."""

    basis: pb.AccessBasis.ValueType
    refusal: str = ""

    @property
    def allowed(self) -> bool:
        return self.basis != pb.ACCESS_BASIS_UNSPECIFIED


def _scope_error(message: str) -> ServiceError:
    return service_error(
        grpc.StatusCode.INVALID_ARGUMENT, ErrorReason.INVALID_RESOURCE_SCOPE, message
    )


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


def reach_of(user_id: str, user_source: UserSource, scopes: Iterable[str]) -> Reach:
    """The parsed reach of a request; at least one scope, each well-formed.

    A user id no user key can be (an agent may send anything) is no user: it relates to no
    learner, so it gets the answer of any user who may not reach this one.
    """
    parsed = tuple(parse_scope(scope) for scope in scopes)
    if not parsed:
        raise _scope_error("name at least one resource scope")
    return Reach(user_id if is_key(user_id) else "", user_source, parsed)


def _decide_one(
    scope: ResourceScope, learner_id: str, facts: LearnerFacts | None, user_id: str
) -> tuple[pb.AccessBasis.ValueType, RefusalRule | None]:
    if scope.user:
        if not user_id:
            return pb.ACCESS_BASIS_UNSPECIFIED, RefusalRule.NO_USER
        basis = next(
            (basis for fact, basis in USER_SCOPE_CHAIN if facts and getattr(facts, fact)),
            pb.ACCESS_BASIS_UNSPECIFIED,
        )
        return basis, None if basis else RefusalRule.NO_RELATION
    if facts is not None:
        if scope.everything:
            return pb.ACCESS_BASIS_SCOPE_ALL, None
        if learner_id in scope.learner_ids:
            return pb.ACCESS_BASIS_SCOPE_LEARNER_LIST, None
        if facts.family_id in scope.family_ids:
            return pb.ACCESS_BASIS_SCOPE_FAMILY, None
    return pb.ACCESS_BASIS_UNSPECIFIED, RefusalRule.NOT_IN_SCOPE


def decide(reach: Reach, learner_id: str, facts: LearnerFacts | None) -> Decision:
    """The access decision; pure, so every rule is testable without a database. The first scope
    that reaches the learner decides; when none does, every scope's refusal is named."""
    refusals: list[str] = []
    for scope in reach.scopes:
        if scope.user and reach.user_id and not reach.vouched_user:
            refusals.append(RefusalRule.USER_NOT_VOUCHED)
            continue
        basis, refusal = _decide_one(scope, learner_id, facts, reach.vouched_user)
        if refusal is None:
            return Decision(basis)
        refusals.append(refusal)
    return Decision(pb.ACCESS_BASIS_UNSPECIFIED, ",".join(dict.fromkeys(refusals)))


def out_of_reach(decision: Decision) -> ServiceError:
    """The one refusal of an agent view, whether or not the learner exists."""
    return service_error(
        grpc.StatusCode.PERMISSION_DENIED,
        ErrorReason.LEARNER_OUT_OF_REACH,
        "the learner is not within the agent's reach",
        {"rule": decision.refusal},
    )


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


def _needs_facts(reach: Reach) -> bool:
    """Whether any scope could reach a learner: a ``user`` scope without a user that counts
    cannot, whoever the learner is, so it reads nothing."""
    return any(not scope.user or reach.vouched_user for scope in reach.scopes)


async def authorize(conn: Connection, learner_id: str, reach: Reach) -> Decision:
    """Decide within ``conn``'s transaction, which must be bound to ``learner_id``."""
    facts = None
    if _needs_facts(reach):
        row = await conn.fetchrow(_FACTS_QUERY, learner_id, reach.vouched_user or None)
        facts = LearnerFacts(**dict(row)) if row is not None else None
    return decide(reach, learner_id, facts)


async def check_learner_access(
    pool: Pool, request: pb.CheckLearnerAccessRequest
) -> pb.CheckLearnerAccessResponse:
    """CheckLearnerAccess: validate the request, read the facts, decide."""
    learner_id = request.learner_id
    check_learner_id(learner_id)
    reach = reach_of(request.user_id, request.user_source, [request.resource_scope])
    if _needs_facts(reach):
        async with learner_transaction(pool, [learner_id], readonly=True) as conn:
            decision = await authorize(conn, learner_id, reach)
    else:
        decision = decide(reach, learner_id, None)
    return pb.CheckLearnerAccessResponse(
        allowed=decision.allowed, basis=decision.basis, refusal_rule=decision.refusal
    )


async def check_user(pool: Pool, request: pb.CheckUserRequest) -> pb.CheckUserResponse:
    """CheckUser: whether the id names a user (only its key is read; users are not learner-keyed,
    so no learner needs binding)."""
    if not is_key(request.user_id):
        return pb.CheckUserResponse(exists=False)
    async with pool.acquire() as conn:
        exists = await conn.fetchval(
            "SELECT EXISTS (SELECT FROM learning.users WHERE id = $1)", request.user_id
        )
    return pb.CheckUserResponse(exists=bool(exists))


def agent_reach(access: pb.AgentAccess, *, present: bool) -> Reach:
    """The reach an agent view is built under; INVALID_ARGUMENT / ``AGENT_ACCESS_REQUIRED`` when
    the request carries none (an agent view is never built on the caller's word alone)."""
    if not present or not access.resource_scopes:
        raise service_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            ErrorReason.AGENT_ACCESS_REQUIRED,
            "an agent view needs agent_access: the user the agent acts for, its source and the "
            "grants' resource scopes",
        )
    return reach_of(access.user_id, access.user_source, access.resource_scopes)
