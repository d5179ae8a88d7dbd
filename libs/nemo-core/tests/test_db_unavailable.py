"""Telling an unreachable database from a bad statement, and what the caller sees of it."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import grpc
import pytest

from nemo_core.db import connect, create_pool, dsn_with, is_database_unavailable
from nemo_core.errors import to_service_error


async def test_a_server_that_is_not_there_is_unavailable(tmp_path: Path) -> None:
    # A Unix socket directory without a server, as when embedded PostgreSQL is stopped.
    with pytest.raises(FileNotFoundError) as raised:
        await connect(f"postgresql://nobody@/nemo?host={tmp_path}", connect_timeout=5)
    assert is_database_unavailable(raised.value), repr(raised.value)
    mapped = to_service_error(raised.value, method="M")
    assert (mapped.code, mapped.reason) == (
        grpc.StatusCode.UNAVAILABLE,
        "DATABASE_UNAVAILABLE",
    )
    assert "nobody" not in mapped.message


async def test_a_pool_whose_server_is_gone_fails_with_unavailable(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as raised:
        await create_pool(f"postgresql://nobody@/nemo?host={tmp_path}", min_size=1)
    assert is_database_unavailable(raised.value)


def _assert_unavailable(exc: Exception) -> None:
    assert is_database_unavailable(exc), repr(exc)
    mapped = to_service_error(exc, method="M")
    assert (mapped.code, mapped.reason) == (
        grpc.StatusCode.UNAVAILABLE,
        "DATABASE_UNAVAILABLE",
    )


@pytest.fixture
async def silent_server() -> AsyncIterator[str]:
    """host:port of a server that accepts connections and never answers, as a hung or
    partitioned PostgreSQL does."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        for writer in held:
            writer.close()


async def test_a_server_that_does_not_answer_is_unavailable(silent_server: str) -> None:
    dsn = f"postgresql://nobody:secret@{silent_server}/nemo"
    with pytest.raises(TimeoutError) as on_connect:
        await connect(dsn, connect_timeout=0.3)
    _assert_unavailable(on_connect.value)
    with pytest.raises(TimeoutError) as on_pool:
        await create_pool(dsn, min_size=1, connect_timeout=0.3)
    _assert_unavailable(on_pool.value)
    # A pool that opens connections on demand fails the acquire instead.
    pool = await create_pool(dsn, min_size=0, connect_timeout=0.3)
    try:
        with pytest.raises(TimeoutError) as on_acquire:
            async with pool.acquire(timeout=0.6):
                pass
    finally:
        await pool.close()
    _assert_unavailable(on_acquire.value)


async def test_a_statement_that_times_out_is_unavailability(owner_dsn: str) -> None:
    conn = await connect(owner_dsn)
    try:
        with pytest.raises(TimeoutError) as raised:
            await conn.execute("SELECT pg_sleep(5)", timeout=0.2)
    finally:
        await conn.close()
    _assert_unavailable(raised.value)


async def test_a_host_name_that_does_not_resolve_is_unavailable() -> None:
    with pytest.raises(socket.gaierror) as raised:
        await connect("postgresql://nobody:secret@nemo-db.invalid:5432/nemo", connect_timeout=5)
    _assert_unavailable(raised.value)


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
