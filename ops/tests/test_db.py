"""The shared database helpers of nemo_core.db, against the session's real database."""

from __future__ import annotations

import asyncpg
import pytest

from nemo_core.db import (
    LEARNER_IDS_SETTING,
    NestedLearnerTransactionError,
    connect,
    create_pool,
    dsn_with,
    learner_transaction,
)

_MASTERY_OWNERS = "SELECT DISTINCT learner_id FROM learning.mastery"


async def test_pooled_binding_does_not_outlive_its_transaction(context_dsn: str) -> None:
    # One connection, so the second block necessarily reuses the connection the first bound.
    pool = await create_pool(context_dsn, min_size=1, max_size=1)
    try:
        async with learner_transaction(pool, ["L-2041-1"], readonly=True) as conn:
            bound = await conn.fetchval("SELECT count(*) FROM learning.mastery")
        async with pool.acquire() as conn:
            after = await conn.fetchval("SELECT count(*) FROM learning.mastery")
        async with learner_transaction(pool, ["L-2041-3"]) as conn:
            other = {row[0] for row in await conn.fetch("SELECT learner_id FROM learning.goals")}
    finally:
        await pool.close()
    assert bound >= 13
    assert after == 0
    assert other == {"L-2041-3"}


@pytest.mark.parametrize(
    "session_binding",
    [
        f"SELECT set_config('{LEARNER_IDS_SETTING}', 'L-2041-1', false)",
        f"SET {LEARNER_IDS_SETTING} = 'L-2041-1'",
    ],
)
async def test_a_session_level_binding_never_reaches_the_next_user(
    context_dsn: str, session_binding: str
) -> None:
    # One connection: whoever comes next reuses the one L-2041-1's code bound for the session,
    # once inside a learner transaction and once outside any.
    pool = await create_pool(context_dsn, min_size=1, max_size=1)
    try:
        async with learner_transaction(pool, ["L-2041-1"]) as conn:
            await conn.execute(session_binding)
        async with pool.acquire() as conn:
            unbound = await conn.fetch(_MASTERY_OWNERS)
            await conn.execute(session_binding)
        async with learner_transaction(pool, ["L-2041-2"], readonly=True) as conn:
            other = {row[0] for row in await conn.fetch(_MASTERY_OWNERS)}
        async with pool.acquire() as conn:
            after = await conn.fetch(_MASTERY_OWNERS)
    finally:
        await pool.close()
    assert unbound == []
    assert other == {"L-2041-2"}
    assert after == []


async def test_a_pool_of_a_role_without_learner_rows_keeps_its_session_and_reads_none(
    toolplane_dsn: str,
) -> None:
    # No reset on release (the next user sees the session setting), and the reason it needs
    # none: the role reads no learner row, bound or not.
    pool = await create_pool(toolplane_dsn, min_size=1, max_size=1, reads_learner_rows=False)
    try:
        async with pool.acquire() as conn:
            await conn.execute(f"SET {LEARNER_IDS_SETTING} = 'L-2041-1'")
        async with pool.acquire() as conn:
            kept = await conn.fetchval(f"SELECT current_setting('{LEARNER_IDS_SETTING}', true)")
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.fetch(_MASTERY_OWNERS)
    finally:
        await pool.close()
    assert kept == "L-2041-1"


async def test_a_nested_learner_transaction_is_refused_and_the_outer_binding_kept(
    context_dsn: str,
) -> None:
    pool = await create_pool(context_dsn, min_size=1, max_size=1)
    try:
        async with learner_transaction(pool, ["L-2041-1"], readonly=True) as conn:
            with pytest.raises(NestedLearnerTransactionError):
                async with learner_transaction(conn, ["L-2041-2"], readonly=True):
                    pytest.fail("a nested learner transaction ran")
            owners = {row[0] for row in await conn.fetch(_MASTERY_OWNERS)}
        # The refused nesting left the connection usable for the next learner.
        async with learner_transaction(pool, ["L-2041-2"], readonly=True) as conn:
            next_owners = {row[0] for row in await conn.fetch(_MASTERY_OWNERS)}
    finally:
        await pool.close()
    assert owners == {"L-2041-1"}
    assert next_owners == {"L-2041-2"}


async def test_readonly_transaction_refuses_writes(context_dsn: str) -> None:
    conn = await connect(context_dsn)
    try:
        with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
            async with learner_transaction(conn, ["L-2041-1"], readonly=True):
                await conn.execute(
                    "UPDATE learning.chat_sessions SET status = 'closed' WHERE id = 'CS-L1-TUTOR'"
                )
    finally:
        await conn.close()


@pytest.mark.parametrize("learner_ids", [["L-2041-1,L-2041-2"], [""], "L-2041-1"])
async def test_bindings_that_could_widen_are_rejected(
    context_dsn: str, learner_ids: list[str] | str
) -> None:
    conn = await connect(context_dsn)
    try:
        with pytest.raises((ValueError, TypeError)):
            async with learner_transaction(conn, learner_ids):
                pass
        assert not conn.is_in_transaction()
    finally:
        await conn.close()


async def test_json_columns_decode_to_python_values(owner_dsn: str) -> None:
    conn = await connect(owner_dsn)
    try:
        model = await conn.fetchval(
            "SELECT model_json FROM learning.learner_model_versions"
            " WHERE learner_id = 'L-2041-1' AND kind = 'readiness' ORDER BY version DESC LIMIT 1"
        )
        echoed = await conn.fetchval("SELECT $1::jsonb", {"tên": "Hằng đẳng thức", "n": [1, 2]})
    finally:
        await conn.close()
    assert isinstance(model, dict)
    assert model["readiness"] == 0.58
    assert echoed == {"tên": "Hằng đẳng thức", "n": [1, 2]}


def test_dsn_with_replaces_parts_and_keeps_the_socket() -> None:
    base = "postgresql://postgres:@/postgres?host=/run/pg"
    assert dsn_with(base, user="nemo_context") == "postgresql://nemo_context@/postgres?host=/run/pg"
    assert dsn_with(base, database="nemo_test") == "postgresql://postgres:@/nemo_test?host=/run/pg"
    assert (
        dsn_with("postgresql://owner:pw@db:5432/nemo", user="nemo_toolplane", password="p@ss:/w")
        == "postgresql://nemo_toolplane:p%40ss%3A%2Fw@db:5432/nemo"
    )
    # An encoded user name survives untouched when only the database changes.
    assert dsn_with("postgresql://a%40b:x@db/one", database="two") == "postgresql://a%40b:x@db/two"
    with pytest.raises(ValueError, match="postgresql://"):
        dsn_with("mysql://db/x", user="u")
