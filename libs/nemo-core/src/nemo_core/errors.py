"""The one error model: canonical status codes with ``google.rpc.ErrorInfo`` in the trailers.

Handlers raise :class:`ServiceError`; the server interceptor turns it into a
``google.rpc.Status`` (``grpc-status-details-bin``) whose ``ErrorInfo`` carries the stable reason,
the service name as domain, and string metadata. Every reason is a value of a proto enum: the
service's own ``nemo.<service>.v1.ErrorReason`` (raised through its ``errors`` module), or
``nemo.type.v1.ErrorReason`` for what this shared code raises, which every service's enum repeats.
Any other exception becomes ``INTERNAL`` with a generic message: internal text never reaches the
wire. Clients read errors back with :func:`error_details`, and another service's reason with
:func:`reason_from`, which checks the domain.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Generic, TypeVar

import grpc
import grpc.aio
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from nemo_protos.type.v1.error_reason_pb2 import ErrorReason

if TYPE_CHECKING:
    from google.protobuf.internal.enum_type_wrapper import _EnumTypeWrapper

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


_Reason = TypeVar("_Reason", bound=int)


class ServiceError(Exception):
    """An error a handler reports to its caller; ``message`` must be safe to show to them.

    ``reason`` is the name of a value of the raising service's ErrorReason enum: build errors
    with the service's :class:`ErrorFactory`, never from a string."""

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


class ErrorFactory(Generic[_Reason]):
    """Builds one service's errors from values of its generated ``ErrorReason`` enum: the only
    way a server makes a :class:`ServiceError`, so every reason it sends is a value of the enum."""

    def __init__(self, reasons: _EnumTypeWrapper[_Reason]) -> None:
        self._reasons = reasons

    def __call__(
        self,
        code: grpc.StatusCode,
        reason: _Reason,
        message: str,
        metadata: Mapping[str, str] | None = None,
    ) -> ServiceError:
        return ServiceError(code, self._reasons.Name(reason), message, metadata)


#: The errors the shared server code raises for any service (``nemo.type.v1.ErrorReason``).
shared_error = ErrorFactory(ErrorReason)


def internal_error() -> ServiceError:
    """The generic error sent in place of anything unexpected."""
    return shared_error(grpc.StatusCode.INTERNAL, ErrorReason.INTERNAL, "internal error")


@dataclass(frozen=True)
class _ExceptionMapping:
    matches: Callable[[Exception], bool]
    error: Callable[[], ServiceError]


_mappings: list[_ExceptionMapping] = []


def map_exceptions(matches: Callable[[Exception], bool], error: Callable[[], ServiceError]) -> None:
    """Have :func:`to_service_error` answer ``error()`` for an escaped exception that ``matches``.

    Registered by the module that owns a dependency when it is imported (the database helpers
    map an unreachable database), so this module imports none of them and a service without
    that dependency never ships it."""
    _mappings.append(_ExceptionMapping(matches, error))


def to_service_error(exc: Exception, *, method: str) -> ServiceError:
    """Map an exception that escaped a handler of ``method`` to what the caller may see.

    A failed downstream call or an unreachable database keeps its availability meaning (so the
    caller may retry) but none of the downstream's message; everything unexpected is logged with
    its traceback.
    """
    if isinstance(exc, ServiceError):
        return exc
    for mapping in _mappings:
        if mapping.matches(exc):
            mapped = mapping.error()
            logger.warning(
                "%s in %s", mapped.message, method, extra={"error_type": type(exc).__name__}
            )
            return mapped
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
                return shared_error(
                    grpc.StatusCode.UNAVAILABLE,
                    ErrorReason.DEPENDENCY_UNAVAILABLE,
                    "a dependency is unavailable",
                )
            return shared_error(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                ErrorReason.DEADLINE_EXCEEDED,
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


def reason_from(
    details: ErrorDetails, domain: str, reasons: _EnumTypeWrapper[_Reason]
) -> _Reason | None:
    """The reason of a failed call as a value of ``reasons``, the ErrorReason enum of the
    service whose ``domain`` it must come from; None when the error carries no ErrorInfo, comes
    from another domain (a proxy's, a dependency's), or names a reason the enum does not know."""
    if details.domain != domain or not details.reason:
        return None
    try:
        return reasons.Value(details.reason)
    except ValueError:
        return None
