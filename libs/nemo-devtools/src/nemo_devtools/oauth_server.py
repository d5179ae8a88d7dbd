"""The local authorization server as a process: oidc-provider on Node 22, from ``local-oauth/``.

`nemo dev up` runs it beside the services and the tests run it as a peer; production points the
edge at the platform's OpenID provider instead (docs/operations/oauth.md). Its packages are
pinned by ``local-oauth/package-lock.json`` and installed once per lockfile
(:mod:`nemo_devtools.node`). It signs in the accounts it is given, with one development
password, and keeps its signing key, clients, grants and refresh tokens in its state directory,
so tokens survive a restart. Ready once its discovery document answers with its issuer.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from nemo_devtools import node
from nemo_devtools.processes import log_tail, spawn_logged

#: The Node project: its package.json, lock and server modules.
PROJECT_DIR = Path(__file__).resolve().parents[4] / "local-oauth"
DEFAULT_PORT = 50055
#: The development client of the learning agent: public, PKCE, loopback redirect on any port.
DEV_CLIENT_ID = "nemo-dev-learning-agent"
#: Every seeded user signs in with it. Development only: the server exists for `make run` and
#: the tests and is never deployed.
DEV_PASSWORD = "nemo-dev-password"  # noqa: S105
#: What a development client's loopback redirect looks like (any port, RFC 8252).
DEV_REDIRECT_URI = "http://127.0.0.1/callback"
#: The scopes the tool plane's tools ask for, exactly its ``Scope`` enum (which this library
#: may not import; ``tests/contracts/test_registrations.py`` checks they are equal). The server
#: is given them on its command line and offers every one for every resource.
TOOL_SCOPES: tuple[str, ...] = (
    "learner.read",
    "learner.write",
    "knowledge.read",
    "docs.read",
    "application.read",
    "application.write",
)
SCOPES: tuple[str, ...] = ("openid", "offline_access", *TOOL_SCOPES)
STARTUP_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 10.0


class AuthorizationServerUnavailable(RuntimeError):
    """The local authorization server cannot be installed or did not come up; says why."""


@dataclass(frozen=True)
class Account:
    """A user who may sign in: the platform's user id (the tokens' ``sub``) and a role."""

    id: str
    role: str


def issuer_url(port: int) -> str:
    """The issuer of a local authorization server on ``port``."""
    return f"http://127.0.0.1:{port}"


async def discovery(http: httpx.AsyncClient, issuer: str) -> dict[str, Any]:
    """The OpenID provider metadata of ``issuer``; raises :class:`httpx.HTTPError`."""
    response = await http.get(f"{issuer.rstrip('/')}/.well-known/openid-configuration")
    response.raise_for_status()
    metadata: dict[str, Any] = response.json()
    return metadata


async def serving(issuer: str) -> bool:
    """Whether ``issuer`` answers its discovery document, naming itself."""
    async with httpx.AsyncClient(timeout=2.0, trust_env=False) as http:
        try:
            return (await discovery(http, issuer)).get("issuer") == issuer
        except (httpx.HTTPError, ValueError):
            return False


def _write_accounts(state_dir: Path, accounts: Iterable[Account]) -> Path:
    """The accounts file the server reads, in ``state_dir`` (created)."""
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state_dir / "accounts.json"
    path.write_text(json.dumps([vars(account) for account in accounts]), "utf-8")
    return path


def _server_modules(tools: node.NodeTools) -> Path:
    """The server's modules, copied into a directory of the install named by their digest: from
    there their imports resolve to the install's packages."""
    sources = sorted(PROJECT_DIR.glob("*.mjs"))
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in sources)).hexdigest()[:16]
    target = tools.root / f"server-{digest}"
    if not target.is_dir():
        staging = Path(tempfile.mkdtemp(prefix=".server-", dir=tools.root))
        for path in sources:
            shutil.copyfile(path, staging / path.name)
        try:
            staging.rename(target)
        except OSError:  # another run copied the same modules first
            shutil.rmtree(staging, ignore_errors=True)
    return target


@dataclass
class AuthorizationServer:
    """A running local authorization server."""

    issuer: str
    client_id: str
    password: str
    process: asyncio.subprocess.Process
    log_path: Path
    #: Its signing key, clients, grants and refresh tokens.
    state_dir: Path

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    def log_tail(self, lines: int = 20) -> str:
        return log_tail(self.log_path, lines)

    async def stop(self, seconds: float = STOP_TIMEOUT_SECONDS) -> int:
        """SIGTERM, then SIGKILL if it is still running after ``seconds``; the exit code."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), seconds)
            except TimeoutError:
                self.process.kill()
        return await self.process.wait()


def _clients_arguments(state_dir: Path, clients: list[Mapping[str, Any]]) -> list[str]:
    """``--clients FILE`` naming the registered clients, written privately (they hold
    secrets); nothing without any."""
    if not clients:
        return []
    path = state_dir / "clients.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(clients, handle)
    return ["--clients", str(path)]


async def start_authorization_server(
    port: int,
    state_dir: Path,
    accounts: Iterable[Account],
    *,
    log_path: Path,
    resources: Iterable[str] = (),
    opaque_resources: Iterable[str] = (),
    clients: Iterable[Mapping[str, Any]] = (),
    client_id: str = DEV_CLIENT_ID,
    password: str = DEV_PASSWORD,
    seconds: float = STARTUP_TIMEOUT_SECONDS,
) -> AuthorizationServer:
    """Install the pinned packages if needed, start the server on 127.0.0.1:``port`` and return
    once it serves. Resource servers on loopback need no listing; ``resources`` adds others, and
    ``opaque_resources`` get opaque access tokens (to be introspected) instead of JWTs.
    ``clients`` are registered beside the development client (RFC 7591 metadata: the console).
    Raises :class:`AuthorizationServerUnavailable` (with the log's tail) when it cannot."""
    try:
        tools = await asyncio.to_thread(node.install, PROJECT_DIR)
    except node.NodeToolsUnavailable as error:
        raise AuthorizationServerUnavailable(
            f"the local authorization server cannot be installed: {error}"
        ) from error
    accounts_file = _write_accounts(state_dir, accounts)
    issuer = issuer_url(port)
    modules = await asyncio.to_thread(_server_modules, tools)
    argv = [
        str(tools.node),
        str(modules / "server.mjs"),
        *("--issuer", issuer, "--state-dir", str(state_dir)),
        *("--accounts", str(accounts_file), "--dev-client-id", client_id),
        *("--dev-password", password, "--dev-redirect-uri", DEV_REDIRECT_URI),
        *(argument for scope in TOOL_SCOPES for argument in ("--tool-scope", scope)),
        *(argument for resource in resources for argument in ("--resource", resource)),
        *(arg for resource in opaque_resources for arg in ("--opaque-resource", resource)),
        *_clients_arguments(state_dir, list(clients)),
    ]
    # Only what the server needs: none of the services' settings or secrets.
    env = {"PATH": tools.env()["PATH"]}
    process = await spawn_logged(argv, env, log_path, cwd=modules)
    server = AuthorizationServer(issuer, client_id, password, process, log_path, state_dir)
    deadline = time.monotonic() + seconds
    while not await serving(issuer):
        if process.returncode is not None or time.monotonic() > deadline:
            await server.stop()
            raise AuthorizationServerUnavailable(
                f"the local authorization server did not start on {issuer}"
                f" (exit code {process.returncode}); its log ends with:\n{server.log_tail()}"
            )
        await asyncio.sleep(0.1)
    return server
