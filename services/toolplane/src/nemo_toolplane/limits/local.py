"""Token buckets keyed by agent or client address, in process memory.

Each replica limits on its own: with N replicas behind a load balancer an agent gets up to N times
the configured rate. That bounds a runaway agent or a token-guessing client cheaply, without a
shared store on the request path.

Memory is bounded by ``max_keys`` buckets: past it, the least recently used bucket is evicted, in
constant time. Eviction forgets what a source has spent, so a source whose bucket was evicted
starts again from a full bucket: it can get at most one burst beyond its limit per eviction, and
only after ``max_keys`` other sources were seen since its own last request. The least recently
used bucket is also the one that has had longest to refill, so it is the one whose loss gives the
least away. Size ``max_keys`` above the number of sources active within one refill period
(``burst / rate``) and every evicted bucket has refilled: eviction then gives nothing away.

A limiter that counts failures (authentication) asks :meth:`KeyedRateLimiter.exhausted` about
every source but only charges the failing ones: asking never creates a bucket, so sources that
only ever succeed take no memory.
"""

from __future__ import annotations

import time
from collections import OrderedDict
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
        if rate <= 0 or burst < 1 or max_keys < 1:
            raise ValueError("rate must be positive, burst and max_keys at least 1")
        self._rate = rate
        self._burst = float(burst)
        self._max_keys = max_keys
        self._clock = clock
        # Least recently used first.
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def _existing(self, key: str, now: float) -> _Bucket | None:
        """The key's bucket refilled up to ``now`` and marked as most recently used; None when
        the key has none (which is the same as a full bucket)."""
        bucket = self._buckets.get(key)
        if bucket is None:
            return None
        self._buckets.move_to_end(key)
        bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.updated) * self._rate)
        bucket.updated = now
        return bucket

    def acquire(self, key: str) -> bool:
        """Take one token for ``key``; False when its bucket is empty."""
        now = self._clock()
        bucket = self._existing(key, now)
        if bucket is None:
            if len(self._buckets) >= self._max_keys:
                self._buckets.popitem(last=False)
            self._buckets[key] = _Bucket(self._burst - 1, now)
            return True
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def exhausted(self, key: str) -> bool:
        """Whether ``key`` has no token left, without taking one (or creating a bucket)."""
        bucket = self._existing(key, self._clock())
        return bucket is not None and bucket.tokens < 1

    def retry_after(self, key: str) -> float:
        """Seconds until ``key`` has a token again (0 when it has one)."""
        bucket = self._existing(key, self._clock())
        if bucket is None:
            return 0.0
        return max(0.0, (1 - bucket.tokens) / self._rate)
