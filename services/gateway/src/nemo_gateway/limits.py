"""Concurrency limits: requests to the provider, and RPCs per caller identity.

A full limit fails the call at once with RESOURCE_EXHAUSTED instead of queueing it: a queue in
front of a slow provider only turns overload into timeouts for everyone.
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
        self.in_flight = 0

    @contextmanager
    def hold(self) -> Iterator[None]:
        # One event loop per process and no await in between: the check and the increment
        # cannot interleave with another task.
        if self.in_flight >= self._limit:
            raise self._refuse()
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1


class PerCallerLimit:
    """At most ``limit`` RPCs in flight for each caller identity."""

    def __init__(self, limit: int, refuse: Callable[[str], ServiceError]) -> None:
        self._limit = limit
        self._refuse = refuse
        self._in_flight: dict[str, int] = {}

    @contextmanager
    def hold(self, caller: str) -> Iterator[None]:
        count = self._in_flight.get(caller, 0)
        if count >= self._limit:
            raise self._refuse(caller)
        self._in_flight[caller] = count + 1
        try:
            yield
        finally:
            remaining = self._in_flight[caller] - 1
            if remaining:
                self._in_flight[caller] = remaining
            else:
                del self._in_flight[caller]
