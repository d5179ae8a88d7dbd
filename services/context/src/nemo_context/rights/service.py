"""RightsService: a trusted caller records a person's request about a learner, and reads it back.

Who may ask about which learner is decided by the context service's access rules
(:func:`nemo_context.access.authorize`, the ``user`` scope with a user the caller vouches for):
the learner itself, a member of its family, a guardian or staff. A mentor may not, and a
learner the person cannot reach gets the same answer as one that does not exist.

Recording is all this service does to a learner's data: a restriction or an erasure blocks the
learner at once (nothing more is built or recorded for it); the erasure itself, which deletes
across stores no service role may touch, runs with the owner role (``nemo rights``, ADR 0013).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from nemo_context.access import Decision, Reach, ResourceScope, authorize, out_of_reach
from nemo_context.errors import service_error
from nemo_context.ids import check_learner_id
from nemo_context.rights import requests
from nemo_context.rights.blocks import RESTRICTED
from nemo_context.rights.requests import Kind, RequestError, RightsRequest, State
from nemo_context.rights.retention import RETENTION
from nemo_context.snapshots.keys import MasterKey
from nemo_core.db import Pool, learner_transaction
from nemo_core.identifiers import is_key
from nemo_protos.context.v1 import context_service_pb2 as access_pb
from nemo_protos.context.v1 import rights_service_pb2 as pb
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason
from nemo_protos.type.v1 import user_source_pb2

#: Who may ask about a learner's data: the learner, its family, its guardians, staff.
REQUESTING_BASES: Final = frozenset(
    {
        access_pb.ACCESS_BASIS_SELF,
        access_pb.ACCESS_BASIS_FAMILY_MEMBER,
        access_pb.ACCESS_BASIS_GUARDIAN,
        access_pb.ACCESS_BASIS_STAFF,
    }
)

KINDS: Final[Mapping[pb.RightsKind.ValueType, Kind]] = MappingProxyType(
    {
        pb.RIGHTS_KIND_EXPORT: Kind.EXPORT,
        pb.RIGHTS_KIND_ERASURE: Kind.ERASURE,
        pb.RIGHTS_KIND_RESTRICTION: Kind.RESTRICTION,
    }
)
STATES: Final[Mapping[State, pb.RightsState.ValueType]] = MappingProxyType(
    {
        State.RECEIVED: pb.RIGHTS_STATE_RECEIVED,
        State.ACKNOWLEDGED: pb.RIGHTS_STATE_ACKNOWLEDGED,
        State.IN_PROGRESS: pb.RIGHTS_STATE_IN_PROGRESS,
        State.COMPLETED: pb.RIGHTS_STATE_COMPLETED,
        State.IN_EFFECT: pb.RIGHTS_STATE_IN_EFFECT,
        State.LIFTED: pb.RIGHTS_STATE_LIFTED,
        State.FAILED: pb.RIGHTS_STATE_FAILED,
    }
)


def retention_table() -> pb.ListRetentionResponse:
    """The retention table itself, for transparency."""
    return pb.ListRetentionResponse(
        rules=[
            pb.RetentionRule(
                store=rule.store,
                location=rule.location,
                holds=rule.holds,
                purpose=rule.purpose,
                period=rule.period,
                counted_from=rule.counted_from,
                on_expiry=rule.on_expiry.value,
                on_erasure=rule.on_erasure.value,
            )
            for rule in RETENTION
        ]
    )


def _time(moment: datetime | None) -> Timestamp | None:
    if moment is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(moment)
    return stamp


def request_message(request: RightsRequest) -> pb.RightsRequest:
    """A stored request as the contract has it."""
    receipt: Mapping[str, Any] = request.receipt or {}
    verification = receipt.get("verification", {})
    return pb.RightsRequest(
        request_id=request.request_id,
        kind=next(number for number, kind in KINDS.items() if kind is request.kind),
        state=STATES[request.state],
        requested_by=request.requested_by,
        receive_time=_time(request.received_at),
        acknowledge_deadline=_time(request.acknowledge_by),
        complete_deadline=_time(request.complete_by),
        acknowledge_time=_time(request.acknowledged_at),
        complete_time=_time(request.completed_at),
        removed_counts=receipt.get("removed", {}),
        scanned_count=int(verification.get("scanned", 0)),
        traces_left=verification.get("traces_left", {}),
        verified=bool(receipt.get("verified", False)),
    )


def _checked(request: pb.SubmitRightsRequestRequest) -> Kind:
    check_learner_id(request.learner_id)
    if not requests.REQUEST_ID.fullmatch(request.request_id):
        raise service_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            ErrorReason.INVALID_REQUEST_ID,
            "request_id must be 3 to 64 letters, digits or . _ : -, starting with a letter or "
            "digit",
        )
    kind = KINDS.get(request.kind)
    if kind is None:
        raise service_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            ErrorReason.INVALID_RIGHTS_KIND,
            "kind must be RIGHTS_KIND_EXPORT, RIGHTS_KIND_ERASURE or RIGHTS_KIND_RESTRICTION",
        )
    return kind


async def _may_ask(pool: Pool, learner_id: str, person: str) -> None:
    """PERMISSION_DENIED / ``LEARNER_OUT_OF_REACH`` unless ``person`` may ask about the learner."""
    reach = Reach(
        person if is_key(person) else "",
        user_source_pb2.USER_SOURCE_CALLER,
        (ResourceScope(user=True),),
    )
    async with learner_transaction(pool, [learner_id], readonly=True) as conn:
        decision = await authorize(conn, learner_id, reach)
    if decision.basis not in REQUESTING_BASES:
        raise out_of_reach(
            Decision(access_pb.ACCESS_BASIS_UNSPECIFIED, decision.refusal or "mentor")
        )


async def submit(
    pool: Pool,
    master: MasterKey,
    request: pb.SubmitRightsRequestRequest,
    *,
    caller: str,
    now: datetime,
) -> pb.RightsRequest:
    """Record the request (the answer is its acknowledgement); block the learner of a
    restriction or an erasure."""
    kind = _checked(request)
    await _may_ask(pool, request.learner_id, request.requested_by)
    subject = master.subject(request.learner_id)
    async with pool.acquire() as conn, conn.transaction():
        try:
            opened = await requests.open_request(
                conn,
                request.request_id,
                kind,
                subject,
                requested_by=request.requested_by,
                requested_via=caller,
                now=now,
            )
        except RequestError:
            raise service_error(
                grpc.StatusCode.ALREADY_EXISTS,
                ErrorReason.REQUEST_ID_CONFLICT,
                "this request id names a request of another kind or about another learner",
            ) from None
        await requests.acknowledge(conn, opened.request_id, caller, now)
        if kind is not Kind.EXPORT:
            blocked = await conn.execute(
                "INSERT INTO rights.blocks (subject, kind, request_id) VALUES ($1, $2, $3)"
                " ON CONFLICT (subject) DO NOTHING",
                subject,
                RESTRICTED,
                opened.request_id,
            )
            if blocked.endswith(" 1"):
                await requests.record_event(conn, opened.request_id, "blocked", caller, {})
        if kind is Kind.RESTRICTION and opened.state is not State.IN_EFFECT:
            await requests.set_state(conn, opened.request_id, State.IN_EFFECT, caller, now=now)
        stored = await requests.get_request(conn, opened.request_id)
    assert stored is not None  # noqa: S101  recorded in this transaction
    return request_message(stored)


async def get(pool: Pool, request: pb.GetRightsRequestRequest) -> pb.RightsRequest:
    """A request the same person made; NOT_FOUND / ``RIGHTS_REQUEST_NOT_FOUND`` otherwise."""
    found = None
    if requests.REQUEST_ID.fullmatch(request.request_id):
        async with pool.acquire() as conn:
            found = await requests.get_request(conn, request.request_id)
    if found is None or found.requested_by != request.requested_by:
        raise service_error(
            grpc.StatusCode.NOT_FOUND,
            ErrorReason.RIGHTS_REQUEST_NOT_FOUND,
            "no request with this id was made by this person",
        )
    return request_message(found)


async def made_by(pool: Pool, subject: str, requested_by: str) -> list[pb.RightsRequest]:
    """The requests ``requested_by`` made about the learner named by ``subject``, newest
    first."""
    async with pool.acquire() as conn:
        made = await requests.requests_of(conn, subject, requested_by)
    return [request_message(request) for request in made]
