"""Fixtures of the tool plane tests: real PostgreSQL, a real context service and real tool plane
servers (gRPC and the MCP edge) on loopback, driven by the official MCP client."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import grpc.aio
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr

from nemo_context.app import build as build_context
from nemo_context.settings import ContextSettings
from nemo_core.client import create_channel
from nemo_core.db import connect
from nemo_core.server import Server
from nemo_core.settings import DEFAULT_CALLER_TOKEN_METADATA_KEY
from nemo_core.telemetry import attach_metric_reader, attach_span_exporter, configure_telemetry
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2_grpc, toolplane_service_pb2_grpc
from nemo_toolplane.app import SERVICE_NAME, ToolPlane, assemble
from nemo_toolplane.operators import add_operator, issue_operator_token
from nemo_toolplane.settings import ToolPlaneSettings
from nemo_toolplane.tokens import issue_token

REPOSITORY = Path(__file__).resolve().parents[3]
CALLER_TOKENS = {
    "internal": f"internal-{secrets.token_hex(16)}",
    "platform": f"platform-{secrets.token_hex(16)}",
    "operator": f"operator-{secrets.token_hex(16)}",
    "console": f"console-{secrets.token_hex(16)}",
}
CONTEXT_CALLER_TOKEN = f"toolplane-{secrets.token_hex(16)}"
#: The operator whose credential ``admin_stub()`` sends unless told otherwise.
SESSION_OPERATOR = "tests-ops"
#: The context service's audit caller, the one that may read snapshots back.
CONTEXT_AUDIT_TOKEN = f"audit-{secrets.token_hex(16)}"
TEST_PSEUDONYM_KEY = "toolplane-test-pseudonym-key-0123456789abcdef"


@pytest.fixture(scope="session")
def spans() -> InMemorySpanExporter:
    """Every span this test process finishes (the tool plane runs in-process)."""
    configure_telemetry("nemo-toolplane-tests")
    exporter = InMemorySpanExporter()
    attach_span_exporter(exporter)
    return exporter


@pytest.fixture(scope="session")
def metric_reader(spans: InMemorySpanExporter) -> InMemoryMetricReader:
    """Every metric this test process records (after telemetry is configured by ``spans``)."""
    reader = InMemoryMetricReader()
    attach_metric_reader(reader)
    return reader


def counter(reader: InMemoryMetricReader, name: str, **attributes: str) -> int:
    """The current total of a counter over the points carrying ``attributes``."""
    data = reader.get_metrics_data()
    return sum(
        int(point.value)
        for resource in (data.resource_metrics if data else ())
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
        if isinstance(point, NumberDataPoint)
        and all((point.attributes or {}).get(k) == v for k, v in attributes.items())
    )


@pytest.fixture(scope="session")
async def owner(owner_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection as the owner role, for setting up and inspecting rows."""
    conn = await connect(owner_dsn)
    yield conn
    await conn.close()


@pytest.fixture(scope="session")
async def context_address(
    context_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """A real context service (its production ``build``) accepting the tool plane's token."""
    settings = ContextSettings(
        database_url=context_dsn,
        listen_address="127.0.0.1:0",
        caller_tokens={"toolplane": CONTEXT_CALLER_TOKEN, "audit": CONTEXT_AUDIT_TOKEN},
        pseudonym_key=TEST_PSEUDONYM_KEY,
        snapshot_dir=tmp_path_factory.mktemp("snapshots"),
        grace_period_seconds=0.5,
        database_pool_size=4,
    )
    server = Server("context", settings, await build_context(settings))
    port = await server.start()
    yield f"127.0.0.1:{port}"
    await server.shutdown()


@pytest.fixture(autouse=True)
async def fresh_buckets(owner: asyncpg.Connection) -> None:
    """The limits' buckets are shared by every tool plane on the database: each test starts with
    none of another test's spent."""
    await owner.execute("DELETE FROM toolplane.rate_buckets")


class _Operator:
    """The default person of ``admin_stub``: the session's operator."""


OPERATOR = _Operator()


@dataclass
class RunningToolPlane:
    """A tool plane started in this process: gRPC on one port, the MCP edge on another."""

    plane: ToolPlane
    server: Server
    settings: ToolPlaneSettings
    grpc_address: str
    mcp_url: str
    #: The credential of the session's operator (``tests-ops``), which ``admin_stub()`` sends.
    operator_credential: str = ""
    #: Kept for the whole session (a session fixture's), not stopped with the module that
    #: started it.
    shared: bool = False
    _channels: dict[tuple[str, str | None], grpc.aio.Channel] = field(default_factory=dict)

    def _channel(self, caller: str, person: str | None = None) -> grpc.aio.Channel:
        channel = self._channels.get((caller, person))
        if channel is None:
            if person is None:
                token = SecretStr(CALLER_TOKENS[caller])
                channel = create_channel(self.grpc_address, self.settings, token=token)
            else:
                channel = grpc.aio.insecure_channel(
                    self.grpc_address, interceptors=[*_caller(caller), _AsPerson(person)]
                )
            self._channels[(caller, person)] = channel
        return channel

    def tools_stub(
        self, caller: str = "internal"
    ) -> toolplane_service_pb2_grpc.ToolPlaneServiceAsyncStub:
        return toolplane_service_pb2_grpc.ToolPlaneServiceStub(self._channel(caller))

    def admin_stub(
        self, person: str | _Operator | None = OPERATOR, caller: str = "operator"
    ) -> toolplane_admin_service_pb2_grpc.ToolPlaneAdminServiceAsyncStub:
        """The people's API as ``caller``, every call carrying ``person``'s credential (by
        default the session's operator; None: no person, for calls that send their own)."""
        credential = self.operator_credential if isinstance(person, _Operator) else person
        return toolplane_admin_service_pb2_grpc.ToolPlaneAdminServiceStub(
            self._channel(caller, credential)
        )

    def mcp(
        self, token: str, headers: Mapping[str, str] | None = None, **client: Any
    ) -> AbstractAsyncContextManager[Client]:
        """The official MCP client, authenticated with an agent token."""
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}", **(headers or {})}, timeout=30
        )
        return _ClientWithHttp(
            Client(streamable_http_client(self.mcp_url, http_client=http), **client), http
        )

    async def stop(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
        await self.server.shutdown()


class _AsPerson(grpc.aio.UnaryUnaryClientInterceptor):
    """Adds a person's credential to every call, as the console does."""

    def __init__(self, credential: str) -> None:
        self._metadata = ("authorization", f"Bearer {credential}")

    async def intercept_unary_unary(
        self, continuation: Any, client_call_details: Any, request: Any
    ) -> Any:
        metadata = [*(client_call_details.metadata or ()), self._metadata]
        return await continuation(client_call_details._replace(metadata=metadata), request)


def _caller(caller: str) -> list[grpc.aio.ClientInterceptor]:
    """The caller token interceptor, as ``create_channel`` adds it."""

    class _Caller(grpc.aio.UnaryUnaryClientInterceptor):
        async def intercept_unary_unary(
            self, continuation: Any, client_call_details: Any, request: Any
        ) -> Any:
            metadata = [
                *(client_call_details.metadata or ()),
                (DEFAULT_CALLER_TOKEN_METADATA_KEY, CALLER_TOKENS[caller]),
            ]
            return await continuation(client_call_details._replace(metadata=metadata), request)

    return [_Caller()]


class _ClientWithHttp:
    """Enter the MCP client; close its HTTP client with it."""

    def __init__(self, client: Client, http: httpx2.AsyncClient) -> None:
        self._client = client
        self._http = http

    async def __aenter__(self) -> Client:
        return await self._client.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self._client.__aexit__(*exc)
        finally:
            await self._http.aclose()


StartToolPlane = Callable[..., Awaitable[RunningToolPlane]]


@pytest.fixture(scope="session")
def started_planes() -> list[RunningToolPlane]:
    """The tool planes running in this session, in the order they started."""
    return []


@pytest.fixture(scope="module", autouse=True)
async def _stop_the_modules_planes(
    started_planes: list[RunningToolPlane],
) -> AsyncIterator[None]:
    """The planes a module started, in its fixtures or its tests, stop with it: each holds its
    pool's connections, and the session's server has a hundred for every test package."""
    before = len(started_planes)
    yield
    ours = [running for running in started_planes[before:] if not running.shared]
    for running in reversed(ours):
        await running.stop()
        started_planes.remove(running)


@pytest.fixture(scope="session")
async def start_toolplane(
    toolplane_dsn: str,
    context_address: str,
    spans: InMemorySpanExporter,
    owner: asyncpg.Connection,
    started_planes: list[RunningToolPlane],
) -> AsyncIterator[StartToolPlane]:
    """Factory of tool planes built by the production ``assemble``; keyword arguments override
    settings. Limits are generous by default so tests do not trip over each other. A plane
    stops with the module that started it, unless marked ``shared``."""
    started = started_planes
    await add_operator(owner, SESSION_OPERATOR, name="the tests' operator")
    operator = await issue_operator_token(owner, SESSION_OPERATOR, label="tests-session")

    async def start(**overrides: Any) -> RunningToolPlane:
        values: dict[str, Any] = {
            "database_url": toolplane_dsn,
            "listen_address": "127.0.0.1:0",
            "mcp_port": 0,
            "caller_tokens": CALLER_TOKENS,
            "client_token": CONTEXT_CALLER_TOKEN,
            "context_address": context_address,
            "grace_period_seconds": 1.0,
            "database_pool_size": 4,
            "agent_calls_per_second": 10_000,
            "agent_call_burst": 10_000,
            "user_calls_per_second": 10_000,
            "user_call_burst": 10_000,
            "tool_call_limits": [],
            "auth_failures_per_minute": 10_000,
            "approval_requests_per_hour": 10_000,
            "audit_flush_seconds": 0.05,
            "docs_dir": REPOSITORY / "docs",
        }
        values.update(overrides)
        settings = ToolPlaneSettings(**values)
        plane = await assemble(settings)
        server = Server(SERVICE_NAME, settings, plane.setup)
        port = await server.start()
        mcp_port = await plane.edge.wait_started()
        running = RunningToolPlane(
            plane,
            server,
            settings,
            f"127.0.0.1:{port}",
            f"http://127.0.0.1:{mcp_port}/mcp",
            operator_credential=operator.token,
        )
        started.append(running)
        return running

    yield start
    for running in reversed(started):
        await running.stop()


@pytest.fixture(scope="session")
async def toolplane(start_toolplane: StartToolPlane) -> RunningToolPlane:
    """One tool plane with the default test settings, shared by the session."""
    running = await start_toolplane()
    running.shared = True
    return running


@dataclass(frozen=True)
class AgentTokens:
    """Tokens issued for the tests (revoked at the end)."""

    learning_parent: str  # learning-agent bound to U-2041-P1, parent of L-2041-1 and L-2041-3
    learning_unbound: str
    research: str
    engineering: str
    ids: tuple[str, ...]


@pytest.fixture(scope="module")
async def tokens(owner: asyncpg.Connection) -> AsyncIterator[AgentTokens]:
    """Tokens for the module's tests; deleted after it, since the demo data has none."""
    issued = [
        await issue_token(owner, "learning-agent", user_id="U-2041-P1", label="tests"),
        await issue_token(owner, "learning-agent", label="tests", unbound=True),
        await issue_token(owner, "research-agent", label="tests"),
        await issue_token(owner, "engineering-agent", user_id="U-2041-S1", label="tests"),
    ]
    yield AgentTokens(
        learning_parent=issued[0].token,
        learning_unbound=issued[1].token,
        research=issued[2].token,
        engineering=issued[3].token,
        ids=tuple(token.token_id for token in issued),
    )
    await owner.execute(
        "DELETE FROM toolplane.agent_tokens WHERE id = ANY($1)", [t.token_id for t in issued]
    )


@dataclass(frozen=True)
class OperatorTokens:
    """Operators' own credentials: alice and bob, and sara, whose platform account is U-2041-S1 (the
    user the engineering agent's token acts for)."""

    alice: str
    bob: str
    sara: str
    ids: dict[str, str]


@pytest.fixture(scope="module")
async def operators(owner: asyncpg.Connection) -> AsyncIterator[OperatorTokens]:
    issued = {}
    for operator_id, user_id in (("alice", None), ("bob", "U-2041-S9"), ("sara", "U-2041-S1")):
        await add_operator(owner, operator_id, name=operator_id.title(), user_id=user_id)
        issued[operator_id] = await issue_operator_token(owner, operator_id, label="tests")
    yield OperatorTokens(
        alice=issued["alice"].token,
        bob=issued["bob"].token,
        sara=issued["sara"].token,
        ids={name: token.token_id for name, token in issued.items()},
    )
    await owner.execute("DELETE FROM toolplane.operators WHERE id IN ('alice', 'bob', 'sara')")


def as_operator(token: str) -> tuple[tuple[str, str]]:
    """gRPC metadata carrying an operator's own credential."""
    return (("authorization", f"Bearer {token}"),)


@pytest.fixture(scope="module", autouse=True)
async def _forget_test_tokens(owner: asyncpg.Connection) -> AsyncIterator[None]:
    """Tokens a test issues itself carry a label starting with "tests"; none outlives its module."""
    yield
    await owner.execute("DELETE FROM toolplane.agent_tokens WHERE label LIKE 'tests%'")


@asynccontextmanager
async def rules_change(*planes: RunningToolPlane) -> AsyncIterator[None]:
    """Around a change of tokens, grants or policies: returns once every plane has seen the
    database's change notification (and so dropped what it had cached)."""
    before = [plane.plane.rules.generation for plane in planes]
    yield
    await eventually(
        lambda: (
            not any(
                plane.plane.rules.listening and plane.plane.rules.generation == generation
                for plane, generation in zip(planes, before, strict=True)
            )
        )
    )


async def eventually(condition: Callable[[], bool], seconds: float = 10) -> None:
    """Wait until ``condition()`` holds (state another connection or process changes)."""
    async with asyncio.timeout(seconds):
        while not condition():  # noqa: ASYNC110 - nothing to await but the other side's effect
            await asyncio.sleep(0.01)


@pytest.fixture
def audit_rows(
    owner: asyncpg.Connection, toolplane: RunningToolPlane
) -> Callable[..., Awaitable[list[asyncpg.Record]]]:
    """``await audit_rows(request_id=..., session_id=..., plane=...)``: the stored rows, after
    the plane's pending rows were written."""

    async def rows(
        *,
        request_id: str | None = None,
        session_id: str | None = None,
        plane: RunningToolPlane | None = None,
    ) -> list[asyncpg.Record]:
        await (plane or toolplane).plane.audit.flush()
        return list(
            await owner.fetch(
                "SELECT * FROM toolplane.audit_logs WHERE ($1::text IS NULL OR request_id = $1) "
                "AND ($2::text IS NULL OR session_id = $2) ORDER BY id",
                request_id,
                session_id,
            )
        )

    return rows
