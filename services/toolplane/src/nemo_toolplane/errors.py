"""The tool plane's gRPC errors (domain "toolplane"): every reason is a value of
``nemo.toolplane.v1.ErrorReason``.

Tool-level outcomes are not gRPC errors: they travel in the tool result's envelope
(``envelope.ErrorCode``, ``nemo.toolplane.v1.ErrorCode``)."""

from __future__ import annotations

import grpc

from nemo_core.errors import ErrorFactory, ServiceError
from nemo_protos.toolplane.v1.error_reason_pb2 import ErrorReason

service_error = ErrorFactory(ErrorReason)


def invalid_argument(reason: ErrorReason.ValueType, message: str) -> ServiceError:
    return service_error(grpc.StatusCode.INVALID_ARGUMENT, reason, message)
