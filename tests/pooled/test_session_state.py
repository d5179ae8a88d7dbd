"""Nothing of one client's session reaches another through PgBouncer in transaction mode.

Behind a pooler with one server connection, every client of the context role takes turns on the
same PostgreSQL session (the tests check its backend pid). The learner binding is set with
``set_config(..., true)``, local to the transaction: whatever sequence of bindings, commits,
rollbacks and failures the clients go through, each transaction sees exactly the learners it
bound, and a client that binds nothing sees no learner row. A session-level setting, by
contrast, does cross to the next client, which is why no binding may be one. And asyncpg's
statement cache, off with ``transaction_pooling``, would otherwise collide on the shared session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_core.db import LEARNER_IDS_SETTING, connect, learner_transaction
from nemo_testing.pgbouncer import PgBouncer
from tests.conftest import PoolerFactory

LEARNERS = ("L-2041-1", "L-2041-2", "L-2041-3", "L-2041-10", "L-2041-404")
CLIENTS = 3
MASTERY = "SELECT DISTINCT learner_id FROM learning.mastery"


@pytest.fixture(scope="module")
async def one_connection_pooler(start_pooler: PoolerFactory) -> PgBouncer:
    """A pooler of its own with a single server connection per database and role."""
    return await start_pooler(1)


@pytest.fixture(scope="module")
async def clients(
    one_connection_pooler: PgBouncer, context_dsn: str
) -> AsyncIterator[list[asyncpg.Connection]]:
    """Clients of the context role through that pooler, each its own pooler connection."""
    dsn = one_connection_pooler.pooled(context_dsn)
    async with AsyncExitStack() as stack:
        conns = []
        for _ in range(CLIENTS):
            conn = await connect(dsn, transaction_pooling=True)
            stack.push_async_callback(conn.close)
            conns.append(conn)
        yield conns


@pytest.fixture(scope="module")
async def mastery_of(owner_dsn: str) -> dict[str, str]:
    """Which of :data:`LEARNERS` have mastery rows (read as the owner, whom RLS does not bind)."""
    conn = await connect(owner_dsn)
    try:
        rows = await conn.fetch(
            "SELECT DISTINCT learner_id FROM learning.mastery WHERE learner_id = ANY($1)",
            list(LEARNERS),
        )
    finally:
        await conn.close()
    return {row["learner_id"]: row["learner_id"] for row in rows}


@dataclass(frozen=True)
class Step:
    client: int
    bound: frozenset[str]
    ending: str  # commit, rollback, or error (a failed statement inside the transaction)


class _Abandoned(Exception):
    """Raised inside a transaction to roll it back."""


_STEPS = st.lists(
    st.builds(
        Step,
        client=st.integers(0, CLIENTS - 1),
        bound=st.frozensets(st.sampled_from(LEARNERS), max_size=3),
        ending=st.sampled_from(["commit", "rollback", "error"]),
    ),
    min_size=1,
    max_size=12,
)


async def _session(conn: asyncpg.Connection) -> tuple[int, str | None, set[str]]:
    """The server session a statement of ``conn`` runs in, its binding, and the learners whose
    rows it sees."""
    async with conn.transaction(readonly=True):
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        binding = await conn.fetchval("SELECT current_setting($1, true)", LEARNER_IDS_SETTING)
        seen = {row["learner_id"] for row in await conn.fetch(MASTERY)}
    return pid, binding, seen


async def _run(conn: asyncpg.Connection, step: Step) -> tuple[int, set[str]]:
    """One learner transaction of ``step``: its server pid and the learners it saw."""
    try:
        async with learner_transaction(conn, sorted(step.bound), readonly=True):
            pid = await conn.fetchval("SELECT pg_backend_pid()")
            seen = {row["learner_id"] for row in await conn.fetch(MASTERY)}
            if step.ending == "error":
                await conn.fetchval("SELECT 1 / 0")
            if step.ending == "rollback":
                raise _Abandoned
    except (_Abandoned, asyncpg.DivisionByZeroError):
        pass
    return pid, seen


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=_STEPS)
async def test_each_transaction_sees_its_own_binding_and_nothing_crosses_clients(
    clients: list[asyncpg.Connection], mastery_of: dict[str, str], steps: list[Step]
) -> None:
    pids = set()
    for step in steps:
        pid, seen = await _run(clients[step.client], step)
        pids.add(pid)
        assert seen == {learner for learner in step.bound if learner in mastery_of}
        # Every client, the one that just bound included, is back to nothing bound.
        for conn in clients:
            pid, binding, unbound_seen = await _session(conn)
            pids.add(pid)
            assert not binding
            assert unbound_seen == set()
    # One PostgreSQL session served every client: the binding had every chance to cross.
    assert len(pids) == 1


async def test_a_session_level_setting_would_cross_clients(
    clients: list[asyncpg.Connection], mastery_of: dict[str, str]
) -> None:
    first, second = clients[0], clients[1]
    learner = sorted(mastery_of)[0]
    await first.execute(f"SELECT set_config('{LEARNER_IDS_SETTING}', '{learner}', false)")
    try:
        _, binding, seen = await _session(second)
    finally:
        await second.execute(f"RESET {LEARNER_IDS_SETTING}")
    assert (binding, seen) == (learner, {learner})
    assert await _session(first) == await _session(second)


@pytest.fixture(scope="module")
async def two_connection_pooler(start_pooler: PoolerFactory) -> PgBouncer:
    """A pooler of its own with two server connections per database and role."""
    return await start_pooler(2)


@pytest.mark.parametrize("transaction_pooling", [True, False])
async def test_the_statement_cache_must_be_off_behind_the_pooler(
    two_connection_pooler: PgBouncer, context_dsn: str, transaction_pooling: bool
) -> None:
    dsn = two_connection_pooler.pooled(context_dsn)
    first, second = [await connect(dsn, transaction_pooling=transaction_pooling) for _ in "ab"]
    query = "SELECT $1::int + 1"
    try:
        assert await first.fetchval(query, 1) == 2
        # The other client holds the server connection the statement was prepared on...
        async with second.transaction():
            await second.fetchval("SELECT 1")
            # ...so the next execution runs on the pooler's second one.
            try:
                outcome: object = await first.fetchval(query, 2)
            except asyncpg.PostgresError as error:
                outcome = type(error)
    finally:
        await first.close()
        await second.close()
    expected = 3 if transaction_pooling else asyncpg.InvalidSQLStatementNameError
    assert outcome == expected
