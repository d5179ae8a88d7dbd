"""The gateway's error reasons and the errors its handlers raise (domain "gateway")."""

from __future__ import annotations

from enum import StrEnum

import grpc

from nemo_core.errors import ServiceError


class GatewayReason(StrEnum):
    """Stable ErrorInfo reasons of the gateway."""

    UNKNOWN_PROMPT = "UNKNOWN_PROMPT"
    INVALID_VARIABLES = "INVALID_VARIABLES"
    INVALID_EVALUATED_AT = "INVALID_EVALUATED_AT"
    LEARNER_REQUIRED = "LEARNER_REQUIRED"
    LEARNER_DATA_REFUSED = "LEARNER_DATA_REFUSED"
    WRONG_RPC_FOR_PROMPT = "WRONG_RPC_FOR_PROMPT"
    CONTEXT_UNAVAILABLE = "CONTEXT_UNAVAILABLE"
    CONTEXT_REJECTED = "CONTEXT_REJECTED"
    CONTEXT_LEAK_BLOCKED = "CONTEXT_LEAK_BLOCKED"
    CONTEXT_FAILED = "CONTEXT_FAILED"
    PROVIDER_BUSY = "PROVIDER_BUSY"
    CALLER_BUSY = "CALLER_BUSY"
    PROVIDER_STREAM_BROKEN = "PROVIDER_STREAM_BROKEN"
    REPLY_TRUNCATED = "REPLY_TRUNCATED"
    REPLY_REJECTED = "REPLY_REJECTED"


def unknown_prompt(prompt_id: str) -> ServiceError:
    return ServiceError(
        grpc.StatusCode.NOT_FOUND,
        GatewayReason.UNKNOWN_PROMPT,
        "no prompt is registered under this id",
        {"prompt_id": prompt_id},
    )


def invalid_variables(prompt_id: str, problems: str) -> ServiceError:
    return ServiceError(
        grpc.StatusCode.INVALID_ARGUMENT,
        GatewayReason.INVALID_VARIABLES,
        f"the variables do not match the prompt's input model: {problems}",
        {"prompt_id": prompt_id},
    )


def invalid_evaluated_at() -> ServiceError:
    return ServiceError(
        grpc.StatusCode.INVALID_ARGUMENT,
        GatewayReason.INVALID_EVALUATED_AT,
        "evaluated_at is not a valid timestamp: seconds must fall in years 1 to 9999 and nanos "
        "in 0 to 999999999",
    )


def learner_required(prompt_id: str) -> ServiceError:
    return ServiceError(
        grpc.StatusCode.INVALID_ARGUMENT,
        GatewayReason.LEARNER_REQUIRED,
        "this prompt builds learner context and needs learner_id",
        {"prompt_id": prompt_id},
    )


def learner_data_refused(prompt_id: str) -> ServiceError:
    return ServiceError(
        grpc.StatusCode.INVALID_ARGUMENT,
        GatewayReason.LEARNER_DATA_REFUSED,
        "this prompt is content-only and accepts no learner",
        {"prompt_id": prompt_id},
    )


def wrong_rpc(prompt_id: str, rpc: str) -> ServiceError:
    return ServiceError(
        grpc.StatusCode.INVALID_ARGUMENT,
        GatewayReason.WRONG_RPC_FOR_PROMPT,
        f"this prompt is not served by {rpc}",
        {"prompt_id": prompt_id, "rpc": rpc},
    )


def context_unavailable() -> ServiceError:
    return ServiceError(
        grpc.StatusCode.UNAVAILABLE,
        GatewayReason.CONTEXT_UNAVAILABLE,
        "the context service is unavailable; no prompt is sent without its context",
    )


def context_rejected(code: grpc.StatusCode, reason: str) -> ServiceError:
    """The context service refused the request (unknown learner, session, purpose...)."""
    return ServiceError(
        code,
        GatewayReason.CONTEXT_REJECTED,
        "the context service refused to build the context",
        {"context_reason": reason},
    )


def context_leak_blocked() -> ServiceError:
    """The context service's identifier gate refused the bundle; a retry builds the same one."""
    return ServiceError(
        grpc.StatusCode.INTERNAL,
        GatewayReason.CONTEXT_LEAK_BLOCKED,
        "the context service blocked the learner context because it would leak an identifier",
    )


def context_failed(code: grpc.StatusCode, reason: str) -> ServiceError:
    """The context service failed in a way a retry does not fix (an internal error, a method it
    does not serve)."""
    return ServiceError(
        grpc.StatusCode.INTERNAL,
        GatewayReason.CONTEXT_FAILED,
        "the context service failed to build the context",
        {"context_code": code.name, "context_reason": reason},
    )


def provider_busy() -> ServiceError:
    return ServiceError(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        GatewayReason.PROVIDER_BUSY,
        "the model provider's concurrency limit is reached; retry later",
    )


def caller_busy(caller: str) -> ServiceError:
    return ServiceError(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        GatewayReason.CALLER_BUSY,
        "this caller's concurrency limit is reached; retry later",
        {"caller": caller},
    )


def stream_broken() -> ServiceError:
    return ServiceError(
        grpc.StatusCode.UNAVAILABLE,
        GatewayReason.PROVIDER_STREAM_BROKEN,
        "the model stream broke after the reply had started; the turn was stored as partial",
    )


def reply_truncated() -> ServiceError:
    return ServiceError(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        GatewayReason.REPLY_TRUNCATED,
        "the reply reached the output token limit; the turn was stored as partial",
    )


def reply_rejected() -> ServiceError:
    return ServiceError(
        grpc.StatusCode.ABORTED,
        GatewayReason.REPLY_REJECTED,
        "the reply's guardrail stopped it after it had started; the turn was stored as partial",
    )
