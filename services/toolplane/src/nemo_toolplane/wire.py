"""What the two gRPC services of the tool plane share: the handler context, the bearer token a
call carries (refused when it comes twice), and the values both put into their messages."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeAlias

import grpc.aio
from google.protobuf import timestamp_pb2

from nemo_core.errors import ServiceError
from nemo_core.proto_enums import to_proto
from nemo_protos.toolplane.v1 import audit_pb2
from nemo_protos.toolplane.v1.error_reason_pb2 import ErrorReason
from nemo_toolplane.agent_auth import bearer_token
from nemo_toolplane.decisions import Decision
from nemo_toolplane.errors import invalid_argument

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


def authorizations(context: Context) -> list[str]:
    """Every ``authorization`` metadata value the call carries."""
    return [
        value
        for key, value in context.invocation_metadata() or ()
        if key == "authorization" and isinstance(value, str)
    ]


def duplicate_authorization() -> ServiceError:
    return invalid_argument(
        ErrorReason.DUPLICATE_AUTHORIZATION,
        'send the "authorization" metadata once: which copy counts would depend on who reads it',
    )


def bearer(context: Context) -> str | None:
    """The bearer token in the ``authorization`` metadata (an agent's or an operator's);
    INVALID_ARGUMENT / ``DUPLICATE_AUTHORIZATION`` when it comes more than once."""
    values = authorizations(context)
    if len(values) > 1:
        raise duplicate_authorization()
    return bearer_token(values[0]) if values else None


def decision_message(decision: Decision) -> audit_pb2.Decision.ValueType:
    return to_proto(audit_pb2.Decision, "DECISION_", decision)


def timestamp(value: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value.astimezone(UTC))
    return stamp
