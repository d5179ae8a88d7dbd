"""The one error model: canonical status codes with ``google.rpc.ErrorInfo`` in the trailers.

Handlers raise :class:`ServiceError`; the server interceptor turns it into a
``google.rpc.Status`` (``grpc-status-details-bin``) whose ``ErrorInfo`` carries the stable reason,
the service name as domain, and string metadata. Any other exception becomes ``INTERNAL`` with a
generic message: internal text never reaches the wire. Clients read errors back with
:func:`error_details`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

import grpc
import grpc.aio
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from nemo_core.db import is_database_unavailable

logger = logging.getLogger(__name__)

_REASON_PATTERN = re.compile(r"^[A-Z][A-Z0-9_]{0,62}[A-Z0-9]\Z")

# gRPC refuses trailers past 16 KiB and some past 8 KiB, and the caller then gets a bare
# RESOURCE_EXHAUSTED instead of the error. Handlers echo caller input into messages and
# metadata, so the status is bounded here: under 7 KiB of trailers whatever was echoed (the
# message is sent twice, once percent-encoded). Limits are UTF-8 bytes, characters for ASCII.
MAX_MESSAGE_BYTES = 512
MAX_METADATA_ENTRIES = 16
MAX_METADATA_KEY_BYTES = 64
MAX_METADATA_VALUE_BYTES = 200
_ELLIPSIS = "\u2026"


class Reason(StrEnum):
    """Reasons shared by every service; services declare their own next to their handlers."""

    CALLER_UNAUTHENTICATED = "CALLER_UNAUTHENTICATED"
    CALLER_NOT_ALLOWED = "CALLER_NOT_ALLOWED"
    SERVER_BUSY = "SERVER_BUSY"
    DEADLINE_REQUIRED = "DEADLINE_REQUIRED"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    DATABASE_UNAVAILABLE = "DATABASE_UNAVAILABLE"
    DEPENDENCY_UNAVAILABLE = "DEPENDENCY_UNAVAILABLE"
    INTERNAL = "INTERNAL"


class ServiceError(Exception):
    """An error a handler reports to its caller; ``message`` must be safe to show to them."""

    def __init__(
        self,
        code: grpc.StatusCode,
        reason: str,
        message: str,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        if code is grpc.StatusCode.OK:
            raise ValueError("a ServiceError cannot carry StatusCode.OK")
        if not _REASON_PATTERN.match(reason):
            raise ValueError(f"reason {reason!r} is not UPPER_SNAKE_CASE")
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.metadata: Mapping[str, str] = MappingProxyType(dict(metadata or {}))

    def __repr__(self) -> str:
        return f"ServiceError({self.code.name}, {self.reason!r}, {self.message!r})"

    def to_status(self, domain: str) -> grpc.Status:
        """The ``grpc.Status`` (code, message, trailers with the rich status) to abort with.

        The message and metadata are cut to the ``MAX_*`` bounds (a cut value ends with an
        ellipsis; entries past the first ``MAX_METADATA_ENTRIES`` are left out)."""
        metadata = {
            clip(key, MAX_METADATA_KEY_BYTES): clip(value, MAX_METADATA_VALUE_BYTES)
            for key, value in list(self.metadata.items())[:MAX_METADATA_ENTRIES]
        }
        info = error_details_pb2.ErrorInfo(reason=self.reason, domain=domain, metadata=metadata)
        detail = any_pb2.Any()
        detail.Pack(info)
        message = clip(self.message, MAX_MESSAGE_BYTES)
        status = status_pb2.Status(code=self.code.value[0], message=message, details=[detail])
        result: grpc.Status = rpc_status.to_status(status)
        return result


def clip(text: str, max_bytes: int) -> str:
    """``text`` if its UTF-8 form fits in ``max_bytes``, else its longest prefix that fits with
    an ellipsis appended."""
    encoded = text.encode("utf-8", "replace")
    if len(encoded) <= max_bytes:
        return text
    room = max_bytes - len(_ELLIPSIS.encode())
    # A cut inside a multi-byte character drops that character.
    return encoded[:room].decode("utf-8", "ignore") + _ELLIPSIS


def internal_error() -> ServiceError:
    """The generic error sent in place of anything unexpected."""
    return ServiceError(grpc.StatusCode.INTERNAL, Reason.INTERNAL, "internal error")


def to_service_error(exc: Exception, *, method: str) -> ServiceError:
    """Map an exception that escaped a handler of ``method`` to what the caller may see.

    A failed downstream call or an unreachable database keeps its availability meaning (so the
    caller may retry) but none of the downstream's message; everything unexpected is logged with
    its traceback.
    """
    if isinstance(exc, ServiceError):
        return exc
    if is_database_unavailable(exc):
        logger.warning(
            "database unavailable in %s", method, extra={"error_type": type(exc).__name__}
        )
        return ServiceError(
            grpc.StatusCode.UNAVAILABLE, Reason.DATABASE_UNAVAILABLE, "the database is unavailable"
        )
    if isinstance(exc, grpc.aio.AioRpcError):
        downstream = error_details(exc)
        if downstream.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            logger.warning(
                "dependency call failed in %s",
                method,
                extra={
                    "downstream_code": downstream.code.name,
                    "downstream_domain": downstream.domain,
                },
            )
            if downstream.code is grpc.StatusCode.UNAVAILABLE:
                return ServiceError(
                    grpc.StatusCode.UNAVAILABLE,
                    Reason.DEPENDENCY_UNAVAILABLE,
                    "a dependency is unavailable",
                )
            return ServiceError(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                Reason.DEADLINE_EXCEEDED,
                "the deadline was exceeded while waiting for a dependency",
            )
    logger.error("unhandled exception in %s", method, exc_info=exc)
    return internal_error()


@dataclass(frozen=True)
class ErrorDetails:
    """What a client learns from a failed call."""

    code: grpc.StatusCode
    message: str
    reason: str | None = None
    domain: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)


def error_details(exc: grpc.aio.AioRpcError) -> ErrorDetails:
    """Extract code, message and the ``ErrorInfo`` (if any) from a failed call."""
    code = exc.code()
    message = exc.details() or ""
    try:
        status = rpc_status.from_call(exc)
    except ValueError:
        # Trailers that contradict the status line are not trusted.
        status = None
    if status is not None:
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                return ErrorDetails(code, message, info.reason, info.domain, dict(info.metadata))
    return ErrorDetails(code, message)
