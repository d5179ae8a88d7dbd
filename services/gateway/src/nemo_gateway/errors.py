"""The errors the gateway's handlers raise (domain "gateway"): every reason is a value of
``nemo.gateway.v1.ErrorReason``."""

from __future__ import annotations

import grpc

from nemo_core.errors import ErrorFactory, ServiceError
from nemo_protos.gateway.v1.error_reason_pb2 import ErrorReason

service_error = ErrorFactory(ErrorReason)


def unknown_prompt(prompt_id: str) -> ServiceError:
    return service_error(
        grpc.StatusCode.NOT_FOUND,
        ErrorReason.UNKNOWN_PROMPT,
        "no prompt is registered under this id",
        {"prompt_id": prompt_id},
    )


def invalid_variables(prompt_id: str, problems: str) -> ServiceError:
    return service_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        ErrorReason.INVALID_VARIABLES,
        f"the variables do not match the prompt's input model: {problems}",
        {"prompt_id": prompt_id},
    )


def invalid_evaluate_time() -> ServiceError:
    return service_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        ErrorReason.INVALID_EVALUATE_TIME,
        "evaluate_time is not a valid timestamp: seconds must fall in years 1 to 9999 and nanos "
        "in 0 to 999999999",
    )


def learner_required(prompt_id: str) -> ServiceError:
    return service_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        ErrorReason.LEARNER_REQUIRED,
        "this prompt builds learner context and needs learner_id",
        {"prompt_id": prompt_id},
    )


def learner_data_refused(prompt_id: str) -> ServiceError:
    return service_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        ErrorReason.LEARNER_DATA_REFUSED,
        "this prompt is content-only and accepts no learner",
        {"prompt_id": prompt_id},
    )


def wrong_rpc(prompt_id: str, rpc: str) -> ServiceError:
    return service_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        ErrorReason.WRONG_RPC_FOR_PROMPT,
        f"this prompt is not served by {rpc}",
        {"prompt_id": prompt_id, "rpc": rpc},
    )


def context_unavailable() -> ServiceError:
    return service_error(
        grpc.StatusCode.UNAVAILABLE,
        ErrorReason.CONTEXT_UNAVAILABLE,
        "the context service is unavailable; no prompt is sent without its context",
    )


def context_rejected(code: grpc.StatusCode, reason: str) -> ServiceError:
    """The context service refused the request (unknown learner, session, purpose...)."""
    return service_error(
        code,
        ErrorReason.CONTEXT_REJECTED,
        "the context service refused to build the context",
        {"context_reason": reason},
    )


def context_leak_blocked() -> ServiceError:
    """The context service's identifier gate refused the bundle; a retry builds the same one."""
    return service_error(
        grpc.StatusCode.INTERNAL,
        ErrorReason.CONTEXT_LEAK_BLOCKED,
        "the context service blocked the learner context because it would leak an identifier",
    )


def context_failed(code: grpc.StatusCode, reason: str) -> ServiceError:
    """The context service failed in a way a retry does not fix (an internal error, a method it
    does not serve)."""
    return service_error(
        grpc.StatusCode.INTERNAL,
        ErrorReason.CONTEXT_FAILED,
        "the context service failed to build the context",
        {"context_code": code.name, "context_reason": reason},
    )


def provider_busy() -> ServiceError:
    return service_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        ErrorReason.PROVIDER_BUSY,
        "the model provider's concurrency limit is reached; retry later",
    )


def caller_busy(caller: str) -> ServiceError:
    return service_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        ErrorReason.CALLER_BUSY,
        "this caller's concurrency limit is reached; retry later",
        {"caller": caller},
    )


def stream_broken() -> ServiceError:
    return service_error(
        grpc.StatusCode.UNAVAILABLE,
        ErrorReason.PROVIDER_STREAM_BROKEN,
        "the model stream broke after the reply had started; the turn was stored as partial",
    )


def reply_truncated() -> ServiceError:
    return service_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        ErrorReason.REPLY_TRUNCATED,
        "the reply reached the output token limit; the turn was stored as partial",
    )


def reply_rejected() -> ServiceError:
    return service_error(
        grpc.StatusCode.ABORTED,
        ErrorReason.REPLY_REJECTED,
        "the reply's guardrail stopped it after it had started; the turn was stored as partial",
    )


def provider_timeout() -> ServiceError:
    return service_error(
        grpc.StatusCode.UNAVAILABLE,
        ErrorReason.PROVIDER_TIMEOUT,
        "the model stopped sending the reply within its timeout after the reply had started; "
        "the turn was stored as partial",
    )


def answer_too_long() -> ServiceError:
    return service_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        ErrorReason.ANSWER_TOO_LONG,
        "the reply ran past its length bound after it had started; the turn was stored as partial",
    )


def turn_not_recorded(context_reason: str, *, placeholder: bool) -> ServiceError:
    """The context service refused the turn the learner saw (and the turn without its summary)."""
    return service_error(
        grpc.StatusCode.INTERNAL,
        ErrorReason.TURN_NOT_RECORDED,
        "the context service refused to store the turn as it was shown",
        {"context_reason": context_reason, "placeholder": "stored" if placeholder else "refused"},
    )
