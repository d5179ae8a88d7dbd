"""The tool plane's only road to learner data and knowledge: the context service.

Every call carries the tool plane's caller token and a timeout (the gRPC caller's remaining
deadline when shorter than ``context_timeout_seconds``). Failures become tool errors: an
unreachable or slow context service is ``DEPENDENCY_ERROR`` (retryable); knowledge arguments it
refuses are ``VALIDATION_ERROR``, since they come from the agent as they are; a learner out of
reach (or missing) is ``AUTHORIZATION_ERROR``, with the rule that refused it for the audit row
only; a blocked leak or any other failure is ``INTERNAL_ERROR`` with the detail in the log only.

Calls about a learner carry a :class:`LearnerReach`: who the agent acts for, where that user came
from, and the grants' resource scopes. The context service decides access from it, for agent
views in the same transaction that reads the view.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import grpc
import grpc.aio

from nemo_core.deadlines import downstream_timeout
from nemo_core.errors import ErrorDetails, ServiceError, error_details, reason_from
from nemo_core.proto_enums import to_proto
from nemo_protos.context.v1 import context_service_pb2 as pb
from nemo_protos.context.v1 import context_service_pb2_grpc as pb_grpc
from nemo_protos.context.v1 import learner_context_pb2
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason as ContextReason
from nemo_protos.type.v1 import user_source_pb2
from nemo_toolplane.envelope import ErrorCode, ToolError, internal_error
from nemo_toolplane.principal import UserSource

logger = logging.getLogger(__name__)

_UNAVAILABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.CANCELLED,
    }
)


def dependency_error() -> ToolError:
    return ToolError(ErrorCode.DEPENDENCY_ERROR, "the context service is unavailable; retry later")


#: The ErrorInfo domain of the context service's own errors.
CONTEXT_DOMAIN = "context"


def user_source(source: UserSource) -> user_source_pb2.UserSource.ValueType:
    return to_proto(user_source_pb2.UserSource, "USER_SOURCE_", source)


@dataclass(frozen=True)
class LearnerReach:
    """What decides whether a call may reach a learner: the user the agent acts for, where that
    user came from, and the resource scopes of the grants covering the call."""

    user_id: str | None
    user_source: UserSource
    scopes: tuple[str, ...]

    def message(self) -> pb.AgentAccess:
        return pb.AgentAccess(
            user_id=self.user_id or "",
            user_source=user_source(self.user_source),
            resource_scopes=self.scopes,
        )


def not_reachable(rule: str = "") -> ToolError:
    """The one answer for a learner out of reach, whether or not it exists (no id probing);
    ``rule`` (the context service's refusal) goes to the audit row only."""
    return ToolError(
        ErrorCode.AUTHORIZATION_ERROR,
        "the learner is not within this call's reach",
        audit={"rule": f"access:{rule or 'unknown'}"},
    )


def _refused_arguments(reason: ContextReason.ValueType | None) -> ToolError:
    """The context service's INVALID_ARGUMENT on arguments the agent chose; ``reason`` is its
    stable ErrorInfo reason (INVALID_QUERY, INVALID_SUBJECT...), never the input."""
    return ToolError(
        ErrorCode.VALIDATION_ERROR,
        "the context service refused the arguments",
        details={"reason": ContextReason.Name(reason) if reason else "INVALID_ARGUMENT"},
    )


def _context_reason(details: ErrorDetails) -> ContextReason.ValueType | None:
    return reason_from(details, CONTEXT_DOMAIN, ContextReason)


def _translate(
    error: grpc.aio.AioRpcError, method: str, not_found: ToolError, *, agent_input: bool = False
) -> ToolError:
    """``agent_input``: the request carries the agent's arguments unchanged, so an
    INVALID_ARGUMENT is the agent's to fix (elsewhere it is the tool plane's bug)."""
    details = error_details(error)
    if details.code in _UNAVAILABLE:
        logger.warning(
            "context service call failed",
            extra={"method": method, "grpc_code": details.code.name, "reason": details.reason},
        )
        return dependency_error()
    if details.code is grpc.StatusCode.NOT_FOUND:
        return not_found
    reason = _context_reason(details)
    if (
        details.code is grpc.StatusCode.PERMISSION_DENIED
        and reason == ContextReason.LEARNER_OUT_OF_REACH
    ):
        return not_reachable(details.metadata.get("rule", ""))
    if agent_input and details.code is grpc.StatusCode.INVALID_ARGUMENT:
        return _refused_arguments(reason)
    logger.error(
        "context service refused a call",
        extra={"method": method, "grpc_code": details.code.name, "reason": details.reason},
    )
    return internal_error()


class ContextClient:
    """Typed calls to the context service, with errors already translated. The channel is its
    owner's to open and close; ``timeout_seconds`` bounds each call."""

    def __init__(self, channel: grpc.aio.Channel, timeout_seconds: float) -> None:
        self._stub = pb_grpc.ContextServiceStub(channel)
        self._timeout = timeout_seconds

    def _call_timeout(self) -> float:
        try:
            remaining = downstream_timeout()
        except ServiceError:
            raise dependency_error() from None
        return self._timeout if remaining is None else min(remaining, self._timeout)

    async def check_access(self, learner_id: str, reach: LearnerReach) -> str | None:
        """None when one of the reach's scopes lets the user reach the learner; otherwise the
        rules that refused it."""
        refusals: list[str] = []
        for scope in reach.scopes:
            request = pb.CheckLearnerAccessRequest(
                user_id=reach.user_id or "",
                learner_id=learner_id,
                resource_scope=scope,
                user_source=user_source(reach.user_source),
            )
            try:
                response = await self._stub.CheckLearnerAccess(
                    request, timeout=self._call_timeout()
                )
            except grpc.aio.AioRpcError as error:
                raise _translate(error, "CheckLearnerAccess", not_reachable()) from None
            if response.allowed:
                return None
            refusals.append(response.refusal_rule)
        return ",".join(dict.fromkeys(refusals))

    async def access_basis(self, learner_id: str, user_id: str) -> pb.AccessBasis.ValueType:
        """How ``user_id`` (a person the tool plane verified) reaches the learner under the
        "user" scope; unspecified when they do not (or there is no such learner)."""
        request = pb.CheckLearnerAccessRequest(
            user_id=user_id,
            learner_id=learner_id,
            resource_scope="user",
            user_source=user_source_pb2.USER_SOURCE_TOKEN,
        )
        try:
            response = await self._stub.CheckLearnerAccess(request, timeout=self._call_timeout())
        except grpc.aio.AioRpcError as error:
            raise _translate(error, "CheckLearnerAccess", not_reachable()) from None
        return response.basis

    async def user_exists(self, user_id: str) -> bool:
        """Whether ``user_id`` names a user of the platform; ``DEPENDENCY_ERROR`` when the
        context service cannot say."""
        request = pb.CheckUserRequest(user_id=user_id)
        try:
            response = await self._stub.CheckUser(request, timeout=self._call_timeout())
        except grpc.aio.AioRpcError as error:
            raise _translate(error, "CheckUser", internal_error()) from None
        return response.exists

    async def linked_learners(self, user_id: str) -> list[pb.LinkedLearner]:
        """The learners ``user_id`` (a person the tool plane verified) is linked to in person."""
        request = pb.ListLinkedLearnersRequest(user_id=user_id)
        try:
            response = await self._stub.ListLinkedLearners(request, timeout=self._call_timeout())
        except grpc.aio.AioRpcError as error:
            raise _translate(error, "ListLinkedLearners", internal_error()) from None
        return list(response.learners)

    async def resolve_learner_ref(
        self, learner_ref: str, user_id: str
    ) -> pb.ResolveLearnerRefResponse:
        """The id of the learner ``learner_ref`` names and how ``user_id`` (a person the tool
        plane verified) is linked to them, when they may reach them; ``AUTHORIZATION_ERROR``
        otherwise, whether or not the learner exists."""
        request = pb.ResolveLearnerRefRequest(learner_ref=learner_ref, user_id=user_id)
        try:
            response = await self._stub.ResolveLearnerRef(request, timeout=self._call_timeout())
        except grpc.aio.AioRpcError as error:
            raise _translate(error, "ResolveLearnerRef", not_reachable()) from None
        return response

    async def agent_view(
        self, learner_id: str, view: str, reach: LearnerReach, *, persist: bool
    ) -> learner_context_pb2.ContextBundle:
        """The gated, pseudonymous bundle of one agent view, authorized by the context service
        in the same call; with ``persist``, its snapshot reference is in ``input_ref``."""
        request = pb.BuildContextRequest(
            learner_id=learner_id, purpose=view, persist=persist, agent_access=reach.message()
        )
        try:
            response = await self._stub.BuildContext(request, timeout=self._call_timeout())
        except grpc.aio.AioRpcError as error:
            raise _translate(error, "BuildContext", not_reachable()) from None
        return response.bundle

    async def search_knowledge(
        self, query: str, limit: int, subject: str | None, grade: int | None
    ) -> pb.SearchKnowledgeResponse:
        request = pb.SearchKnowledgeRequest(
            query=query, limit=limit, subject=subject or "", grade=grade or 0
        )
        try:
            return await self._stub.SearchKnowledge(request, timeout=self._call_timeout())
        except grpc.aio.AioRpcError as error:
            raise _translate(error, "SearchKnowledge", internal_error(), agent_input=True) from None

    async def knowledge_node(self, node_id: str) -> pb.GetKnowledgeNodeResponse:
        request = pb.GetKnowledgeNodeRequest(node_id=node_id)
        try:
            return await self._stub.GetKnowledgeNode(request, timeout=self._call_timeout())
        except grpc.aio.AioRpcError as error:
            missing = ToolError(ErrorCode.RESOURCE_NOT_FOUND, f"no knowledge node {node_id!r}")
            raise _translate(error, "GetKnowledgeNode", missing, agent_input=True) from None
