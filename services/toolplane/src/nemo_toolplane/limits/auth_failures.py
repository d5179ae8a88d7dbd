"""Failed authentications per client address, counted across every replica and both edges.

Only failures are held against an address: a valid token is never refused for its address,
because agents behind one shared egress must not be locked out by one stale token. Each failure
takes a token from the address's shared bucket (``per_minute`` a minute, as many at once); a
failure that finds the bucket empty is answered "too many" (429, RESOURCE_EXHAUSTED) instead of
"unauthenticated". When the shared store does not answer in time, this replica's own bucket
decides (the failure is not a write, and an attacker gains at most the replica count in rate).
"""

from __future__ import annotations

import logging

from nemo_toolplane.limits.calls import store_unavailable
from nemo_toolplane.limits.local import KeyedRateLimiter
from nemo_toolplane.limits.shared import Bucket, BucketsUnavailable, SharedBuckets, bucket_key

logger = logging.getLogger(__name__)


class FailedAuthentications:
    """Charges one failure per call to :meth:`charge`; says when an address has had enough."""

    def __init__(self, shared: SharedBuckets, per_minute: int) -> None:
        self._shared = shared
        self._rate = per_minute / 60
        self._burst = per_minute
        self._local = KeyedRateLimiter(self._rate, per_minute)

    async def charge(self, source: str) -> float | None:
        """Count one failed authentication from ``source``; None while it is within its
        limit, else the seconds until it is again."""
        key = bucket_key("authentication", source)
        try:
            taken = await self._shared.take([Bucket(key, self._rate, self._burst)])
        except BucketsUnavailable as error:
            store_unavailable.add(1, {"nemo.limiter": "authentication"})
            logger.warning("authentication limits store unavailable", extra={"error": str(error)})
            if self._local.exhausted(key):
                return self._local.retry_after(key)
            self._local.acquire(key)
            return None
        return None if taken.admitted else taken.wait
