"""Digest rows of concurrent snapshots: each caller's row is committed before it returns, rows
that arrive together share one INSERT, and one bad row fails alone."""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest
from asyncpg.connection import LoggedQuery

from nemo_context.snapshots.digests import DigestRecorder, DigestRow
from nemo_context.snapshots.store import snapshot_key
from nemo_core.db import Pool, init_connection


@pytest.fixture
async def recorded_pool(context_dsn: str) -> AsyncIterator[tuple[Pool, list[LoggedQuery]]]:
    """A pool as nemo_context that records every statement it runs."""
    statements: list[LoggedQuery] = []

    async def init(conn: asyncpg.Connection[asyncpg.Record]) -> None:
        await init_connection(conn)
        conn.add_query_logger(statements.append)

    pool = await asyncpg.create_pool(context_dsn, min_size=1, max_size=2, init=init)
    try:
        yield pool, statements
    finally:
        await pool.close()


def new_row(learner_ref: str) -> DigestRow:
    created_at = datetime.now(UTC)
    return DigestRow(
        input_ref=snapshot_key(learner_ref, created_at, uuid.uuid4()),
        learner_ref=learner_ref,
        sha256=secrets.token_hex(32),
        size_bytes=100,
        created_at=created_at,
    )


async def stored_rows(pool: Pool, learner_ref: str) -> set[tuple[str, str]]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT input_ref, sha256 FROM learning.context_snapshots WHERE learner_ref = $1",
            learner_ref,
        )
    return {(row["input_ref"], row["sha256"]) for row in rows}


def inserts(statements: list[LoggedQuery]) -> list[LoggedQuery]:
    return [s for s in statements if "INSERT INTO learning.context_snapshots" in s.query]


async def test_concurrent_rows_are_all_committed_in_fewer_statements(
    recorded_pool: tuple[Pool, list[LoggedQuery]],
) -> None:
    pool, statements = recorded_pool
    recorder = DigestRecorder(pool)
    learner_ref = f"nemo_{secrets.token_hex(6)}"
    rows = [new_row(learner_ref) for _ in range(20)]

    await asyncio.gather(*(recorder.record(row) for row in rows))

    assert await stored_rows(pool, learner_ref) == {(row.input_ref, row.sha256) for row in rows}
    assert 1 <= len(inserts(statements)) < len(rows)


async def test_a_single_row_is_committed_when_record_returns(
    recorded_pool: tuple[Pool, list[LoggedQuery]],
) -> None:
    pool, _ = recorded_pool
    recorder = DigestRecorder(pool)
    learner_ref = f"nemo_{secrets.token_hex(6)}"
    row = new_row(learner_ref)

    await recorder.record(row)

    assert await stored_rows(pool, learner_ref) == {(row.input_ref, row.sha256)}


async def test_a_bad_row_fails_alone_and_the_rest_of_its_batch_is_committed(
    recorded_pool: tuple[Pool, list[LoggedQuery]],
) -> None:
    pool, _ = recorded_pool
    recorder = DigestRecorder(pool)
    learner_ref = f"nemo_{secrets.token_hex(6)}"
    first = new_row(learner_ref)
    await recorder.record(first)
    good = [new_row(learner_ref) for _ in range(3)]
    duplicate = DigestRow(first.input_ref, learner_ref, secrets.token_hex(32), 5, first.created_at)

    results = await asyncio.gather(
        *(recorder.record(row) for row in [good[0], duplicate, *good[1:]]),
        return_exceptions=True,
    )

    assert results[0] is None
    assert results[2:] == [None, None]
    assert isinstance(results[1], asyncpg.UniqueViolationError)
    expected = {(row.input_ref, row.sha256) for row in [first, *good]}
    assert await stored_rows(pool, learner_ref) == expected


async def test_a_caller_that_gives_up_does_not_stop_the_others(
    recorded_pool: tuple[Pool, list[LoggedQuery]],
) -> None:
    pool, _ = recorded_pool
    recorder = DigestRecorder(pool)
    learner_ref = f"nemo_{secrets.token_hex(6)}"
    rows = [new_row(learner_ref) for _ in range(3)]
    tasks = [asyncio.create_task(recorder.record(row)) for row in rows]
    await asyncio.sleep(0)  # every task has handed in its row
    tasks[0].cancel()  # e.g. its write timeout expired

    done = await asyncio.gather(*tasks[1:])
    await recorder.aclose()

    assert done == [None, None]
    assert {(row.input_ref, row.sha256) for row in rows[1:]} <= await stored_rows(pool, learner_ref)
