"""Calls to the context service: learner and conversation bundles, turns, knowledge search.

Every call carries the gateway's caller token and the caller's remaining deadline. No prompt is
ever sent without the context it was built for; how a failed call reaches the caller:

- the context service could not be reached, was unavailable or saturated: UNAVAILABLE /
  CONTEXT_UNAVAILABLE, which callers (and their channels' retry policy) may retry;
- the deadline ran out: DEADLINE_EXCEEDED;
- its identifier gate blocked the bundle: INTERNAL / CONTEXT_LEAK_BLOCKED, never retried, since
  the same learner data builds the same blocked bundle;
- it failed otherwise (INTERNAL, UNIMPLEMENTED...): INTERNAL / CONTEXT_FAILED, not retried;
- it did not accept the gateway itself (UNAUTHENTICATED, PERMISSION_DENIED): INTERNAL /
  CONTEXT_FAILED too, logged at ERROR, since the gateway's caller is not at fault: the
  gateway's client token or certificate is wrong, or the context service's ACL lacks it;
- it refused the request (unknown learner, session, purpose...): its status code with
  CONTEXT_REJECTED.

A turn the context service will not store (anything but its being unavailable, busy or out of
time) raises :class:`TurnRefused` instead: the caller's request was fine, the learner has seen
the reply, and the streamer decides what to store in its place.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

import grpc
import grpc.aio

from nemo_core.deadlines import downstream_timeout
from nemo_core.errors import ServiceError, error_details, reason_from
from nemo_gateway.errors import (
    context_failed,
    context_leak_blocked,
    context_rejected,
    context_unavailable,
    service_error,
)
from nemo_protos.context.v1 import context_service_pb2 as ctx_pb
from nemo_protos.context.v1 import context_service_pb2_grpc as ctx_grpc
from nemo_protos.context.v1 import (
    conversation_pb2,
    item_bank_pb2,
    knowledge_pb2,
    learner_context_pb2,
)
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason as ContextReason
from nemo_protos.gateway.v1.error_reason_pb2 import ErrorReason
from nemo_protos.type.v1 import locale_pb2

logger = logging.getLogger(__name__)

#: The ErrorInfo domain of the context service's own errors.
CONTEXT_DOMAIN = "context"

# Codes that mean "the context service failed", as opposed to "it refused the request".
_FAILED_CODES = frozenset(
    {
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DATA_LOSS,
    }
)
# Codes that mean the context service does not accept the gateway: its configuration is wrong.
_REFUSED_GATEWAY_CODES = frozenset(
    {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}
)


# Codes of a call that did not get through, as opposed to one the service refused.
_NOT_THROUGH_CODES = frozenset(
    {
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.CANCELLED,
    }
)


class TurnRefused(Exception):
    """The context service refused to store a turn; ``context_reason`` is its reason."""

    def __init__(self, context_reason: str) -> None:
        super().__init__(context_reason)
        self.context_reason = context_reason


def _translate(exc: grpc.aio.AioRpcError) -> ServiceError:
    details = error_details(exc)
    code, reason = details.code, details.reason or details.code.name
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return service_error(
            grpc.StatusCode.DEADLINE_EXCEEDED,
            ErrorReason.DEADLINE_EXCEEDED,
            "the deadline was exceeded while building the context",
        )
    # Saturated (SERVER_BUSY) is unavailable for now too: callers may retry either.
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
        return context_unavailable()
    # The context service's own gate (its domain, its enum), which the gateway passes on.
    context_reason = reason_from(details, CONTEXT_DOMAIN, ContextReason)
    if code is grpc.StatusCode.INTERNAL and context_reason == ContextReason.CONTEXT_LEAK_BLOCKED:
        return context_leak_blocked()
    if code in _REFUSED_GATEWAY_CODES:
        logger.error(
            "the context service refused the gateway: check the gateway's client token or "
            "certificate and the context service's caller table",
            extra={"context_code": code.name, "context_reason": reason},
        )
        return context_failed(code, reason)
    if code in _FAILED_CODES:
        return context_failed(code, reason)
    return context_rejected(code, reason)


class ContextClient:
    """The context service, as the gateway uses it."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = ctx_grpc.ContextServiceStub(channel)

    async def build_context(
        self,
        learner_id: str,
        purpose: str,
        locale: locale_pb2.Locale.ValueType,
        evaluated_at: datetime,
    ) -> learner_context_pb2.ContextBundle:
        """The learner's bundle for ``purpose`` as of the run's evaluation time, persisted so
        the run can name its snapshot: the same request and time build the same bundle."""
        request = ctx_pb.BuildContextRequest(
            learner_id=learner_id, purpose=purpose, persist=True, locale=locale
        )
        request.evaluate_time.FromDatetime(evaluated_at)
        try:
            response = await self._stub.BuildContext(request, timeout=downstream_timeout())
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from None
        return response.bundle

    async def build_conversation(
        self, session_id: str, turn_id: str, user_message: str, token_budget: int
    ) -> conversation_pb2.ConversationBundle:
        """The turn's conversation bundle, persisted so the run can name its snapshot."""
        request = ctx_pb.BuildConversationContextRequest(
            session_id=session_id,
            turn_id=turn_id,
            current_user_message=user_message,
            token_budget=token_budget,
            persist=True,
        )
        try:
            response = await self._stub.BuildConversationContext(
                request, timeout=downstream_timeout()
            )
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from None
        return response.bundle

    async def record_turn(
        self,
        session_id: str,
        turn_id: str,
        messages: Sequence[conversation_pb2.TurnMessage],
        summary: conversation_pb2.SummaryUpdate | None,
        *,
        seconds: float | None = None,
    ) -> ctx_pb.RecordTurnResponse:
        """Store a turn, within the caller's deadline unless ``seconds`` is given; raises
        :class:`TurnRefused` when the context service refuses it."""
        request = ctx_pb.RecordTurnRequest(
            session_id=session_id, turn_id=turn_id, messages=messages, summary=summary
        )
        try:
            response: ctx_pb.RecordTurnResponse = await self._stub.RecordTurn(
                request, timeout=seconds if seconds is not None else downstream_timeout()
            )
        except grpc.aio.AioRpcError as exc:
            details = error_details(exc)
            if details.code not in _NOT_THROUGH_CODES:
                raise TurnRefused(details.reason or details.code.name) from None
            raise _translate(exc) from None
        return response

    async def search_knowledge(self, query: str, limit: int) -> list[knowledge_pb2.KnowledgeHit]:
        request = ctx_pb.SearchKnowledgeRequest(query=query, limit=limit)
        try:
            response = await self._stub.SearchKnowledge(request, timeout=downstream_timeout())
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from None
        return list(response.hits)

    async def store_generated_items(
        self, items: Sequence[item_bank_pb2.GeneratedItem], generated_by: str
    ) -> None:
        """Put generated items, with their keys and rubrics, in the knowledge item bank."""
        request = item_bank_pb2.StoreGeneratedItemsRequest(items=items, generated_by=generated_by)
        try:
            await self._stub.StoreGeneratedItems(request, timeout=downstream_timeout())
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from None
