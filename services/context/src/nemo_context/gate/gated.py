"""The gated result: a message that passed the identifier gate, and what a refusal does.

Only :func:`gate` constructs a :class:`Gated` value, and handlers that return learner data take it
from one, so an ungated bundle cannot be returned by construction rather than by discipline. A
blocked bundle raises INTERNAL / ``CONTEXT_LEAK_BLOCKED``; the event is logged and counted with
the rule it broke, never the data (:func:`record_block`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Final, Generic, TypeVar, final

import grpc
from google.protobuf.message import Message
from opentelemetry import metrics

from nemo_context.errors import service_error
from nemo_context.gate.circle import Circle
from nemo_context.gate.identifiers import NO_CIRCLE
from nemo_context.gate.walk import LeakFinding, find_leak
from nemo_core.errors import ServiceError
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason

__all__ = ["Gated", "gate", "leak_blocked", "record_block"]

# The gate's log name predates its split into modules; dashboards and alerts filter on it.
logger = logging.getLogger("nemo_context.gate")


_blocked_counter = metrics.get_meter("nemo_context.gate").create_counter(
    "nemo.context.gate.blocked",
    unit="{bundle}",
    description="Bundles the identifier gate refused to return.",
)

_M = TypeVar("_M", bound=Message)


def leak_blocked() -> ServiceError:
    """The error a blocked bundle becomes: nothing of the bundle, nothing of the data."""
    return service_error(
        grpc.StatusCode.INTERNAL,
        ErrorReason.CONTEXT_LEAK_BLOCKED,
        "the context could not be returned safely",
    )


_GATE_KEY: Final = object()


@final
class Gated(Generic[_M]):
    """A message that passed the identifier gate, frozen in the state it passed in.

    Only :func:`gate` (and :meth:`with_text`, which checks what it adds) builds one. Handlers
    that return learner data accept nothing else, so "no handler returns learner data that did
    not pass the gate" holds by construction. The gate checks a private copy, and
    :attr:`message` hands out copies, so neither the caller's original nor anything read from
    a Gated value can change what it holds.
    """

    __slots__ = ("_circle", "_forbidden_values", "_message")

    def __init__(
        self,
        message: _M,
        forbidden_values: frozenset[str],
        *,
        key: object,
        circle: Circle = NO_CIRCLE,
    ) -> None:
        if key is not _GATE_KEY:
            raise TypeError("only gate() creates Gated values")
        self._message = message
        self._forbidden_values = forbidden_values
        self._circle = circle

    @property
    def message(self) -> _M:
        """A copy of the gated message."""
        return _copy(self._message)

    def with_text(self, **fields: str) -> Gated[_M]:
        """A copy with top-level string ``fields`` set, for references added after gating (a
        snapshot's key and digest). The rest of the copy already passed; the new names and
        values are checked like any other, so the result is gated in its exact state."""
        finding = find_leak(fields, forbidden_values=self._forbidden_values, circle=self._circle)
        if finding is not None:
            record_block(finding)
            raise leak_blocked()
        copy = _copy(self._message)
        for name, value in fields.items():
            setattr(copy, name, value)
        return Gated(copy, self._forbidden_values, key=_GATE_KEY, circle=self._circle)


def _copy(message: _M) -> _M:
    copy = type(message)()
    copy.CopyFrom(message)
    return copy


def gate(
    message: _M, *, forbidden_values: Collection[str], circle: Circle = NO_CIRCLE
) -> Gated[_M]:
    """Pass ``message`` through the identifier gate or raise ``CONTEXT_LEAK_BLOCKED``.

    ``forbidden_values`` are the learner's raw id and the ids of the users linked to the learner
    (see ``repository.linked_identifiers``); ``circle`` the fingerprints of the identifiers
    around the learner (see :mod:`.circle`). What passes is a copy of ``message`` as it is now;
    changing ``message`` afterwards changes nothing that is returned.
    """
    values = frozenset(forbidden_values) if not isinstance(forbidden_values, str) else None
    if values is None:
        raise TypeError("forbidden_values must be a collection of strings, not a string")
    checked = _copy(message)
    finding = find_leak(checked, forbidden_values=values, circle=circle)
    if finding is not None:
        record_block(finding)
        raise leak_blocked()
    return Gated(checked, values, key=_GATE_KEY, circle=circle)


def record_block(finding: LeakFinding) -> None:
    """Log and count a blocked bundle; the finding names the rule and type, never the data."""
    _blocked_counter.add(1, {"rule": finding.rule})
    logger.error(
        "identifier gate blocked a bundle",
        extra={"gate_rule": finding.rule, "gate_location": finding.location},
    )
