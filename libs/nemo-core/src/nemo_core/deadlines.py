"""Deadlines: required on methods that fan out, and propagated to the calls they make.

The server interceptor records the incoming deadline of each RPC; code that calls another service
passes ``timeout=downstream_timeout()`` so the downstream call ends before the caller gives up.
"""

from __future__ import annotations

import time
from contextvars import ContextVar

import grpc

from nemo_core.errors import ServiceError, shared_error
from nemo_protos.type.v1.error_reason_pb2 import ErrorReason

DEFAULT_MARGIN_SECONDS = 0.05
"""Time kept back for the reply to travel back to the caller."""

_deadline: ContextVar[float | None] = ContextVar("nemo_deadline", default=None)


def deadline_required() -> ServiceError:
    """Error for a call to a fan-out method made without a deadline."""
    return shared_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        ErrorReason.DEADLINE_REQUIRED,
        "this method requires a deadline (set a timeout on the call)",
    )


def set_time_remaining(seconds: float | None) -> None:
    """Record the current RPC's remaining time (done by the server interceptor)."""
    _deadline.set(None if seconds is None else time.monotonic() + seconds)


def downstream_timeout(margin: float = DEFAULT_MARGIN_SECONDS) -> float | None:
    """Seconds a downstream call may take: the current RPC's remaining time minus ``margin``.

    None when the current RPC has no deadline (or when called outside an RPC). Raises
    ``DEADLINE_EXCEEDED`` when nothing is left, rather than starting a call that cannot finish.
    """
    deadline = _deadline.get()
    if deadline is None:
        return None
    remaining = deadline - time.monotonic() - margin
    if remaining <= 0:
        raise shared_error(
            grpc.StatusCode.DEADLINE_EXCEEDED,
            ErrorReason.DEADLINE_EXCEEDED,
            "the deadline leaves no time for a dependency call",
        )
    return remaining
