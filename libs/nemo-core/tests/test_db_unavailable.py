"""Telling an unreachable database from a bad statement, and what the caller sees of it."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import grpc
import pytest

from nemo_core.db import connect, create_pool, dsn_with, is_database_unavailable
from nemo_core.errors import Reason, to_service_error


async def test_a_server_that_is_not_there_is_unavailable(tmp_path: Path) -> None:
    # A Unix socket directory without a server, as when embedded PostgreSQL is stopped.
    with pytest.raises(FileNotFoundError) as raised:
        await connect(f"postgresql://nobody@/nemo?host={tmp_path}", connect_timeout=5)
    assert is_database_unavailable(raised.value), repr(raised.value)
    mapped = to_service_error(raised.value, method="M")
    assert (mapped.code, mapped.reason) == (
        grpc.StatusCode.UNAVAILABLE,
        Reason.DATABASE_UNAVAILABLE,
    )
    assert "nobody" not in mapped.message


async def test_a_pool_whose_server_is_gone_fails_with_unavailable(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as raised:
        await create_pool(f"postgresql://nobody@/nemo?host={tmp_path}", min_size=1)
    assert is_database_unavailable(raised.value)


async def test_a_wrong_statement_is_not_unavailability(owner_dsn: str) -> None:
    conn = await connect(owner_dsn)
    try:
        with pytest.raises(asyncpg.PostgresError) as raised:
            await conn.execute("SELECT * FROM no_such_table")
    finally:
        await conn.close()
    assert not is_database_unavailable(raised.value)
    assert to_service_error(raised.value, method="M").code is grpc.StatusCode.INTERNAL


async def test_a_refused_role_is_not_unavailability(owner_dsn: str) -> None:
    with pytest.raises(asyncpg.InvalidAuthorizationSpecificationError) as raised:
        await connect(dsn_with(owner_dsn, user="no_such_role"), connect_timeout=5)
    assert not is_database_unavailable(raised.value)


def test_a_missing_file_is_not_unavailability(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as raised:
        (tmp_path / "missing").read_text()
    assert not is_database_unavailable(raised.value)
