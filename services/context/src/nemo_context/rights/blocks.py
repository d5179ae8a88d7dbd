"""Restricted and erased learners: the context service refuses to process them.

A restriction (a family asked that processing stop) and an erasure both leave a row in
``rights.blocks``, keyed by the learner's subject. Every build, conversation build and turn of
a blocked learner is refused with a precise error, before anything is read, and ``GetSnapshot``
of an erased learner's snapshot says so instead of "not found".

The table is small and read often, so each process keeps it in memory and reads it again once
it is older than ``max_age_seconds`` (:data:`BLOCKS_REFRESH_SECONDS`): a block applies on every
replica within that time, and an erasure waits that long before it destroys anything.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final

import grpc

from nemo_context.errors import service_error
from nemo_context.snapshots.keys import MasterKey
from nemo_core.db import Pool
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason

RESTRICTED: Final = "restricted"
ERASED: Final = "erased"

BLOCKS_REFRESH_SECONDS: Final = 2.0
"""How old a replica's copy of the blocks may be: a build checked later than this after a block
was committed is refused. ``nemo rights erase`` waits this long after blocking the learner, so
no build starts for it once its key and snapshots are being destroyed."""


class ProcessingBlocks:
    """The blocks of ``rights.blocks``, read at most every ``max_age_seconds``."""

    def __init__(
        self,
        pool: Pool,
        master: MasterKey,
        *,
        max_age_seconds: float = BLOCKS_REFRESH_SECONDS,
        timer: Callable[[], float] = time.monotonic,
        on_erased: Callable[[str], None] = lambda _subject: None,
    ) -> None:
        self._pool = pool
        self._master = master
        self._max_age = max_age_seconds
        self._timer = timer
        self._on_erased = on_erased
        self._kinds: Mapping[str, str] = MappingProxyType({})
        self._erased_refs: frozenset[str] = frozenset()
        self._read_at: float | None = None
        self._lock = asyncio.Lock()

    async def _fresh(self) -> None:
        if self._read_at is not None and self._timer() - self._read_at < self._max_age:
            return
        async with self._lock:
            if self._read_at is not None and self._timer() - self._read_at < self._max_age:
                return
            # Timed from before the read: the copy is at least as fresh as its start.
            started = self._timer()
            async with self._pool.acquire() as conn:
                rows = await conn.fetch("SELECT subject, kind, ref_digests FROM rights.blocks")
            kinds = {row["subject"]: row["kind"] for row in rows}
            for subject, kind in kinds.items():
                if kind == ERASED and self._kinds.get(subject) != ERASED:
                    self._on_erased(subject)
            self._kinds = MappingProxyType(kinds)
            self._erased_refs = frozenset(
                digest for row in rows if row["kind"] == ERASED for digest in row["ref_digests"]
            )
            self._read_at = started

    async def any(self) -> bool:
        """Whether any learner is blocked (most of the time none is)."""
        await self._fresh()
        return bool(self._kinds)

    async def check(self, learner_id: str) -> None:
        """Refuse a learner whose processing is restricted or who was erased.

        FAILED_PRECONDITION / ``LEARNER_RESTRICTED``, NOT_FOUND / ``LEARNER_ERASED``.
        """
        await self._fresh()
        if not self._kinds:
            return
        kind = self._kinds.get(self._master.subject(learner_id))
        if kind == RESTRICTED:
            raise service_error(
                grpc.StatusCode.FAILED_PRECONDITION,
                ErrorReason.LEARNER_RESTRICTED,
                "processing of this learner's data is restricted at the family's request",
            )
        if kind == ERASED:
            raise service_error(
                grpc.StatusCode.NOT_FOUND,
                ErrorReason.LEARNER_ERASED,
                "this learner's data was erased at the family's request",
            )

    async def erased_ref(self, learner_ref: str) -> bool:
        """Whether ``learner_ref`` was a ref of an erased learner."""
        await self._fresh()
        return self._master.ref_digest(learner_ref) in self._erased_refs
