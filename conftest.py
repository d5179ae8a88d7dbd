"""Fixtures shared by the whole test suite: one real PostgreSQL per test session.

The server is the one ``DATABASE_URL`` points at (a role that may create databases and roles) or,
without it, an embedded PostgreSQL in a temporary directory. Each session gets a fresh database
that is migrated and seeded once and dropped at the end. With an external server that asks for
passwords, set ``NEMO_DB_CONTEXT_PASSWORD`` and ``NEMO_DB_TOOLPLANE_PASSWORD``: the migration
applies them and the role DSNs carry them.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from nemo_core.db import connect, dsn_with
from nemo_devtools.oauth_server import Account
from nemo_ops.embedded_pg import start_embedded_postgres
from nemo_ops.local_oauth import seeded_accounts
from nemo_ops.migrate import migrate, role_passwords_from_env
from nemo_ops.seed import seed

# Fixtures of the other shared parts of the stack (S3 API, ports, service processes).
pytest_plugins = ("nemo_testing.plugin",)

#: ``await make_empty_database()`` returns the owner DSN of a new, empty database.
DatabaseFactory = Callable[[], Awaitable[str]]


async def _create_database(server_dsn: str, name: str) -> None:
    conn = await connect(server_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


async def _drop_database(server_dsn: str, name: str) -> None:
    conn = await connect(server_dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


async def _migrate_and_seed(dsn: str) -> None:
    await migrate(dsn, role_passwords=role_passwords_from_env(os.environ))
    await seed(dsn)


def _role_dsn(owner_dsn: str, role: str, password_variable: str) -> str:
    return dsn_with(owner_dsn, user=role, password=os.environ.get(password_variable) or None)


@pytest.fixture(scope="session")
def fast_scratch_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory for database files, removed at the end of the session.

    On tmpfs when the machine has one: PostgreSQL creates and fsyncs about a thousand files per
    cluster, which takes seconds on a disk and milliseconds in memory.
    """
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path_factory.mktemp("postgres")
        return
    path = Path(tempfile.mkdtemp(prefix="nemo-test-", dir=shm))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server_dsn(fast_scratch_dir: Path) -> Iterator[str]:
    """Superuser DSN of the session's PostgreSQL server (its maintenance database)."""
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url
        return
    server = start_embedded_postgres(fast_scratch_dir / "pgdata", cleanup="delete")
    try:
        yield server.dsn
    finally:
        server.stop()


@pytest.fixture(scope="session")
def make_empty_database(pg_server_dsn: str) -> Iterator[DatabaseFactory]:
    """Factory of empty databases on the session's server, all dropped at the end of the session."""
    names: list[str] = []

    async def create() -> str:
        name = f"nemo_test_{secrets.token_hex(6)}"
        await _create_database(pg_server_dsn, name)
        names.append(name)
        return dsn_with(pg_server_dsn, database=name)

    yield create
    for name in names:
        asyncio.run(_drop_database(pg_server_dsn, name))


@pytest.fixture(scope="session")
def owner_dsn(pg_server_dsn: str) -> Iterator[str]:
    """DSN of the owner (migration) role on the session's migrated and seeded database."""
    name = f"nemo_test_{secrets.token_hex(6)}"
    asyncio.run(_create_database(pg_server_dsn, name))
    try:
        dsn = dsn_with(pg_server_dsn, database=name)
        asyncio.run(_migrate_and_seed(dsn))
        yield dsn
    finally:
        asyncio.run(_drop_database(pg_server_dsn, name))


@pytest.fixture(scope="session")
def context_dsn(owner_dsn: str) -> str:
    """DSN of the context service's role (``nemo_context``) on the session's database."""
    return _role_dsn(owner_dsn, "nemo_context", "NEMO_DB_CONTEXT_PASSWORD")


@pytest.fixture(scope="session")
def toolplane_dsn(owner_dsn: str) -> str:
    """DSN of the tool plane's role (``nemo_toolplane``) on the session's database."""
    return _role_dsn(owner_dsn, "nemo_toolplane", "NEMO_DB_TOOLPLANE_PASSWORD")


@pytest.fixture(scope="session")
def oauth_accounts() -> list[Account]:
    """Who may sign in at the ``oauth_server`` fixture: the seeded users."""
    return seeded_accounts()
