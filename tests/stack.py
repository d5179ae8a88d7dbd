"""The whole stack for system tests: the three services as separate processes, as `nemo dev up`
starts them, on free loopback ports against a given (migrated and seeded) database.

Each service can be stopped with a chosen signal, killed, and started again on the same ports, so
fault tests can take one away under load and bring it back::

    stack = await start_stack(owner_dsn, tmp_path, provider_base_url=provider.openai_base_url)
    try:
        await stack.context.stop(signal.SIGKILL)
        await stack.context.start()
    finally:
        await stack.stop()

With ``pooler=`` (a running :class:`~nemo_testing.pgbouncer.PgBouncer`) every service reaches
PostgreSQL through that pooler in transaction mode, as in production, and the tool plane's change
listener alone connects directly.

With ``oauth=True`` the stack also runs its own local authorization server (the seeded users sign
in), and ``await stack.oauth_tokens("U-2041-P1", scopes=[...])`` is a person's tokens for the
stack's edge; tests that share one server for the session use the ``oauth_server`` fixture.

Processes get SIGTERM from the kernel if the test process dies (PR_SET_PDEATHSIG), so none
outlives its test run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nemo_core.db import connect
from nemo_core.settings import DEFAULT_CALLER_TOKEN_METADATA_KEY
from nemo_devtools.oauth_client import Tokens
from nemo_devtools.oauth_server import TOOL_SCOPES
from nemo_ops.local_oauth import seeded_accounts
from nemo_ops.migrate import ROLE_PASSWORD_ENV
from nemo_ops.service_processes import CALLER_IDENTITIES as CALLER_IDENTITIES
from nemo_ops.service_processes import (
    SERVICES,
    Ports,
    console_client,
    console_environment,
    log_tail,
    people_environments,
    service_environments,
    spawn_service,
    toolplane_oauth_environment,
    write_pseudonym_key,
)
from nemo_ops.service_processes import grpc_serving as grpc_serving
from nemo_ops.service_processes import http_ok as http_ok
from nemo_testing.oauth import OAuthServer, running_authorization_server
from nemo_testing.pgbouncer import PgBouncer
from nemo_testing.ports import free_port
from nemo_testing.s3 import S3Endpoint, context_snapshot_environment, create_bucket
from nemo_toolplane.operators import add_operator, issue_operator_token
from nemo_toolplane.tokens import issue_token
from nemo_toolplane.tool_sync import sync_tools
from nemo_toolplane.tools import build_registry

STARTUP_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 10.0

#: Demo agent tokens issued for every stack: name -> (agent id, user the token is bound to).
DEMO_AGENT_TOKENS: Mapping[str, tuple[str, str | None]] = {
    "learning-agent": ("learning-agent", "U-2041-P1"),
    "research-agent": ("research-agent", None),
    "engineering-agent": ("engineering-agent", None),
    "mentor-active": ("learning-agent", "U-2041-M1"),
    "mentor-inactive": ("learning-agent", "U-2041-M2"),
}

#: The operator whose own credential every stack holds (``stack.operator_token``).
STACK_OPERATOR = "stack-ops"

#: The ``start_stack`` test fixture: ``await start_stack(dsn=None, **options)`` starts a fresh
#: stack (on the session database unless ``dsn`` is given) that stops when the test ends.
StackFactory = Callable[..., Awaitable["Stack"]]

#: The repository's docs/ (the corpus of the tool plane's docs tools).
_DOCS_DIR = Path(__file__).resolve().parents[1] / "docs"

_START_ATTEMPTS = 3


class ServiceExitedAtStart(RuntimeError):
    """A service process ended before it served (its log tail is in the message)."""


@dataclass
class ServiceProcess:
    """One service process: start it, wait for it, stop or kill it, start it again on the same
    ports with the same environment."""

    name: str
    address: str
    env: dict[str, str]
    log_path: Path
    health_url: str | None = None
    process: asyncio.subprocess.Process | None = None
    #: Whether it serves gRPC health (the console serves only HTTP).
    grpc: bool = True

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError(f"{self.name} is not running")
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self, *, wait: bool = True) -> None:
        """Start the process (again) and, with ``wait``, return once it serves."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        self.process = await spawn_service(self.name, self.env, self.log_path)
        if wait:
            await self.wait_serving()

    async def serving(self) -> bool:
        """Whether gRPC health says SERVING (and the MCP edge answers, for the tool plane; the
        console's health page, for the console)."""
        if self.grpc and not await grpc_serving(self.address):
            return False
        return self.health_url is None or await http_ok(self.health_url)

    async def wait_serving(self, seconds: float = STARTUP_TIMEOUT_SECONDS) -> None:
        deadline = time.monotonic() + seconds
        while not await self.serving():
            if self.process is not None and (code := self.process.returncode) is not None:
                raise ServiceExitedAtStart(
                    f"{self.name} exited with code {code} while starting:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} not serving after {seconds:.0f} s")
            await asyncio.sleep(0.1)

    async def wait_exit(self, seconds: float = STOP_TIMEOUT_SECONDS) -> int:
        """The exit code once the process has ended; TimeoutError if it is still running."""
        if self.process is None:
            raise RuntimeError(f"{self.name} was never started")
        try:
            return await asyncio.wait_for(self.process.wait(), seconds)
        except TimeoutError:
            raise TimeoutError(f"{self.name} still running after {seconds:.0f} s") from None

    async def stop(
        self, sig: signal.Signals = signal.SIGTERM, seconds: float = STOP_TIMEOUT_SECONDS
    ) -> int:
        """Send ``sig`` and return the exit code within ``seconds`` (negative: the signal that
        ended it); TimeoutError if the process is still running then."""
        if self.process is None:
            raise RuntimeError(f"{self.name} was never started")
        if self.process.returncode is None:
            self.process.send_signal(sig)
        return await self.wait_exit(seconds)

    async def kill(self) -> int:
        return await self.stop(signal.SIGKILL)

    async def shutdown(self) -> None:
        """Teardown: SIGTERM, then SIGKILL if the graceful stop takes too long."""
        if not self.running:
            return
        try:
            await self.stop(signal.SIGTERM)
        except TimeoutError:
            await self.kill()

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)

    def log_lines(self) -> list[str]:
        """The process's log (JSON lines, with any non-JSON output of the interpreter)."""
        if not self.log_path.exists():
            return []
        return self.log_path.read_text(errors="replace").splitlines()

    def log_records(self) -> list[dict[str, Any]]:
        """The JSON log records the process wrote so far."""
        records = []
        for line in self.log_lines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    records.append(record)
        return records


@dataclass
class Stack:
    """The running stack: its processes, where they listen and how to authenticate."""

    owner_dsn: str
    state_dir: Path
    context: ServiceProcess
    gateway: ServiceProcess
    toolplane: ServiceProcess
    mcp_url: str
    caller_tokens: dict[str, str]
    agent_tokens: dict[str, str] = field(default_factory=dict)
    token_label: str = ""
    #: The credential of the stack's operator, for the people's API.
    operator_token: str = ""
    #: The console (``start_stack(..., console=True)``) and where browsers reach it.
    console: ServiceProcess | None = None
    console_url: str = ""
    #: The stack's own authorization server (``start_stack(..., oauth=True)``).
    oauth: OAuthServer | None = None
    _stop_oauth: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    @property
    def services(self) -> dict[str, ServiceProcess]:
        services = {"context": self.context, "gateway": self.gateway, "toolplane": self.toolplane}
        return services | ({"console": self.console} if self.console is not None else {})

    @property
    def mcp_health_url(self) -> str:
        return self.mcp_url.removesuffix("/mcp") + "/health"

    def metadata(self, identity: str) -> tuple[tuple[str, str], ...]:
        """gRPC metadata authenticating as caller ``identity`` (gateway, internal, audit...)."""
        return ((DEFAULT_CALLER_TOKEN_METADATA_KEY, self.caller_tokens[identity]),)

    async def issue_agent_token(self, agent_id: str, user_id: str | None = None) -> str:
        """A new bearer token of ``agent_id`` (bound to ``user_id``), revoked with the stack."""
        conn = await connect(self.owner_dsn)
        try:
            issued = await issue_token(conn, agent_id, user_id=user_id, label=self.token_label)
        finally:
            await conn.close()
        return issued.token

    async def oauth_tokens(self, user: str, scopes: Sequence[str] = TOOL_SCOPES) -> Tokens:
        """``user``'s tokens for this stack's edge from its authorization server, through the
        development sign-in and consent (the development client of the learning agent)."""
        if self.oauth is None:
            raise RuntimeError("this stack runs no authorization server: start it with oauth=True")
        return await self.oauth.tokens(user, resource=self.mcp_url, scopes=scopes)

    async def stop(self) -> None:
        """Stop every service that still runs (the console first, gateway and tool plane before
        context), then the authorization server."""
        for service in (self.console, self.gateway, self.toolplane, self.context):
            if service is not None:
                await service.shutdown()
        await self._stop_oauth.aclose()


def _role_passwords() -> dict[str, str]:
    """The database roles' passwords the suite's fixtures set, by role."""
    return {
        role: password
        for role, variable in ROLE_PASSWORD_ENV.items()
        if (password := os.environ.get(variable))
    }


def _base_environment(otlp_endpoint: str | None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    if otlp_endpoint is None:
        env |= {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}
    else:
        env |= {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_INSECURE": "true",
            # Spans and metrics reach the receiver within a fraction of a second.
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_METRIC_EXPORT_INTERVAL": "250",
        }
    return env


async def _prepare_database(owner_dsn: str, label: str) -> tuple[dict[str, str], str]:
    """Register the tools, issue the demo agent tokens and the stack's operator credential."""
    conn = await connect(owner_dsn)
    try:
        await sync_tools(conn, build_registry())
        tokens = {}
        for name, (agent, user) in DEMO_AGENT_TOKENS.items():
            issued = await issue_token(conn, agent, user_id=user, label=label)
            tokens[name] = issued.token
        await add_operator(conn, STACK_OPERATOR, name="the test stacks' operator")
        operator = await issue_operator_token(conn, STACK_OPERATOR, label=label)
    finally:
        await conn.close()
    return tokens, operator.token


async def start_stack(
    owner_dsn: str,
    state_dir: Path,
    *,
    s3: S3Endpoint | None = None,
    s3_bucket: str = "nemo-snapshots",
    provider_base_url: str | None = None,
    provider: str = "openai",
    otlp_endpoint: str | None = None,
    extra_env: Mapping[str, Mapping[str, str]] | None = None,
    oauth: bool = False,
    pooler: PgBouncer | None = None,
    console: bool = False,
    console_path: str = "",
) -> Stack:
    """Start the three services against ``owner_dsn`` and return once all serve.

    ``provider_base_url`` points the gateway at a model API (``provider`` says which wire
    format); without it the gateway runs on its deterministic baselines. ``s3`` puts snapshots
    in a bucket of that endpoint (created here) instead of ``state_dir/snapshots``.
    ``otlp_endpoint`` (``http://127.0.0.1:PORT``) exports traces and metrics there.
    ``extra_env`` adds variables per service name (context, gateway, toolplane). Role
    passwords come from ``NEMO_DB_CONTEXT_PASSWORD`` / ``NEMO_DB_TOOLPLANE_PASSWORD`` as in the
    suite's database fixtures. ``oauth`` starts a local authorization server first
    (``stack.oauth``), in ``state_dir/oauth``; ``console`` (with ``oauth``) the console too,
    registered there as a client, with the services verifying people's tokens, published under
    ``console_path`` ("/console": every URL it emits must start with it). ``pooler`` puts every
    service's database URL through that PgBouncer.
    """
    if console and not oauth:
        raise ValueError("the console signs people in: start it with oauth=True")
    (state_dir / "logs").mkdir(parents=True, exist_ok=True)
    write_pseudonym_key(state_dir / "pseudonym.key")
    label = f"stack-{secrets.token_hex(4)}"
    agent_tokens, operator_token = await _prepare_database(owner_dsn, label)
    caller_tokens = {identity: secrets.token_urlsafe(24) for identity in CALLER_IDENTITIES}
    role_passwords = _role_passwords()
    if s3 is not None:
        await create_bucket(s3, s3_bucket)
    oauth_exit = contextlib.AsyncExitStack()
    oauth_server = None
    console_port = free_port() if console else 0
    console_secret = secrets.token_urlsafe(32) if console else None
    if oauth:
        published = Ports(0, 0, 0, 0, console_port, console_path)
        clients = [console_client(published, console_secret)] if console_secret else []
        oauth_server = await oauth_exit.enter_async_context(
            running_authorization_server(state_dir / "oauth", seeded_accounts(), clients=clients)
        )
    try:
        stack = await _start_services(
            owner_dsn,
            state_dir,
            caller_tokens,
            agent_tokens,
            label,
            role_passwords,
            s3=s3,
            s3_bucket=s3_bucket,
            provider_base_url=provider_base_url,
            provider=provider,
            otlp_endpoint=otlp_endpoint,
            extra_env=extra_env or {},
            oauth=oauth_server,
            pooler=pooler,
            console_port=console_port,
            console_path=console_path,
            console_secret=console_secret,
        )
    except BaseException:
        await oauth_exit.aclose()
        raise
    stack._stop_oauth = oauth_exit
    stack.operator_token = operator_token
    return stack


async def _start_services(
    owner_dsn: str,
    state_dir: Path,
    caller_tokens: dict[str, str],
    agent_tokens: dict[str, str],
    label: str,
    role_passwords: Mapping[str, str],
    console_port: int = 0,
    console_path: str = "",
    **assembly: Any,
) -> Stack:
    """The three services on free ports, serving; new ports when one was taken meanwhile (the
    console keeps its own, which its registration at the authorization server names)."""
    for attempt in range(1, _START_ATTEMPTS + 1):
        # A port that was free a moment ago can be taken before a service binds it (by another
        # test's connection): then that service exits at start, and the stack gets new ports.
        ports = Ports(
            free_port(), free_port(), free_port(), free_port(), console_port, console_path
        )
        stack = _assemble(
            owner_dsn,
            state_dir,
            ports,
            caller_tokens,
            agent_tokens,
            label,
            envs=service_environments(owner_dsn, ports, caller_tokens, state_dir, role_passwords),
            **assembly,
        )
        try:
            for service in stack.services.values():
                await service.start(wait=False)
            await asyncio.gather(*(service.wait_serving() for service in stack.services.values()))
        except ServiceExitedAtStart:
            await stack.stop()
            if attempt == _START_ATTEMPTS:
                raise
            continue
        except BaseException:
            await stack.stop()
            raise
        return stack
    raise AssertionError("unreachable")


def _assemble(
    owner_dsn: str,
    state_dir: Path,
    ports: Ports,
    caller_tokens: dict[str, str],
    agent_tokens: dict[str, str],
    label: str,
    *,
    envs: dict[str, dict[str, str]],
    s3: S3Endpoint | None,
    s3_bucket: str,
    provider_base_url: str | None,
    provider: str,
    otlp_endpoint: str | None,
    extra_env: Mapping[str, Mapping[str, str]],
    oauth: OAuthServer | None = None,
    pooler: PgBouncer | None = None,
    console_secret: str | None = None,
) -> Stack:
    """The stack's service processes (not started yet) with their environments."""
    if pooler is not None:
        through_pooler(envs, pooler)
    if s3 is not None:
        envs["context"] |= context_snapshot_environment(s3, s3_bucket)
    if provider_base_url is not None:
        envs["gateway"] |= {
            "NEMO_GATEWAY_PROVIDER": provider,
            "NEMO_GATEWAY_LLM_BASE_URL": provider_base_url,
        }
    envs["toolplane"]["NEMO_TOOLPLANE_DOCS_DIR"] = str(_DOCS_DIR)
    names = list(SERVICES)
    if oauth is not None:
        envs["toolplane"] |= toolplane_oauth_environment(oauth.issuer, ports)
        if console_secret is not None:
            for service, people in people_environments(oauth.issuer, ports).items():
                envs[service] |= people
            envs["console"] = console_environment(
                ports, caller_tokens, issuer=oauth.issuer, client_secret=console_secret,
                eval_dir=state_dir / "eval",
            )  # fmt: skip
            names.append("console")
    base = _base_environment(otlp_endpoint)
    logs = state_dir / "logs"
    services = {}
    # The console's probe is at its root, whatever path its pages are under.
    health = {
        "toolplane": ports.mcp_health_url,
        "console": f"http://127.0.0.1:{ports.console}/healthz",
    }
    for name in names:
        env = base | envs[name] | dict(extra_env.get(name, {}))
        services[name] = ServiceProcess(
            name=name,
            address=env[f"NEMO_{name.upper()}_LISTEN_ADDRESS"],
            env=env,
            log_path=logs / f"{name}.log",
            health_url=health.get(name),
            grpc=name != "console",
        )
    return Stack(
        owner_dsn=owner_dsn,
        state_dir=state_dir,
        context=services["context"],
        gateway=services["gateway"],
        toolplane=services["toolplane"],
        mcp_url=ports.mcp_url,
        caller_tokens=caller_tokens,
        agent_tokens=agent_tokens,
        token_label=label,
        oauth=oauth,
        console=services.get("console"),
        console_url=ports.console_url if "console" in services else "",
    )


def through_pooler(envs: dict[str, dict[str, str]], pooler: PgBouncer) -> None:
    """Point every service's database URL at ``pooler`` (transaction pooling on); the tool
    plane's change listener keeps the direct URL."""
    for service in ("context", "toolplane"):
        prefix = f"NEMO_{service.upper()}_DATABASE"
        direct = envs[service][f"{prefix}_URL"]
        envs[service] |= {
            f"{prefix}_URL": pooler.pooled(direct),
            f"{prefix}_TRANSACTION_POOLING": "true",
        }
        if service == "toolplane":
            envs[service][f"{prefix}_DIRECT_URL"] = direct


async def start_replicas(
    owner_dsn: str,
    state_dir: Path,
    *,
    s3: S3Endpoint,
    s3_bucket: str = "nemo-snapshots",
    replicas: int = 2,
    extra_env: Mapping[str, Mapping[str, str]] | None = None,
    pooler: PgBouncer | None = None,
) -> list[Stack]:
    """``replicas`` copies of the stack on one database and one S3 bucket, as the replicas of a
    deployment: one pseudonym key and one set of tokens, and every gateway and tool plane
    balancing over every context replica (a list of addresses); all through ``pooler`` when
    given."""
    write_pseudonym_key(state_dir / "pseudonym.key")
    label = f"replicas-{secrets.token_hex(4)}"
    agent_tokens, operator_token = await _prepare_database(owner_dsn, label)
    caller_tokens = {identity: secrets.token_urlsafe(24) for identity in CALLER_IDENTITIES}
    role_passwords = _role_passwords()
    await create_bucket(s3, s3_bucket)
    ports = [Ports(free_port(), free_port(), free_port(), free_port()) for _ in range(replicas)]
    contexts = ",".join(f"127.0.0.1:{replica.context}" for replica in ports)
    stacks = []
    for n, replica_ports in enumerate(ports):
        replica_dir = state_dir / f"replica-{n}"
        (replica_dir / "logs").mkdir(parents=True)
        envs = service_environments(
            owner_dsn, replica_ports, caller_tokens, replica_dir, role_passwords
        )
        envs["context"]["NEMO_CONTEXT_PSEUDONYM_KEY_FILE"] = str(state_dir / "pseudonym.key")
        envs["gateway"]["NEMO_GATEWAY_CONTEXT_ADDRESS"] = contexts
        envs["toolplane"]["NEMO_TOOLPLANE_CONTEXT_ADDRESS"] = contexts
        stacks.append(
            _assemble(
                owner_dsn,
                replica_dir,
                replica_ports,
                caller_tokens,
                agent_tokens,
                label,
                envs=envs,
                s3=s3,
                s3_bucket=s3_bucket,
                provider_base_url=None,
                provider="openai",
                otlp_endpoint=None,
                extra_env=extra_env or {},
                pooler=pooler,
            )
        )
    try:
        for stack in stacks:
            for service in stack.services.values():
                await service.start(wait=False)
        await asyncio.gather(
            *(service.wait_serving() for stack in stacks for service in stack.services.values())
        )
    except BaseException:
        for stack in stacks:
            await stack.stop()
        raise
    for stack in stacks:
        stack.operator_token = operator_token
    return stacks
