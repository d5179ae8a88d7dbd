"""Fixtures of the whole-system tests: the three services as separate processes.

- ``start_stack`` (function scope): a factory of fresh stacks, each stopped at the end of the
  test; for fault tests that stop, kill or starve a service.
- ``stack`` (session scope, started on first use): one stack shared by the journeys (and other
  tests that only call it), with the scripted model provider and the OTLP receiver below.
- ``scripted_provider`` and ``otlp_receiver`` (session scope): the shared stack's model API and
  telemetry receiver; tests reset the provider's script before using it.
- ``fresh_otlp_receiver``: a receiver for a stack the test starts itself.
- ``pgbouncer`` (session scope): a real PgBouncer in transaction mode in front of the session's
  server, for both service roles, with fewer server connections than the services' pools so that
  their clients share them; ``pooled_stack`` (session scope): a stack reaching PostgreSQL only
  through it (the tool plane's change listener aside).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from nemo_ops.migrate import migrate, role_passwords_from_env
from nemo_ops.seed import seed
from nemo_testing.otlp import OtlpReceiver
from nemo_testing.pgbouncer import PgBouncer, running_pgbouncer
from nemo_testing.providers import ScriptedProvider
from tests.stack import Stack, StackFactory
from tests.stack import start_stack as launch_stack


@pytest.fixture(scope="session")
async def scripted_provider() -> AsyncIterator[ScriptedProvider]:
    """The model API of the shared stack (OpenAI wire format)."""
    async with ScriptedProvider() as provider:
        yield provider


@pytest.fixture(scope="session")
async def otlp_receiver() -> AsyncIterator[OtlpReceiver]:
    """Traces and metrics exported by the shared stack's processes."""
    async with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture
async def fresh_otlp_receiver() -> AsyncIterator[OtlpReceiver]:
    """An OTLP receiver of the test's own, for the telemetry of a stack it starts."""
    async with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="session")
async def stack(
    owner_dsn: str,
    tmp_path_factory: pytest.TempPathFactory,
    scripted_provider: ScriptedProvider,
    otlp_receiver: OtlpReceiver,
) -> AsyncIterator[Stack]:
    """One running stack for the session, on the session database."""
    running = await launch_stack(
        owner_dsn,
        tmp_path_factory.mktemp("stack"),
        provider_base_url=scripted_provider.openai_base_url,
        otlp_endpoint=otlp_receiver.endpoint,
    )
    try:
        yield running
    finally:
        await running.stop()


#: Server connections per database and role behind the suite's pooler: fewer than a service's
#: pool (10), so concurrent transactions of different clients take turns on the same ones.
POOLER_SERVER_CONNECTIONS = 3


#: ``await start_pooler(pool_size)``: a new PgBouncer in front of the session's server for the
#: service roles, stopped at the end of the session.
PoolerFactory = Callable[[int], Awaitable[PgBouncer]]


@pytest.fixture(scope="session")
async def start_pooler(
    pg_server_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[PoolerFactory]:
    """Start poolers in transaction mode in front of the session's server (any of its
    databases), with ``pool_size`` server connections per database and role."""
    async with AsyncExitStack() as poolers:

        async def start(pool_size: int) -> PgBouncer:
            return await poolers.enter_async_context(
                running_pgbouncer(
                    pg_server_dsn,
                    tmp_path_factory.mktemp("pgbouncer"),
                    users=["nemo_context", "nemo_toolplane"],
                    passwords=role_passwords_from_env(os.environ),
                    pool_size=pool_size,
                )
            )

        yield start


@pytest.fixture(scope="session")
async def pgbouncer(start_pooler: PoolerFactory) -> PgBouncer:
    """PgBouncer in transaction mode in front of the session's server, for the stacks."""
    return await start_pooler(POOLER_SERVER_CONNECTIONS)


@pytest.fixture(scope="session")
async def pooled_stack(
    make_empty_database: Callable[[], Awaitable[str]],
    tmp_path_factory: pytest.TempPathFactory,
    scripted_provider: ScriptedProvider,
    otlp_receiver: OtlpReceiver,
    pgbouncer: PgBouncer,
) -> AsyncIterator[Stack]:
    """One stack for the session whose services reach a database of their own (migrated and
    seeded, so tests that run on both stacks find the rows of one run only) through
    ``pgbouncer``. Its tool plane keeps tokens and rules for an hour, so a change reaches it
    only through its change listener's notifications."""
    owner_dsn = await make_empty_database()
    await migrate(owner_dsn, role_passwords=role_passwords_from_env(os.environ))
    await seed(owner_dsn)
    running = await launch_stack(
        owner_dsn,
        tmp_path_factory.mktemp("pooled-stack"),
        provider_base_url=scripted_provider.openai_base_url,
        otlp_endpoint=otlp_receiver.endpoint,
        pooler=pgbouncer,
        extra_env={"toolplane": {"NEMO_TOOLPLANE_ACCESS_MAX_AGE_SECONDS": "3600"}},
    )
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def start_stack(owner_dsn: str, tmp_path: Path) -> AsyncIterator[StackFactory]:
    """Start fresh stacks (default database: the session's); all stop when the test ends."""
    started: list[Stack] = []

    async def start(dsn: str | None = None, **options: Any) -> Stack:
        running = await launch_stack(
            dsn or owner_dsn, tmp_path / f"stack-{len(started)}", **options
        )
        started.append(running)
        return running

    try:
        yield start
    finally:
        for running in started:
            await running.stop()
