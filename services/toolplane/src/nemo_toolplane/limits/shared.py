"""Token buckets in PostgreSQL, shared by every tool plane replica (migration 0018).

One statement per decision: :meth:`SharedBuckets.take` takes a token from each of a call's
buckets, or from none when one is empty, under row locks, on the database's clock. The limits
thus hold for the sum of all replicas, whatever the load balancer does. A decision is bounded in
time (``timeout``): a store that is down or slow raises :class:`BucketsUnavailable`, and the
caller decides what that means (:mod:`nemo_toolplane.limits.calls`). Rows of buckets that have
refilled completely are deleted in the background (:meth:`SharedBuckets.purge_until`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from nemo_core.db import Connection, Pool

logger = logging.getLogger(__name__)

_TAKE = "SELECT wait, refused FROM toolplane.take_tokens($1::text[], $2::float8[], $3::float8[])"
_PURGE = "DELETE FROM toolplane.rate_buckets WHERE full_at <= clock_timestamp()"
PURGE_SECONDS = 60.0


@dataclass(frozen=True)
class Bucket:
    """One bucket a decision charges: ``rate`` tokens per second, at most ``burst`` saved up."""

    key: str
    rate: float
    burst: float


def bucket_key(*parts: str) -> str:
    """An unambiguous key of parts that may hold any character (ids, tool patterns)."""
    return json.dumps(parts, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Taken:
    """A decision: ``wait`` is 0 when a token was taken from every bucket; else the seconds
    until each has one again, and ``refused`` the key of the bucket that needs longest."""

    wait: float
    refused: str | None = None

    @property
    def admitted(self) -> bool:
        return self.wait <= 0


class BucketsUnavailable(Exception):
    """The store did not decide in time (down, slow, or refusing the statement)."""


class SharedBuckets:
    """Takes tokens from buckets every replica sees."""

    def __init__(self, pool: Pool, *, timeout: float) -> None:
        self._pool = pool
        self._timeout = timeout

    async def take(self, buckets: Sequence[Bucket]) -> Taken:
        """Take one token from each of ``buckets`` or from none (:class:`BucketsUnavailable`
        when the store does not answer within the timeout)."""
        if not buckets:
            return Taken(0.0)
        try:
            async with asyncio.timeout(self._timeout):
                async with self._pool.acquire() as conn:
                    return await self.take_in(conn, buckets)
        except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            raise BucketsUnavailable(type(error).__name__) from error

    @staticmethod
    async def take_in(conn: Connection, buckets: Sequence[Bucket]) -> Taken:
        """:meth:`take` on ``conn``, inside the caller's transaction when it has one (a
        rollback gives the tokens back); errors are the caller's."""
        unique = {bucket.key: bucket for bucket in buckets}
        row = await conn.fetchrow(
            _TAKE,
            list(unique),
            [bucket.rate for bucket in unique.values()],
            [float(bucket.burst) for bucket in unique.values()],
        )
        assert row is not None  # noqa: S101  a function with OUT parameters returns one row
        return Taken(float(row["wait"]), row["refused"])

    async def purge_until(self, stopping: asyncio.Event) -> None:
        """Background task: delete the rows of full buckets every minute or so (with jitter,
        so replicas do not purge in step)."""
        while not stopping.is_set():
            delay = PURGE_SECONDS * random.uniform(0.5, 1.5)  # noqa: S311  jitter, not a secret
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), delay)
            if stopping.is_set():
                return
            try:
                async with asyncio.timeout(self._timeout * 4):
                    await self._pool.execute(_PURGE)
            except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                logger.warning("rate bucket purge failed; the next one retries")
