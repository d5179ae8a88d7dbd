"""Calls to the context service: learner and conversation bundles, turns, knowledge search.

Every call carries the gateway's caller token and the caller's remaining deadline. A context
service that cannot answer makes the prompt fail with UNAVAILABLE: no prompt is ever sent
without the context it was built for.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
import grpc.aio

from nemo.context.v1 import context_service_pb2 as ctx_pb
from nemo.context.v1 import context_service_pb2_grpc as ctx_grpc
from nemo.context.v1 import conversation_pb2, knowledge_pb2, learner_context_pb2
from nemo.type.v1 import locale_pb2
from nemo_core.deadlines import downstream_timeout
from nemo_core.errors import Reason, ServiceError, error_details
from nemo_gateway.errors import context_rejected, context_unavailable

# Codes that mean "the context service could not do it", as opposed to "it refused".
_UNAVAILABLE_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.INTERNAL}
)


def _translate(exc: grpc.aio.AioRpcError) -> ServiceError:
    details = error_details(exc)
    if details.code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return ServiceError(
            grpc.StatusCode.DEADLINE_EXCEEDED,
            Reason.DEADLINE_EXCEEDED,
            "the deadline was exceeded while building the context",
        )
    if details.code in _UNAVAILABLE_CODES:
        return context_unavailable()
    return context_rejected(details.code, details.reason or details.code.name)


class ContextClient:
    """The context service, as the gateway uses it."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = ctx_grpc.ContextServiceStub(channel)

    async def build_context(
        self, learner_id: str, purpose: str, locale: locale_pb2.Locale.ValueType
    ) -> learner_context_pb2.ContextBundle:
        """The learner's bundle for ``purpose``, persisted so the run can name its snapshot."""
        request = ctx_pb.BuildContextRequest(
            learner_id=learner_id, purpose=purpose, persist=True, locale=locale
        )
        try:
            response = await self._stub.BuildContext(request, timeout=downstream_timeout())
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from None
        return response.bundle

    async def build_conversation(
        self, session_id: str, turn_id: str, user_message: str, token_budget: int
    ) -> conversation_pb2.ConversationBundle:
        request = ctx_pb.BuildConversationContextRequest(
            session_id=session_id,
            turn_id=turn_id,
            current_user_message=user_message,
            token_budget=token_budget,
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
    ) -> ctx_pb.RecordTurnResponse:
        request = ctx_pb.RecordTurnRequest(
            session_id=session_id, turn_id=turn_id, messages=messages, summary=summary
        )
        try:
            response: ctx_pb.RecordTurnResponse = await self._stub.RecordTurn(
                request, timeout=downstream_timeout()
            )
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from None
        return response

    async def search_knowledge(self, query: str, limit: int) -> list[knowledge_pb2.KnowledgeHit]:
        request = ctx_pb.SearchKnowledgeRequest(query=query, limit=limit)
        try:
            response = await self._stub.SearchKnowledge(request, timeout=downstream_timeout())
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc) from None
        return list(response.hits)
