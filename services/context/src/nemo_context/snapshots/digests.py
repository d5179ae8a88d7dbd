"""Records snapshot digests in PostgreSQL, the digests of concurrent builds in one statement.

Every persisted build must have its digest recorded before its ``input_ref`` is returned, and a
round trip to PostgreSQL costs far more than the row. Rows are therefore group-committed (see
``coalescing``): under load a build pays for a fraction of a statement, alone it pays for one.
When a shared INSERT fails, its rows are retried one by one, so one bad row never fails the
others.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from nemo_context.coalescing import Coalescer, Outcomes
from nemo_core.db import Pool, untraced

_INSERT_ROWS: Final = """
    INSERT INTO learning.context_snapshots
        (input_ref, learner_ref, sha256, size_bytes, created_at, kind, key_id)
    SELECT * FROM unnest(
        $1::text[], $2::text[], $3::text[], $4::integer[], $5::timestamptz[], $6::text[],
        $7::uuid[]
    )
"""


@dataclass(frozen=True)
class DigestRow:
    """One snapshot's row of ``learning.context_snapshots``."""

    input_ref: str
    learner_ref: str
    sha256: str
    size_bytes: int
    created_at: datetime
    kind: str = "context"
    """``context`` (a BuildContext bundle) or ``conversation`` (a conversation bundle)."""
    key_id: uuid.UUID | None = None
    """The learner's data key the object is sealed under."""


class DigestRecorder:
    """Inserts digest rows, batching the rows of concurrent callers."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._batches = Coalescer(self._insert)

    async def record(self, row: DigestRow) -> None:
        """Insert ``row``; returns once it is committed, raises what its INSERT raised."""
        await self._batches.submit(row)

    async def _insert(self, rows: list[DigestRow]) -> Outcomes:
        try:
            await self._execute(rows)
        except Exception as error:
            if len(rows) == 1:
                return [error]
            return [await self._insert_alone(row) for row in rows]
        return [None] * len(rows)

    async def _insert_alone(self, row: DigestRow) -> Exception | None:
        try:
            await self._execute([row])
        except Exception as error:
            return error
        return None

    async def _execute(self, rows: list[DigestRow]) -> None:
        # Untraced: a batch holds the rows of many builds, and its span would hang under
        # whichever build happened to start the batch (failures reach each build's caller).
        async with self._pool.acquire() as conn:
            with untraced():
                await conn.execute(
                    _INSERT_ROWS,
                    [row.input_ref for row in rows],
                    [row.learner_ref for row in rows],
                    [row.sha256 for row in rows],
                    [row.size_bytes for row in rows],
                    [row.created_at for row in rows],
                    [row.kind for row in rows],
                    [row.key_id for row in rows],
                )

    async def aclose(self) -> None:
        """Wait for the rows already handed in."""
        await self._batches.aclose()
