"""How the tool plane reads the context service's refusals: by the context service's domain and
its ErrorReason enum, never by a reason string alone."""

from __future__ import annotations

import grpc
import grpc.aio

from nemo_core.errors import ServiceError
from nemo_toolplane.context_client import _translate
from nemo_toolplane.envelope import ErrorCode, ToolError

NOT_FOUND = ToolError(ErrorCode.RESOURCE_NOT_FOUND, "no such thing")


def _answer(
    code: grpc.StatusCode, reason: str, domain: str, **metadata: str
) -> grpc.aio.AioRpcError:
    status = ServiceError(code, reason, "refused", metadata).to_status(domain)
    return grpc.aio.AioRpcError(
        status.code,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(*status.trailing_metadata),
        status.details,
    )


def test_a_learner_out_of_reach_is_an_authorization_error_only_from_the_context_service() -> None:
    refused = _answer(
        grpc.StatusCode.PERMISSION_DENIED, "LEARNER_OUT_OF_REACH", "context", rule="no_relation"
    )
    error = _translate(refused, "BuildContext", NOT_FOUND)
    assert error.code is ErrorCode.AUTHORIZATION_ERROR
    assert error.audit == {"rule": "access:no_relation"}
    # The same reason in another domain is not the context service's access decision.
    elsewhere = _answer(grpc.StatusCode.PERMISSION_DENIED, "LEARNER_OUT_OF_REACH", "proxy")
    assert _translate(elsewhere, "BuildContext", NOT_FOUND).code is ErrorCode.INTERNAL_ERROR


def test_refused_agent_arguments_name_the_context_services_reason_only() -> None:
    refused = _answer(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SUBJECT", "context")
    error = _translate(refused, "SearchKnowledge", NOT_FOUND, agent_input=True)
    assert (error.code, dict(error.details)) == (
        ErrorCode.VALIDATION_ERROR,
        {"reason": "INVALID_SUBJECT"},
    )
    # A reason the context service does not declare, or another domain's, is not passed on.
    for reason, domain in (("NOT_A_CONTEXT_REASON", "context"), ("INVALID_SUBJECT", "proxy")):
        other = _translate(
            _answer(grpc.StatusCode.INVALID_ARGUMENT, reason, domain),
            "SearchKnowledge",
            NOT_FOUND,
            agent_input=True,
        )
        assert dict(other.details) == {"reason": "INVALID_ARGUMENT"}
