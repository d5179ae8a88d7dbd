"""Fail-fast concurrency limits: a full limit refuses the call at once instead of queueing it.

A queue in front of something slow (a model provider, a database) only turns overload into
timeouts for everyone; a refusal (RESOURCE_EXHAUSTED, with the error the owner builds) lets the
caller back off or go elsewhere. Every user runs on one event loop with no await between the
check and the count, so no lock is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from nemo_core.errors import ServiceError


class InFlightLimit:
    """At most ``limit`` holders at once; one more gets the error ``refuse()`` builds."""

    def __init__(self, limit: int, refuse: Callable[[], ServiceError]) -> None:
        self._limit = limit
        self._refuse = refuse
        self._in_flight = 0

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Hold one place for the ``with`` block, or raise ``refuse()`` when all are held."""
        if self._in_flight >= self._limit:
            raise self._refuse()
        self._in_flight += 1
        try:
            yield
        finally:
            self._in_flight -= 1


class KeyedInFlightLimit:
    """At most ``limit`` holders at once for each key (a caller identity, say); one more gets the
    error ``refuse(key)`` builds. Keys with no holder take no memory."""

    def __init__(self, limit: int, refuse: Callable[[str], ServiceError]) -> None:
        self._limit = limit
        self._refuse = refuse
        self._in_flight: dict[str, int] = {}

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        """Hold one of ``key``'s places for the ``with`` block, or raise ``refuse(key)``."""
        count = self._in_flight.get(key, 0)
        if count >= self._limit:
            raise self._refuse(key)
        self._in_flight[key] = count + 1
        try:
            yield
        finally:
            remaining = self._in_flight[key] - 1
            if remaining:
                self._in_flight[key] = remaining
            else:
                del self._in_flight[key]
