"""Token buckets keyed by agent or client address, in process memory.

Each replica limits on its own: with N replicas behind a load balancer an agent gets up to N times
the configured rate. That bounds a runaway agent or a token-guessing client cheaply, without a
shared store on the request path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Bucket:
    tokens: float
    updated: float


class KeyedRateLimiter:
    """``rate`` tokens per second per key, at most ``burst`` saved up."""

    def __init__(
        self,
        rate: float,
        burst: float,
        *,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be positive and burst at least 1")
        self._rate = rate
        self._burst = float(burst)
        self._max_keys = max_keys
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def _bucket(self, key: str, now: float) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self._max_keys:
                self._forget_full_buckets(now)
            bucket = self._buckets[key] = _Bucket(self._burst, now)
            return bucket
        bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.updated) * self._rate)
        bucket.updated = now
        return bucket

    def _forget_full_buckets(self, now: float) -> None:
        # A bucket that has refilled is the same as no bucket; dropping those bounds memory.
        refill = self._burst / self._rate
        self._buckets = {
            key: bucket for key, bucket in self._buckets.items() if now - bucket.updated < refill
        }

    def acquire(self, key: str) -> bool:
        """Take one token for ``key``; False when its bucket is empty."""
        bucket = self._bucket(key, self._clock())
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def exhausted(self, key: str) -> bool:
        """Whether ``key`` has no token left, without taking one."""
        return self._bucket(key, self._clock()).tokens < 1

    def retry_after(self, key: str) -> float:
        """Seconds until ``key`` has a token again (0 when it has one)."""
        bucket = self._bucket(key, self._clock())
        return max(0.0, (1 - bucket.tokens) / self._rate)
