"""The context service's errors (domain "context"): every reason is a value of
``nemo.context.v1.ErrorReason``."""

from __future__ import annotations

from nemo_core.errors import ErrorFactory
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason

service_error = ErrorFactory(ErrorReason)
