"""The three service processes on one machine, and the console beside them: their environment,
their start and readiness.

Shared by `nemo dev up` and by the cross-service test launcher (``tests.stack``), so both
start the services the same way: ``python -m nemo_<service>`` in its own session, dying with its
parent, its output appended to a log file (:func:`nemo_devtools.processes.spawn_logged`), ready
once gRPC health reports SERVING (and, for the tool plane, the MCP edge's ``/health`` answers;
for the console, its ``/healthz``).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nemo_core.db import dsn_with
from nemo_devtools.processes import log_tail as log_tail
from nemo_devtools.processes import spawn_logged as spawn_logged
from nemo_toolplane.mcp.origins import LOOPBACK_HOSTS, LOOPBACK_ORIGINS

#: The services, in the order they start (context first: the others call it).
SERVICES: tuple[str, ...] = ("context", "gateway", "toolplane")

#: Every caller identity of the services' ACLs, and the services each may call.
CALLER_IDENTITIES: Mapping[str, tuple[str, ...]] = {
    "gateway": ("context",),
    "toolplane": ("context",),
    "audit": ("context",),
    "internal": ("gateway", "toolplane"),
    "platform": ("toolplane", "context"),
    "operator": ("toolplane",),
    "console": ("toolplane", "context", "gateway"),
}


#: The console's client id at the local authorization server.
CONSOLE_CLIENT_ID = "nemo-console"


@dataclass(frozen=True)
class Ports:
    """Where the services listen (on 127.0.0.1); the console's 0 when it does not run."""

    context: int
    gateway: int
    toolplane: int
    mcp: int
    console: int = 0
    #: The path the console is published under ("" at the root).
    console_path: str = ""

    @property
    def console_url(self) -> str:
        return f"http://127.0.0.1:{self.console}{self.console_path}"

    @property
    def people_audience(self) -> str:
        """The people's API as the console asks tokens for it and the services accept them."""
        return f"http://127.0.0.1:{self.console}/people"

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.mcp}/mcp"

    @property
    def mcp_health_url(self) -> str:
        return f"http://127.0.0.1:{self.mcp}/health"


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable by its owner only; readers see the old content or
    the new, never a half-written file."""
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(temporary, 0o600)  # O_CREAT's mode does not apply to a file left by a crashed run
    os.replace(temporary, path)


def write_pseudonym_key(path: Path) -> Path:
    """A new random pseudonym key in ``path``; returns ``path``."""
    write_private(path, secrets.token_hex(32) + "\n")
    return path


def load_or_create_pseudonym_key(path: Path) -> Path:
    """The pseudonym key in ``path``, created if missing: kept across runs so learner refs stay
    stable."""
    if not path.exists():
        write_pseudonym_key(path)
    return path


#: The snapshot master key of a local stack, in its state directory: kept across runs, so
#: snapshots written by one run are read by the next and by `nemo rights`.
MASTER_KEY_FILE = "snapshot-master.key"


def load_or_create_master_key(state_dir: Path) -> Path:
    """The snapshot master key of the stack whose state is ``state_dir``, created if missing."""
    path = state_dir / MASTER_KEY_FILE
    if not path.exists():
        state_dir.mkdir(parents=True, exist_ok=True)
        write_private(path, secrets.token_hex(32) + "\n")
    return path


def load_or_create_session_key(state_dir: Path) -> Path:
    """The console's session key of the stack whose state is ``state_dir``, created if missing:
    kept across runs, so a person stays signed in when the stack restarts."""
    path = state_dir / "console-session.key"
    if not path.exists():
        state_dir.mkdir(parents=True, exist_ok=True)
        write_private(path, secrets.token_urlsafe(48) + "\n")
    return path


def callers_of(service: str, tokens: Mapping[str, str]) -> str:
    """The caller tokens JSON a service accepts: those of the identities that may call it."""
    return json.dumps(
        {
            identity: tokens[identity]
            for identity, targets in CALLER_IDENTITIES.items()
            if service in targets
        }
    )


def service_environments(
    owner_dsn: str,
    ports: Ports,
    tokens: Mapping[str, str],
    state_dir: Path,
    role_passwords: Mapping[str, str],
) -> dict[str, dict[str, str]]:
    """The ``NEMO_*`` settings of each service process.

    ``tokens`` holds one caller token per identity of :data:`CALLER_IDENTITIES`;
    ``role_passwords`` the passwords of the ``nemo_context`` / ``nemo_toolplane`` database roles
    (a role without one connects without a password). The context service's pseudonym key is
    ``state_dir/pseudonym.key``, its snapshot master key ``state_dir/snapshot-master.key``
    (created here when missing) and its snapshots go to ``state_dir/snapshots``.
    """
    context_dsn = dsn_with(
        owner_dsn, user="nemo_context", password=role_passwords.get("nemo_context")
    )
    toolplane_dsn = dsn_with(
        owner_dsn, user="nemo_toolplane", password=role_passwords.get("nemo_toolplane")
    )
    context_address = f"127.0.0.1:{ports.context}"
    return {
        "context": {
            "NEMO_CONTEXT_LISTEN_ADDRESS": context_address,
            "NEMO_CONTEXT_DATABASE_URL": context_dsn,
            "NEMO_CONTEXT_CALLER_TOKENS": callers_of("context", tokens),
            "NEMO_CONTEXT_PSEUDONYM_KEY_FILE": str(state_dir / "pseudonym.key"),
            "NEMO_CONTEXT_SNAPSHOT_DIR": str(state_dir / "snapshots"),
            "NEMO_CONTEXT_SNAPSHOT_MASTER_KEY_FILE": str(load_or_create_master_key(state_dir)),
        },
        "gateway": {
            "NEMO_GATEWAY_LISTEN_ADDRESS": f"127.0.0.1:{ports.gateway}",
            "NEMO_GATEWAY_CONTEXT_ADDRESS": context_address,
            "NEMO_GATEWAY_CALLER_TOKENS": callers_of("gateway", tokens),
            "NEMO_GATEWAY_CLIENT_TOKEN": tokens["gateway"],
        },
        "toolplane": {
            "NEMO_TOOLPLANE_LISTEN_ADDRESS": f"127.0.0.1:{ports.toolplane}",
            "NEMO_TOOLPLANE_MCP_HOST": "127.0.0.1",
            "NEMO_TOOLPLANE_MCP_PORT": str(ports.mcp),
            # A browser-based inspector on this machine may connect; other sites, and names
            # rebound to 127.0.0.1, may not.
            "NEMO_TOOLPLANE_ALLOWED_ORIGINS": json.dumps(LOOPBACK_ORIGINS),
            "NEMO_TOOLPLANE_ALLOWED_HOSTS": json.dumps(LOOPBACK_HOSTS),
            "NEMO_TOOLPLANE_DATABASE_URL": toolplane_dsn,
            "NEMO_TOOLPLANE_CONTEXT_ADDRESS": context_address,
            "NEMO_TOOLPLANE_CALLER_TOKENS": callers_of("toolplane", tokens),
            "NEMO_TOOLPLANE_CLIENT_TOKEN": tokens["toolplane"],
        },
    }


def console_client(ports: Ports, secret: str) -> dict[str, object]:
    """The console's registration at the local authorization server: a confidential client
    that signs people in with the authorization code and PKCE, back to its callback."""
    return {
        "client_id": CONSOLE_CLIENT_ID,
        "client_secret": secret,
        "client_name": "Nemo console (development)",
        "application_type": "web",
        "token_endpoint_auth_method": "client_secret_basic",
        "grant_types": ["authorization_code"],
        "response_types": ["code"],
        "redirect_uris": [f"{ports.console_url}/auth/callback"],
    }


def people_environments(issuer: str, ports: Ports) -> dict[str, dict[str, str]]:
    """What the tool plane and the context service need to verify people's access tokens."""
    values = {
        "PEOPLE_ISSUER": issuer,
        "PEOPLE_AUDIENCE": ports.people_audience,
        "PEOPLE_CLIENTS": json.dumps([CONSOLE_CLIENT_ID]),
    }
    return {
        service: {f"NEMO_{service.upper()}_{key}": value for key, value in values.items()}
        for service in ("toolplane", "context")
    }


def console_environment(
    ports: Ports,
    tokens: Mapping[str, str],
    *,
    issuer: str,
    client_secret: str,
    eval_dir: Path,
) -> dict[str, str]:
    """The console's settings: where it listens and is reached, the services, sign-in."""
    return {
        "NEMO_CONSOLE_LISTEN_ADDRESS": f"127.0.0.1:{ports.console}",
        "NEMO_CONSOLE_PUBLIC_URL": ports.console_url,
        "NEMO_CONSOLE_CLIENT_TOKEN": tokens["console"],
        "NEMO_CONSOLE_TOOLPLANE_ADDRESS": f"127.0.0.1:{ports.toolplane}",
        "NEMO_CONSOLE_CONTEXT_ADDRESS": f"127.0.0.1:{ports.context}",
        "NEMO_CONSOLE_GATEWAY_ADDRESS": f"127.0.0.1:{ports.gateway}",
        "NEMO_CONSOLE_OIDC_ISSUER": issuer,
        "NEMO_CONSOLE_OIDC_CLIENT_ID": CONSOLE_CLIENT_ID,
        "NEMO_CONSOLE_OIDC_CLIENT_SECRET": client_secret,
        "NEMO_CONSOLE_PEOPLE_AUDIENCE": ports.people_audience,
        "NEMO_CONSOLE_EVAL_DIR": str(eval_dir),
    }


def toolplane_oauth_environment(issuer: str, ports: Ports) -> dict[str, str]:
    """The tool plane's settings accepting OAuth access tokens of ``issuer`` for its edge."""
    return {
        "NEMO_TOOLPLANE_OAUTH_ISSUER": issuer,
        "NEMO_TOOLPLANE_OAUTH_RESOURCE": ports.mcp_url,
    }


async def spawn_service(
    service: str, env: Mapping[str, str], log_path: Path
) -> asyncio.subprocess.Process:
    """Start ``python -m nemo_<service>`` with exactly ``env``, appending its output to
    ``log_path``. It runs in its own session (Ctrl-C in a terminal reaches only the parent, which
    stops the services in order) and dies with its parent."""
    return await spawn_logged((sys.executable, "-m", f"nemo_{service}"), env, log_path)


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
