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

Processes get SIGTERM from the kernel if the test process dies (PR_SET_PDEATHSIG), so none
outlives its test run.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import aioboto3
import grpc
import grpc.aio
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nemo_core.db import connect, dsn_with
from nemo_core.settings import DEFAULT_CALLER_TOKEN_METADATA_KEY
from nemo_testing.ports import free_port
from nemo_testing.s3 import S3Endpoint
from nemo_toolplane.tokens import issue_token
from nemo_toolplane.tool_sync import sync_tools
from nemo_toolplane.tools import build_registry

STARTUP_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 10.0

#: Every caller identity of the services' ACLs, and the services each may call.
CALLER_IDENTITIES: Mapping[str, tuple[str, ...]] = {
    "gateway": ("context",),
    "toolplane": ("context",),
    "audit": ("context",),
    "internal": ("gateway", "toolplane"),
    "operator": ("toolplane",),
}

#: Demo agent tokens issued for every stack: name -> (agent id, user the token is bound to).
DEMO_AGENT_TOKENS: Mapping[str, tuple[str, str | None]] = {
    "learning-agent": ("learning-agent", "U-P1"),
    "research-agent": ("research-agent", None),
    "engineering-agent": ("engineering-agent", None),
    "mentor-active": ("learning-agent", "U-M1"),
    "mentor-inactive": ("learning-agent", "U-M2"),
}

#: The ``start_stack`` test fixture: ``await start_stack(dsn=None, **options)`` starts a fresh
#: stack (on the session database unless ``dsn`` is given) that stops when the test ends.
StackFactory = Callable[..., Awaitable["Stack"]]

#: The repository's docs/ (the corpus of the tool plane's docs tools).
_DOCS_DIR = Path(__file__).resolve().parents[4] / "docs"


def _die_with_parent() -> None:
    """Run in the child before exec: the kernel sends it SIGTERM when the test process dies."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


async def grpc_serving(address: str) -> bool:
    """Whether the gRPC health service at ``address`` reports SERVING."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
        except grpc.aio.AioRpcError:
            return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


async def http_ok(url: str) -> bool:
    """Whether ``url`` answers 200."""
    async with httpx.AsyncClient(timeout=1.0) as client:
        try:
            return (await client.get(url)).status_code == 200
        except httpx.HTTPError:
            return False


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
        log = _open_log(self.log_path)
        try:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                f"nemo_{self.name}",
                env=self.env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()
        if wait:
            await self.wait_serving()

    async def serving(self) -> bool:
        """Whether gRPC health says SERVING (and the MCP edge answers, for the tool plane)."""
        if not await grpc_serving(self.address):
            return False
        return self.health_url is None or await http_ok(self.health_url)

    async def wait_serving(self, seconds: float = STARTUP_TIMEOUT_SECONDS) -> None:
        deadline = time.monotonic() + seconds
        while not await self.serving():
            if self.process is not None and (code := self.process.returncode) is not None:
                raise RuntimeError(
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
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

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

    @property
    def services(self) -> dict[str, ServiceProcess]:
        return {"context": self.context, "gateway": self.gateway, "toolplane": self.toolplane}

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

    async def stop(self) -> None:
        """Stop every service that still runs (gateway and tool plane before context)."""
        for service in (self.gateway, self.toolplane, self.context):
            await service.shutdown()


def _open_log(path: Path) -> BinaryIO:
    return path.open("ab")


def _prepare_state_dir(state_dir: Path) -> Path:
    """Create the state directory and a fresh pseudonym key file in it; returns the key file."""
    (state_dir / "logs").mkdir(parents=True, exist_ok=True)
    key_file = state_dir / "pseudonym.key"
    key_file.write_text(secrets.token_hex(32) + "\n", encoding="utf-8")
    return key_file


def _callers_of(service: str, tokens: Mapping[str, str]) -> str:
    return json.dumps(
        {
            identity: tokens[identity]
            for identity, targets in CALLER_IDENTITIES.items()
            if service in targets
        }
    )


async def _create_bucket(s3: S3Endpoint, bucket: str) -> None:
    session = aioboto3.Session(
        aws_access_key_id=s3.access_key_id,
        aws_secret_access_key=s3.secret_access_key,
        region_name=s3.region,
    )
    async with session.client("s3", endpoint_url=s3.url) as client:
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            await client.create_bucket(Bucket=bucket)


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


async def _prepare_database(owner_dsn: str, label: str) -> dict[str, str]:
    """Register the tools and issue the demo agent tokens."""
    conn = await connect(owner_dsn)
    try:
        await sync_tools(conn, build_registry())
        tokens = {}
        for name, (agent, user) in DEMO_AGENT_TOKENS.items():
            issued = await issue_token(conn, agent, user_id=user, label=label)
            tokens[name] = issued.token
    finally:
        await conn.close()
    return tokens


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
) -> Stack:
    """Start the three services against ``owner_dsn`` and return once all serve.

    ``provider_base_url`` points the gateway at a model API (``provider`` says which wire
    format); without it the gateway runs on its deterministic baselines. ``s3`` puts snapshots
    in a bucket of that endpoint (created here) instead of ``state_dir/snapshots``.
    ``otlp_endpoint`` (``http://127.0.0.1:PORT``) exports traces and metrics there.
    ``extra_env`` adds variables per service name (context, gateway, toolplane). Role
    passwords come from ``NEMO_DB_CONTEXT_PASSWORD`` / ``NEMO_DB_TOOLPLANE_PASSWORD`` as in the
    suite's database fixtures.
    """
    key_file = _prepare_state_dir(state_dir)
    label = f"stack-{secrets.token_hex(4)}"
    agent_tokens = await _prepare_database(owner_dsn, label)
    caller_tokens = {identity: secrets.token_urlsafe(24) for identity in CALLER_IDENTITIES}
    base = _base_environment(otlp_endpoint)
    context_address = f"127.0.0.1:{free_port()}"
    mcp_port = free_port()
    context_env = {
        "NEMO_CONTEXT_LISTEN_ADDRESS": context_address,
        "NEMO_CONTEXT_DATABASE_URL": dsn_with(
            owner_dsn,
            user="nemo_context",
            password=os.environ.get("NEMO_DB_CONTEXT_PASSWORD") or None,
        ),
        "NEMO_CONTEXT_CALLER_TOKENS": _callers_of("context", caller_tokens),
        "NEMO_CONTEXT_PSEUDONYM_KEY_FILE": str(key_file),
        "NEMO_CONTEXT_SNAPSHOT_DIR": str(state_dir / "snapshots"),
    }
    if s3 is not None:
        await _create_bucket(s3, s3_bucket)
        context_env |= {
            "NEMO_CONTEXT_SNAPSHOT_BACKEND": "s3",
            "NEMO_CONTEXT_SNAPSHOT_S3_BUCKET": s3_bucket,
            "NEMO_CONTEXT_SNAPSHOT_S3_ENDPOINT_URL": s3.url,
            "NEMO_CONTEXT_SNAPSHOT_S3_REGION": s3.region,
            "AWS_ACCESS_KEY_ID": s3.access_key_id,
            "AWS_SECRET_ACCESS_KEY": s3.secret_access_key,
        }
    gateway_env = {
        "NEMO_GATEWAY_LISTEN_ADDRESS": f"127.0.0.1:{free_port()}",
        "NEMO_GATEWAY_CONTEXT_ADDRESS": context_address,
        "NEMO_GATEWAY_CALLER_TOKENS": _callers_of("gateway", caller_tokens),
        "NEMO_GATEWAY_CLIENT_TOKEN": caller_tokens["gateway"],
    }
    if provider_base_url is not None:
        gateway_env |= {
            "NEMO_GATEWAY_PROVIDER": provider,
            "NEMO_GATEWAY_LLM_BASE_URL": provider_base_url,
        }
    toolplane_env = {
        "NEMO_TOOLPLANE_LISTEN_ADDRESS": f"127.0.0.1:{free_port()}",
        "NEMO_TOOLPLANE_MCP_HOST": "127.0.0.1",
        "NEMO_TOOLPLANE_MCP_PORT": str(mcp_port),
        "NEMO_TOOLPLANE_DATABASE_URL": dsn_with(
            owner_dsn,
            user="nemo_toolplane",
            password=os.environ.get("NEMO_DB_TOOLPLANE_PASSWORD") or None,
        ),
        "NEMO_TOOLPLANE_CONTEXT_ADDRESS": context_address,
        "NEMO_TOOLPLANE_CALLER_TOKENS": _callers_of("toolplane", caller_tokens),
        "NEMO_TOOLPLANE_CLIENT_TOKEN": caller_tokens["toolplane"],
        "NEMO_TOOLPLANE_DOCS_DIR": str(_DOCS_DIR),
    }
    extra = extra_env or {}
    envs = {
        "context": base | context_env | dict(extra.get("context", {})),
        "gateway": base | gateway_env | dict(extra.get("gateway", {})),
        "toolplane": base | toolplane_env | dict(extra.get("toolplane", {})),
    }
    logs = state_dir / "logs"
    services = {
        name: ServiceProcess(
            name=name,
            address=env[f"NEMO_{name.upper()}_LISTEN_ADDRESS"],
            env=env,
            log_path=logs / f"{name}.log",
            health_url=f"http://127.0.0.1:{mcp_port}/health" if name == "toolplane" else None,
        )
        for name, env in envs.items()
    }
    stack = Stack(
        owner_dsn=owner_dsn,
        state_dir=state_dir,
        context=services["context"],
        gateway=services["gateway"],
        toolplane=services["toolplane"],
        mcp_url=f"http://127.0.0.1:{mcp_port}/mcp",
        caller_tokens=caller_tokens,
        agent_tokens=agent_tokens,
        token_label=label,
    )
    try:
        for service in services.values():
            await service.start(wait=False)
        await asyncio.gather(*(service.wait_serving() for service in services.values()))
    except BaseException:
        await stack.stop()
        raise
    return stack
