"""`nemo dev up`: the whole stack on one machine, on embedded defaults.

Starts embedded PostgreSQL (or uses ``DATABASE_URL``), migrates, seeds, issues demo agent tokens,
starts the local authorization server (an OpenID provider on Node, which signs in the seeded
users, the console registered there as a client), the three services and the console as
separate processes, waits until each serves, writes ``<state-dir>/dev.env`` and stops
everything it started on Ctrl-C or SIGTERM. With
``NEMO_GATEWAY_PROVIDER=local`` it first starts the local model server (SmolLM2-135M-Instruct,
built by ``make local-model``) and points the gateway at it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import secrets
import shlex
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path

from nemo_core.db import connect, dsn_with
from nemo_core.settings import DEFAULT_CALLER_TOKEN_METADATA_KEY
from nemo_devtools.oauth_server import DEV_PASSWORD, start_authorization_server
from nemo_ops import local_model, local_oauth, oauth_token
from nemo_ops.embedded_pg import EmbeddedPostgres, start_embedded_postgres
from nemo_ops.migrate import migrate, role_passwords_from_env
from nemo_ops.seed import seed
from nemo_ops.service_processes import CALLER_IDENTITIES as CALLER_IDENTITIES
from nemo_ops.service_processes import (
    SERVICES,
    Ports,
    console_client,
    console_environment,
    grpc_serving,
    http_ok,
    load_or_create_pseudonym_key,
    load_or_create_session_key,
    people_environments,
    service_environments,
    spawn_service,
    toolplane_oauth_environment,
    write_private,
)
from nemo_ops.service_processes import log_tail as read_log_tail
from nemo_toolplane import operators
from nemo_toolplane.tokens import issue_token, revoke_tokens_labelled
from nemo_toolplane.tool_sync import sync_tools
from nemo_toolplane.tools import build_registry

HELP = "the local stack: `up` starts it, `oauth-token` gets a person's OAuth token from it"

DATABASE_NAME = "nemo"
DEV_TOKEN_LABEL = "dev-stack"  # noqa: S105  the label of dev tokens, not a token
STARTUP_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 8.0

#: The demo privacy operator: `nemo rights` acts as this person on the local stack.
DEMO_OPERATOR = "privacy-demo"
#: The demo operator of the console, linked to the seeded administrator: signing in to the
#: console as U-2041-A1 is signing in as this operator.
CONSOLE_OPERATOR = ("console-demo", "U-2041-A1")

#: Demo agents and the user a token is bound to (None: unbound).
DEMO_AGENTS: Mapping[str, str | None] = {
    "learning-agent": "U-2041-P1",
    "research-agent": None,
    "engineering-agent": None,
}


def _progress(message: str) -> None:
    print(f"nemo dev: {message}", file=sys.stderr, flush=True)


def load_or_create_caller_tokens(path: Path) -> dict[str, str]:
    """One token per caller identity, kept across runs so clients' dev.env stays valid."""
    tokens: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
    missing = [identity for identity in CALLER_IDENTITIES if identity not in tokens]
    for identity in missing:
        tokens[identity] = secrets.token_urlsafe(32)
    if missing:
        write_private(path, json.dumps(tokens, indent=2, sort_keys=True) + "\n")
    return tokens


async def _prepare_database(owner_dsn: str) -> None:
    await migrate(owner_dsn, role_passwords=role_passwords_from_env(os.environ), progress=_progress)
    report = await seed(owner_dsn, progress=_progress)
    _progress(f"seeded {report.rows} rows")
    conn = await connect(owner_dsn)
    try:
        tools = await sync_tools(conn, build_registry())
    finally:
        await conn.close()
    _progress(f"tool registry: {len(tools.added)} added, {len(tools.updated)} updated")


async def _ensure_database(server_dsn: str) -> str:
    conn = await connect(server_dsn)
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DATABASE_NAME)
        if not exists:
            await conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
            _progress(f"created database {DATABASE_NAME}")
    finally:
        await conn.close()
    return dsn_with(server_dsn, database=DATABASE_NAME)


async def _issue_demo_tokens(owner_dsn: str) -> tuple[dict[str, str], str]:
    """The demo agents' tokens and the demo privacy operator's credential."""
    conn = await connect(owner_dsn)
    try:
        async with conn.transaction():
            # Tokens of an earlier run stop working: only the ones printed now are valid.
            await revoke_tokens_labelled(conn, DEV_TOKEN_LABEL)
            issued = {
                agent: await issue_token(conn, agent, user_id=user, label=DEV_TOKEN_LABEL)
                for agent, user in DEMO_AGENTS.items()
            }
            await conn.execute(
                "INSERT INTO toolplane.operators (id, name) VALUES ($1, 'privacy staff (demo)')"
                " ON CONFLICT (id) DO NOTHING",
                DEMO_OPERATOR,
            )
            await operators.add_operator(
                conn, CONSOLE_OPERATOR[0], name="console (demo)", user_id=CONSOLE_OPERATOR[1]
            )
            await conn.execute(
                "UPDATE toolplane.operator_tokens SET revoked_at = now()"
                " WHERE operator_id = $1 AND label = $2 AND revoked_at IS NULL",
                DEMO_OPERATOR,
                DEV_TOKEN_LABEL,
            )
            operator = await operators.issue_operator_token(
                conn, DEMO_OPERATOR, label=DEV_TOKEN_LABEL
            )
    finally:
        await conn.close()
    return {agent: token.token for agent, token in issued.items()}, operator.token


class ServiceProcesses:
    """The three service processes, their logs and their shutdown."""

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self.processes: dict[str, asyncio.subprocess.Process] = {}

    async def start(self, name: str, env: Mapping[str, str]) -> None:
        self.processes[name] = await spawn_service(
            name, {**os.environ, **env}, self._log_dir / f"{name}.log"
        )

    async def start_oauth(
        self, port: int, state_dir: Path, clients: Sequence[Mapping[str, object]]
    ) -> str:
        """The local authorization server, serving its discovery document before the services
        start; returns its issuer."""
        name = "oauth"
        server = await start_authorization_server(
            port,
            state_dir,
            local_oauth.seeded_accounts(),
            log_path=self._log_dir / f"{name}.log",
            clients=clients,
        )
        self.processes[name] = server.process
        _progress(f"authorization server is serving at {server.issuer}")
        return server.issuer

    async def start_local_model(self, port: int) -> None:
        """The local model server, loaded and serving before the gateway starts."""
        name = "local-model"
        log_path = self._log_dir / f"{name}.log"
        _progress(f"loading {local_model.MODEL_NAME} on {local_model.base_url(port)}")
        self.processes[name] = process = await local_model.spawn_local_model(port, log_path)
        seconds = await local_model.wait_until_loaded(process, port, log_path, progress=_progress)
        _progress(f"{local_model.MODEL_NAME} loaded in {seconds:.1f} s")

    def exited(self) -> dict[str, int]:
        """Services whose process has ended, with their exit codes."""
        return {
            name: code
            for name, process in self.processes.items()
            if (code := process.returncode) is not None
        }

    def log_tail(self, name: str, lines: int = 20) -> str:
        return read_log_tail(self._log_dir / f"{name}.log", lines)

    async def stop(self, seconds: float = STOP_TIMEOUT_SECONDS) -> None:
        """SIGTERM every service, wait for the graceful stop, SIGKILL what is left."""
        for process in self.processes.values():
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + seconds
        for name, process in self.processes.items():
            try:
                await asyncio.wait_for(process.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                _progress(f"{name} did not stop in {seconds:.0f} s; killing it")
                process.kill()
                await process.wait()


async def _wait_until_ready(services: ServiceProcesses, ports: Ports, stop: asyncio.Event) -> bool:
    checks: dict[str, Callable[[], Awaitable[bool]]] = {
        "context": lambda: grpc_serving(f"127.0.0.1:{ports.context}"),
        "gateway": lambda: grpc_serving(f"127.0.0.1:{ports.gateway}"),
        "toolplane": lambda: grpc_serving(f"127.0.0.1:{ports.toolplane}"),
        "mcp edge": lambda: http_ok(ports.mcp_health_url),
        "console": lambda: http_ok(f"http://127.0.0.1:{ports.console}/healthz"),
    }
    pending = dict(checks)
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while pending and not stop.is_set():
        for name, code in services.exited().items():
            _progress(f"{name} exited with code {code} during startup; its log ends with:")
            print(services.log_tail(name), file=sys.stderr)
            return False
        for name, check in list(pending.items()):
            if await check():
                _progress(f"{name} is serving")
                del pending[name]
        if time.monotonic() > deadline:
            _progress(f"not serving after {STARTUP_TIMEOUT_SECONDS:.0f} s: {', '.join(pending)}")
            return False
        if pending:
            await asyncio.sleep(0.2)
    return not pending


def dev_env(
    owner_dsn: str,
    ports: Ports,
    caller_tokens: Mapping[str, str],
    agent_tokens: Mapping[str, str],
    *,
    oauth_issuer: str,
    local_model_port: int | None = None,
    context: Mapping[str, str] | None = None,
    operator_token: str | None = None,
) -> dict[str, str]:
    """What `.nemo/dev.env` holds: where everything is and how to authenticate, and what
    `nemo purge` and `nemo rights` need of the context service's settings (its snapshot
    directory and keys) and of a person (the demo privacy operator's credential)."""
    env = {
        "DATABASE_URL": owner_dsn,
        "NEMO_CONTEXT_ADDR": f"127.0.0.1:{ports.context}",
        "NEMO_GATEWAY_ADDR": f"127.0.0.1:{ports.gateway}",
        "NEMO_TOOLPLANE_ADDR": f"127.0.0.1:{ports.toolplane}",
        "NEMO_MCP_URL": ports.mcp_url,
        "NEMO_CONSOLE_URL": ports.console_url,
        local_oauth.ISSUER_VARIABLE: oauth_issuer,
        local_oauth.CLIENT_ID_VARIABLE: local_oauth.DEV_CLIENT_ID,
        "NEMO_CALLER_TOKEN_METADATA_KEY": DEFAULT_CALLER_TOKEN_METADATA_KEY,
    }
    if local_model_port is not None:
        env["NEMO_LOCAL_MODEL_URL"] = local_model.base_url(local_model_port)
    for agent, token in agent_tokens.items():
        env[f"NEMO_DEV_TOKEN_{agent.removesuffix('-agent').upper()}_AGENT"] = token
    for identity, token in sorted(caller_tokens.items()):
        env[f"NEMO_DEV_CALLER_TOKEN_{identity.upper()}"] = token
    env |= {name: value for name, value in (context or {}).items() if name in _SHARED_CONTEXT}
    if operator_token is not None:
        env["NEMO_OPERATOR_TOKEN"] = operator_token
    return env


#: The context service's settings the `nemo` command reads too (snapshots, learner names).
_SHARED_CONTEXT = frozenset(
    {
        "NEMO_CONTEXT_SNAPSHOT_DIR",
        "NEMO_CONTEXT_PSEUDONYM_KEY_FILE",
        "NEMO_CONTEXT_SNAPSHOT_MASTER_KEY_FILE",
    }
)


class DevStackError(Exception):
    """The local stack cannot start as asked; the message says why and what to do."""


@contextlib.contextmanager
def _exclusive(state_dir: Path) -> Iterator[None]:
    """Hold the state directory for this run: a second run would reissue the first one's
    agent tokens and then fail on its ports."""
    with (state_dir / "dev.lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DevStackError(
                f"another `nemo dev up` is running with {state_dir}; stop it first (Ctrl-C)"
            ) from None
        yield


def _check_ports_free(
    ports: Ports, local_model_port: int | None = None, oauth_port: int | None = None
) -> None:
    """Refuse to start when a port is taken: readiness checks would find whatever serves it."""
    checked = [
        ("--context-port", ports.context),
        ("--gateway-port", ports.gateway),
        ("--toolplane-port", ports.toolplane),
        ("--mcp-port", ports.mcp),
        ("--console-port", ports.console),
    ]
    if oauth_port is not None:
        checked.append(("--oauth-port", oauth_port))
    if local_model_port is not None:
        checked.append(("--local-model-port", local_model_port))
    for name, port in checked:
        with socket.socket() as probe:
            # As the servers bind: a port held only by connections in TIME_WAIT is free to them.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
                probe.listen()
            except OSError:
                raise DevStackError(
                    f"port {port} is in use (another stack or program); free it or pass {name}"
                ) from None


def _recorded_database_url(state_dir: Path) -> str | None:
    """DATABASE_URL as the last run wrote it to dev.env (its own embedded server)."""
    env_file = state_dir / "dev.env"
    if not env_file.exists():
        return None
    for line in env_file.read_text().splitlines():
        key, _, value = line.partition("=")
        if key == "DATABASE_URL":
            return shlex.split(value)[0] if value else None
    return None


@contextlib.contextmanager
def _database(state_dir: Path) -> Iterator[tuple[str, EmbeddedPostgres | None]]:
    external = os.environ.get("DATABASE_URL")
    if external and external == _recorded_database_url(state_dir):
        # A shell that sourced dev.env points at this stack's own embedded server.
        _progress("DATABASE_URL is this stack's embedded server (from dev.env); starting it")
        external = None
    if external:
        _progress("using the PostgreSQL server in DATABASE_URL")
        yield external, None
        return
    _progress(f"starting embedded PostgreSQL in {state_dir / 'pgdata'}")
    server = start_embedded_postgres(state_dir / "pgdata")
    try:
        yield server.dsn, server
    finally:
        server.stop()
        _progress("stopped embedded PostgreSQL")


def wants_local_model(environ: Mapping[str, str]) -> bool:
    """Whether the gateway is to run on the local model (``NEMO_GATEWAY_PROVIDER=local``)."""
    return environ.get("NEMO_GATEWAY_PROVIDER", "").strip().lower() == "local"


async def up(
    state_dir: Path,
    ports: Ports,
    caller_tokens: Mapping[str, str],
    local_model_port: int | None = None,
    oauth_port: int = local_oauth.DEFAULT_PORT,
) -> int:
    """Run the stack until a signal arrives; returns the exit code. The authorization server
    listens on ``oauth_port``. With ``local_model_port``, the local model server runs there and
    the gateway uses it."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    with _database(state_dir) as (server_dsn, embedded):
        owner_dsn = await _ensure_database(server_dsn) if embedded else server_dsn
        await _prepare_database(owner_dsn)
        agent_tokens, operator_token = await _issue_demo_tokens(owner_dsn)
        services = ServiceProcesses(state_dir / "logs")
        environments = service_environments(
            owner_dsn, ports, caller_tokens, state_dir, role_passwords_from_env(os.environ)
        )
        if local_model_port is not None:
            environments["gateway"] |= {
                "NEMO_GATEWAY_PROVIDER": "local",
                "NEMO_GATEWAY_LLM_BASE_URL": local_model.base_url(local_model_port),
            }
        console_secret = secrets.token_urlsafe(32)
        try:
            oauth_issuer = await services.start_oauth(
                oauth_port, state_dir / "oauth", [console_client(ports, console_secret)]
            )
            environments["toolplane"] |= toolplane_oauth_environment(oauth_issuer, ports)
            for service, people in people_environments(oauth_issuer, ports).items():
                environments[service] |= people
            environments["console"] = console_environment(
                ports,
                caller_tokens,
                issuer=oauth_issuer,
                client_secret=console_secret,
                eval_dir=state_dir / "eval",
            ) | {"NEMO_CONSOLE_SESSION_KEYS_FILE": str(load_or_create_session_key(state_dir))}
            if local_model_port is not None:
                await services.start_local_model(local_model_port)
            for name in (*SERVICES, "console"):
                await services.start(name, environments[name])
            if not await _wait_until_ready(services, ports, stop):
                return 0 if stop.is_set() else 1
            env = dev_env(
                owner_dsn,
                ports,
                caller_tokens,
                agent_tokens,
                oauth_issuer=oauth_issuer,
                local_model_port=local_model_port,
                context=environments["context"],
                operator_token=operator_token,
            )
            write_private(
                state_dir / "dev.env",
                "".join(f"{key}={shlex.quote(value)}\n" for key, value in env.items()),
            )
            _print_summary(env, state_dir)
            while not stop.is_set():
                if exited := services.exited():
                    for name, code in exited.items():
                        _progress(f"{name} exited with code {code}; stopping the stack")
                    return 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=0.5)
            return 0
        finally:
            _progress("stopping services")
            await services.stop()


def _print_summary(env: Mapping[str, str], state_dir: Path) -> None:
    lines = [
        "",
        "Nemo AI plane is running:",
        f"  context    grpc  {env['NEMO_CONTEXT_ADDR']}",
        f"  gateway    grpc  {env['NEMO_GATEWAY_ADDR']}",
        f"  toolplane  grpc  {env['NEMO_TOOLPLANE_ADDR']}",
        f"  MCP edge   http  {env['NEMO_MCP_URL']}",
        f"  console    http  {env['NEMO_CONSOLE_URL']}  (sign in as a seeded user; U-2041-A1 is "
        "an operator)",
        f"  OAuth      http  {env[local_oauth.ISSUER_VARIABLE]}  (authorization server)",
        *(
            [f"  model      http  {env['NEMO_LOCAL_MODEL_URL']}  ({local_model.MODEL_NAME})"]
            if "NEMO_LOCAL_MODEL_URL" in env
            else []
        ),
        "",
        "Demo agent tokens (Authorization: Bearer ...):",
        *(f"  {key}={value}" for key, value in env.items() if key.startswith("NEMO_DEV_TOKEN_")),
        "",
        f"OAuth: any seeded user signs in with the development password {DEV_PASSWORD!r};",
        "a user's access token for the edge: uv run nemo dev oauth-token --user U-2041-P1",
        "",
        f"Caller tokens go in the {env['NEMO_CALLER_TOKEN_METADATA_KEY']!r} metadata;",
        f"all of it is in {state_dir / 'dev.env'}. Logs: {state_dir / 'logs'}. Ctrl-C stops.",
        "",
    ]
    print("\n".join(lines), flush=True)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = "The local stack (`up`), and a person's OAuth token from it."
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    _configure_up(actions.add_parser("up", help=UP_HELP))
    oauth_token.configure_parser(actions.add_parser("oauth-token", help=oauth_token.HELP))


UP_HELP = "start the whole stack locally; Ctrl-C stops it"


def _configure_up(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Start embedded PostgreSQL (or use DATABASE_URL), migrate, seed, issue demo agent "
        "tokens, start the local authorization server, the context, gateway and tool plane "
        "services and the console, and write STATE_DIR/dev.env. Ctrl-C or SIGTERM stops "
        "everything it started."
    )
    parser.add_argument(
        "--state-dir", type=Path, default=Path(".nemo"), help="local state (default: .nemo)"
    )
    parser.add_argument("--context-port", type=int, default=50051, help="default: 50051")
    parser.add_argument("--gateway-port", type=int, default=50052, help="default: 50052")
    parser.add_argument("--toolplane-port", type=int, default=50053, help="default: 50053")
    parser.add_argument("--mcp-port", type=int, default=8080, help="default: 8080")
    parser.add_argument("--console-port", type=int, default=50056, help="default: 50056")
    parser.add_argument(
        "--local-model-port",
        type=int,
        default=50054,
        help="the local model server's port, with NEMO_GATEWAY_PROVIDER=local (default: 50054)",
    )
    parser.add_argument(
        "--oauth-port",
        type=int,
        default=local_oauth.DEFAULT_PORT,
        help=f"the local authorization server's port (default: {local_oauth.DEFAULT_PORT})",
    )


def run_command(args: argparse.Namespace) -> int:
    if args.action == "oauth-token":
        return oauth_token.run_command(args)
    ports = Ports(
        args.context_port, args.gateway_port, args.toolplane_port, args.mcp_port, args.console_port
    )
    state_dir: Path = args.state_dir.resolve()
    (state_dir / "logs").mkdir(parents=True, exist_ok=True)
    local_model_port = args.local_model_port if wants_local_model(os.environ) else None
    with _exclusive(state_dir):
        _check_ports_free(ports, local_model_port, args.oauth_port)
        if local_model_port is not None:
            local_model.server_python()  # not built: say so before anything starts
        local_oauth.install()  # npm missing: say so before anything starts
        caller_tokens = load_or_create_caller_tokens(state_dir / "caller-tokens.json")
        load_or_create_pseudonym_key(state_dir / "pseudonym.key")
        return asyncio.run(
            up(state_dir, ports, caller_tokens, local_model_port, oauth_port=args.oauth_port)
        )
