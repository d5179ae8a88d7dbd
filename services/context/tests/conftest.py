"""Fixtures of the context service tests: real PostgreSQL as nemo_context, real S3 API, metrics,
and real context servers on loopback."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aioboto3
import asyncpg
import grpc.aio
import pytest
from asyncpg.connection import LoggedQuery
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from pydantic import SecretStr

from nemo_context.app import SERVICE_NAME, build
from nemo_context.settings import DEVELOPMENT_IDENTIFIER_KEY, ContextSettings
from nemo_context.snapshots.keys import DataKeys, MasterKey
from nemo_context.snapshots.store import SnapshotOwner
from nemo_core.client import create_channel
from nemo_core.db import Pool, connect, create_pool, init_connection
from nemo_core.server import Server
from nemo_core.telemetry import attach_metric_reader, configure_telemetry
from nemo_protos.context.v1 import context_service_pb2, context_service_pb2_grpc
from nemo_protos.type.v1 import user_source_pb2
from nemo_testing.s3 import S3Endpoint


@pytest.fixture
async def recorded_pool(context_dsn: str) -> AsyncIterator[tuple[Pool, list[LoggedQuery]]]:
    """A pool as nemo_context that records every statement it runs, with its parameters."""
    statements: list[LoggedQuery] = []

    async def init(conn: asyncpg.Connection[asyncpg.Record]) -> None:
        await init_connection(conn)
        conn.add_query_logger(statements.append)

    pool = await asyncpg.create_pool(context_dsn, min_size=1, max_size=1, init=init)
    try:
        yield pool, statements
    finally:
        await pool.close()


@pytest.fixture(scope="session")
async def context_pool(context_dsn: str) -> AsyncIterator[Pool]:
    """A connection pool as the context service's role on the session's database."""
    pool = await create_pool(context_dsn, max_size=4)
    try:
        yield pool
    finally:
        await pool.close()


#: Who the tool plane's agent views are built for in tests: a parent of L-2041-1 whose agent
#: token is bound to them, through a user-scoped grant.
PARENT = context_service_pb2.AgentAccess(
    user_id="U-2041-P1", user_source=user_source_pb2.USER_SOURCE_TOKEN, resource_scopes=["user"]
)

CounterTotal = Callable[[str, Mapping[str, str]], int]
"""``counter_total(name, attributes)``: the current sum of a counter over matching points."""


@pytest.fixture(scope="session")
def counter_total() -> CounterTotal:
    """Reads counters of this test process (the meter provider can be set only once)."""
    configure_telemetry("nemo-context-tests")
    reader = InMemoryMetricReader()
    attach_metric_reader(reader)
    return lambda name, attributes: _counter_total(reader, name, attributes)


def _counter_total(reader: InMemoryMetricReader, name: str, attributes: Mapping[str, str]) -> int:
    data = reader.get_metrics_data()
    total = 0
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    point_attributes = dict(point.attributes or {})
                    matches = all(point_attributes.get(k) == v for k, v in attributes.items())
                    if matches and isinstance(point, NumberDataPoint):
                        total += int(point.value)
    return total


@pytest.fixture(scope="session")
def s3_session(s3_endpoint: S3Endpoint) -> aioboto3.Session:
    """An aioboto3 session signing for the test S3 API."""
    return s3_endpoint.session()


@pytest.fixture
async def s3_bucket(s3_endpoint: S3Endpoint, s3_session: aioboto3.Session) -> str:
    """A new, empty bucket on the test S3 API."""
    name = f"nemo-snapshots-{secrets.token_hex(4)}"
    async with s3_session.client("s3", endpoint_url=s3_endpoint.url) as s3:
        await s3.create_bucket(Bucket=name)
    return name


TEST_MASTER_KEY = MasterKey(b"test-snapshot-master-key-0123456789abcdef")
"""The snapshot master key of the tests' stores: one for all, as a deployment has one."""


def keys_for(pool: Pool) -> DataKeys:
    """Data keys under the tests' master key, read from and created in ``pool``'s database."""
    return DataKeys(pool, TEST_MASTER_KEY)


def owner_of(learner_ref: str) -> SnapshotOwner:
    """The owner of a snapshot for a ref a test made up: its learner id picks the data key."""
    return SnapshotOwner(f"L-test-{learner_ref[5:17]}", learner_ref)


TEST_PSEUDONYM_KEY = "test-pseudonym-key-0123456789abcdef0123456789"
#: The identifier key the demo seed registers (tests build against the seeded database).
TEST_IDENTIFIER_KEY = DEVELOPMENT_IDENTIFIER_KEY.encode()
"""The pseudonym key of the test servers (any key of 32+ characters works)."""


@dataclass
class RunningContextServer:
    """A context server started in this process on a free loopback port."""

    server: Server
    address: str
    settings: ContextSettings
    caller_tokens: Mapping[str, str]
    """Token of each caller identity the server accepts."""
    _channels: dict[str, grpc.aio.Channel] = field(default_factory=dict)

    def channel(self, caller: str) -> grpc.aio.Channel:
        """A channel that calls as ``caller`` (one of :attr:`caller_tokens`)."""
        channel = self._channels.get(caller)
        if channel is None:
            token = SecretStr(self.caller_tokens[caller])
            channel = create_channel(self.address, self.settings, token=token)
            self._channels[caller] = channel
        return channel

    def stub(self, caller: str) -> context_service_pb2_grpc.ContextServiceAsyncStub:
        """A client stub that calls as ``caller`` (one of :attr:`caller_tokens`)."""
        return context_service_pb2_grpc.ContextServiceStub(self.channel(caller))

    async def stop(self) -> None:
        """Close the client channels and shut the server down."""
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
        await self.server.shutdown()


StartContextServer = Callable[..., Awaitable[RunningContextServer]]
"""``await start_context_server(**overrides)``: a started server, stopped at session end."""


@pytest.fixture(scope="session")
def caller_tokens() -> Mapping[str, str]:
    """Tokens of the context service's callers, plus an ``operator`` the ACL does not list."""
    identities = ("gateway", "toolplane", "audit", "platform", "operator", "console")
    return {identity: f"{identity}-{secrets.token_hex(16)}" for identity in identities}


@pytest.fixture(scope="session")
async def start_context_server(
    context_dsn: str,
    caller_tokens: Mapping[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[StartContextServer]:
    """Factory of real context servers (``app.build`` as in production) on 127.0.0.1:0.

    Defaults: the session's database as ``nemo_context``, the test pseudonym key, snapshots in a
    fresh local directory (30 s to write one), the tokens of :func:`caller_tokens`; keyword
    arguments override any setting.
    """
    started: list[RunningContextServer] = []

    async def start(**overrides: Any) -> RunningContextServer:
        values: dict[str, Any] = {
            "database_url": context_dsn,
            "listen_address": "127.0.0.1:0",
            "caller_tokens": dict(caller_tokens),
            "pseudonym_key": TEST_PSEUDONYM_KEY,
            "snapshot_dir": tmp_path_factory.mktemp("snapshots"),
            "grace_period_seconds": 0.5,
            "database_pool_size": 4,
            # A loaded test machine can take seconds for a first S3 write; tests of the write
            # timeout set their own.
            "snapshot_write_timeout_seconds": 30.0,
        }
        values.update(overrides)
        settings = ContextSettings(**values)
        server = Server(SERVICE_NAME, settings, await build(settings))
        port = await server.start()
        running = RunningContextServer(server, f"127.0.0.1:{port}", settings, caller_tokens)
        started.append(running)
        return running

    yield start
    for running in reversed(started):
        await running.stop()


@pytest.fixture(scope="session")
async def context_server(start_context_server: StartContextServer) -> RunningContextServer:
    """One context server with the default test settings, shared by the session."""
    return await start_context_server()


MakeSession = Callable[..., Awaitable[str]]
"""``await make_session(learner_id)``: the id of a new, empty chat session of that learner."""


@pytest.fixture
async def make_session(owner_dsn: str) -> AsyncIterator[MakeSession]:
    """New chat sessions for tests that write conversations; deleted (with their messages,
    state and summaries) after the test, so the shared demo sessions stay as seeded."""
    created: list[str] = []
    conn = await connect(owner_dsn)

    async def make(learner_id: str = "L-2041-1") -> str:
        session_id = f"CS-TEST-{secrets.token_hex(6)}"
        await conn.execute(
            "INSERT INTO learning.chat_sessions (id, learner_id) VALUES ($1, $2)",
            session_id,
            learner_id,
        )
        created.append(session_id)
        return session_id

    try:
        yield make
    finally:
        await conn.execute("DELETE FROM learning.chat_sessions WHERE id = ANY($1)", created)
        await conn.close()
