"""Fixtures of the tests through PgBouncer: the context role's connections and pool through the
session's pooler (``pgbouncer``, in ``tests/conftest.py``), with transaction pooling on as the
services set it. The isolation tests of the context service and the access model run here again
on them (``test_isolation.py``), under the names those tests ask for."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from nemo_core.db import Pool, connect, create_pool
from nemo_testing.pgbouncer import PgBouncer


@pytest.fixture(scope="session")
def pooled_context_dsn(pgbouncer: PgBouncer, context_dsn: str) -> str:
    """The context role on the session database, through the pooler."""
    return pgbouncer.pooled(context_dsn)


@pytest.fixture(scope="session")
async def context_pool(pooled_context_dsn: str) -> AsyncIterator[Pool]:
    """The context service's pool, through the pooler (more clients than server connections)."""
    pool = await create_pool(pooled_context_dsn, max_size=4, transaction_pooling=True)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture
async def context(pooled_context_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """One connection as the context role, through the pooler."""
    conn = await connect(pooled_context_dsn, transaction_pooling=True)
    yield conn
    await conn.close()
