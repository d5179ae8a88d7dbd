"""People at the context service: who a person is (their access token, verified here), and the
learners linked to them in person, named only by pseudonym.

A person is linked to a learner as the learner themself, a member of the learner's family, a
registered guardian or a mentor with an active assignment: the ``user`` scope's relations
(:data:`nemo_context.access.USER_SCOPE_CHAIN`) without staff, who reach every learner and are
linked to none. The console shows a person what AI did with the learners linked to them and no
others; staff resolve any learner's pseudonym for the operators' audit search.

The relations are read through ``learning.linked_learners`` (migration 0029), a definer function
that returns keys and relations for one user, since the learners a person is linked to are not
known before it runs; everything else about them is read bound to exactly those learners.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import grpc
import grpc.aio

from nemo_context.access import Decision, out_of_reach
from nemo_context.errors import service_error
from nemo_context.pseudonym import Pseudonymizer
from nemo_context.snapshots.objects import KEY_PATTERN
from nemo_core.db import Pool, learner_transaction
from nemo_core.errors import ServiceError
from nemo_core.identifiers import is_key
from nemo_core.oauth.claims import InvalidToken
from nemo_core.oauth.issuer import IssuerUnavailable
from nemo_core.people import PersonVerifier
from nemo_protos.context.v1 import context_service_pb2 as pb
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason

logger = logging.getLogger(__name__)

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]

#: The closest relation first, as ``learning.linked_learners`` names them.
RELATIONS: Final = (
    ("self", pb.LEARNER_RELATION_SELF),
    ("family_member", pb.LEARNER_RELATION_FAMILY_MEMBER),
    ("guardian", pb.LEARNER_RELATION_GUARDIAN),
    ("mentor", pb.LEARNER_RELATION_MENTOR),
)
_RANK: Final = {name: rank for rank, (name, _) in enumerate(RELATIONS)}
_PROTO: Final = dict(RELATIONS)


@dataclass(frozen=True)
class Linked:
    """A learner linked to a person: its id (never returned), ref, grade and closest relation."""

    learner_id: str
    learner_ref: str
    grade: int
    relation: pb.LearnerRelation.ValueType


def _unauthenticated(message: str) -> ServiceError:
    return service_error(
        grpc.StatusCode.UNAUTHENTICATED, ErrorReason.PERSON_UNAUTHENTICATED, message
    )


async def person_of(context: Context, verifier: PersonVerifier | None) -> str:
    """The platform user the access token in the ``authorization`` metadata proves;
    UNAUTHENTICATED / ``PERSON_UNAUTHENTICATED`` without a valid one (a caller token alone is
    nobody), UNAVAILABLE / ``PERSON_UNVERIFIABLE`` when the issuer's keys cannot be had."""
    values = [
        value
        for key, value in context.invocation_metadata() or ()
        if key == "authorization" and isinstance(value, str)
    ]
    scheme, _, token = values[0].partition(" ") if len(values) == 1 else ("", "", "")
    token = token.strip()
    if verifier is None or scheme.lower() != "bearer" or not verifier.accepts(token):
        raise _unauthenticated(
            'this method acts for a person: send their access token in the "authorization" '
            'metadata once ("Bearer <token>")'
        )
    try:
        person = await verifier.verify(token)
    except InvalidToken as invalid:
        raise _unauthenticated(invalid.message) from None
    except IssuerUnavailable as unavailable:
        logger.warning(
            "a person's access token cannot be verified now", extra={"problem": str(unavailable)}
        )
        raise service_error(
            grpc.StatusCode.UNAVAILABLE,
            ErrorReason.PERSON_UNVERIFIABLE,
            "the access token cannot be verified now; retry later",
        ) from None
    return person.user_id


async def linked_learners(pool: Pool, pseudonymizer: Pseudonymizer, user_id: str) -> list[Linked]:
    """The learners ``user_id`` is linked to in person, ordered by pseudonym."""
    if not is_key(user_id):
        return []
    rows = await pool.fetch(
        "SELECT learner_id, relation FROM learning.linked_learners($1)", user_id
    )
    closest: dict[str, str] = {}
    for row in rows:
        current = closest.get(row["learner_id"])
        if current is None or _RANK[row["relation"]] < _RANK[current]:
            closest[row["learner_id"]] = row["relation"]
    if not closest:
        return []
    async with learner_transaction(pool, list(closest), readonly=True) as conn:
        grades = await conn.fetch(
            "SELECT id, grade FROM learning.learners WHERE id = ANY($1::text[])", list(closest)
        )
    linked = [
        Linked(
            row["id"],
            pseudonymizer.learner_ref(row["id"]),
            row["grade"],
            _PROTO[closest[row["id"]]],
        )
        for row in grades
    ]
    return sorted(linked, key=lambda learner: learner.learner_ref)


def names_learner(learner_ref: str, key_ref: str) -> bool:
    """Whether a ref found in a snapshot key (full, or 12 digits as written before refs grew)
    is ``learner_ref``."""
    return key_ref in (learner_ref, learner_ref[: len("nemo_") + 12])


async def is_staff(pool: Pool, user_id: str) -> bool:
    """Whether ``user_id`` is staff or an administrator, who reach every learner."""
    if not is_key(user_id):
        return False
    return bool(
        await pool.fetchval(
            "SELECT EXISTS (SELECT FROM learning.users "
            "WHERE id = $1 AND role IN ('admin', 'staff'))",
            user_id,
        )
    )


def not_linked() -> ServiceError:
    """The one refusal of a learner the person may not reach, whether or not it exists."""
    return out_of_reach(Decision(pb.ACCESS_BASIS_UNSPECIFIED, "not_linked"))


def check_learner_ref(learner_ref: str) -> None:
    if not (learner_ref.startswith("nemo_") and is_ref_digits(learner_ref[5:])):
        raise service_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            ErrorReason.INVALID_LEARNER_REF,
            "learner_ref must be a learner pseudonym (nemo_ and hex digits)",
        )


def is_ref_digits(digits: str) -> bool:
    return len(digits) in (12, 24) and all(char in "0123456789abcdef" for char in digits)


async def resolve(
    pool: Pool, pseudonymizer: Pseudonymizer, learner_ref: str, user_id: str
) -> tuple[str, pb.LearnerRelation.ValueType]:
    """The id behind ``learner_ref`` and how ``user_id`` is linked to it (unspecified for staff,
    who reach every learner); PERMISSION_DENIED / ``LEARNER_OUT_OF_REACH`` for a learner they
    may not reach or that does not exist, alike."""
    check_learner_ref(learner_ref)
    for learner in await linked_learners(pool, pseudonymizer, user_id):
        if learner.learner_ref == learner_ref:
            return learner.learner_id, learner.relation
    if is_key(user_id):
        keys: Sequence[str] = [
            row[0]
            for row in await pool.fetch("SELECT learning.learner_keys_for_staff($1)", user_id)
        ]
        for learner_id in keys:
            if pseudonymizer.learner_ref(learner_id) == learner_ref:
                return learner_id, pb.LEARNER_RELATION_UNSPECIFIED
    raise not_linked()


async def may_read_snapshot(
    pool: Pool, pseudonymizer: Pseudonymizer, user_id: str, input_ref: str
) -> None:
    """Nothing when ``user_id`` may read the snapshot under ``input_ref``: staff any, a person
    those of the learners linked to them; PERMISSION_DENIED / ``LEARNER_OUT_OF_REACH``
    otherwise, whether or not the snapshot exists. A key of no snapshot's shape is left to the
    read, which refuses it."""
    if not KEY_PATTERN.match(input_ref):
        return
    key_ref = input_ref.split("/")[2]
    if await is_staff(pool, user_id):
        return
    linked = await linked_learners(pool, pseudonymizer, user_id)
    if not any(names_learner(learner.learner_ref, key_ref) for learner in linked):
        raise not_linked()
