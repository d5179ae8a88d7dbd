"""What the two gRPC services of the tool plane share: the handler context, the bearer token a
call carries, and the values both put into their messages."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeAlias

import grpc.aio
from google.protobuf import timestamp_pb2

from nemo_core.proto_enums import to_proto
from nemo_protos.toolplane.v1 import audit_pb2
from nemo_toolplane.agent_auth import bearer_token
from nemo_toolplane.decisions import Decision

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


def bearer(context: Context) -> str | None:
    """The bearer token in the ``authorization`` metadata (an agent's or an operator's)."""
    token = None
    for key, value in context.invocation_metadata() or ():
        if key == "authorization" and isinstance(value, str):
            token = bearer_token(value)
    return token


def decision_message(decision: Decision) -> audit_pb2.Decision.ValueType:
    return to_proto(audit_pb2.Decision, "DECISION_", decision)


def timestamp(value: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value.astimezone(UTC))
    return stamp
