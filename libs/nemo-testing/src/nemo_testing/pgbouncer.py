"""A real PgBouncer in transaction mode on loopback, in front of the suite's PostgreSQL.

The binary is Debian's ``pgbouncer`` package (``make system-packages`` installs it); nothing else
runs it. Every database of the server is reachable through it under its own name, as the roles
given, each with a password of its own at the pooler (SCRAM, as in production); PgBouncer logs in
to PostgreSQL with the same password, which a server that trusts local connections ignores::

    async with running_pgbouncer(server_dsn, tmp_path, users=["nemo_context"]) as pooler:
        pooled = pooler.pooled(context_dsn)   # same role and database, through the pooler

PgBouncer refuses to run as root: started by root, it runs as the owner of the server's socket
directory (the embedded server's system user), or as ``nobody`` for a server reached over TCP.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import re
import secrets
import shutil
import subprocess
from collections.abc import AsyncIterator, Collection, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from nemo_devtools.processes import log_tail, spawn_logged
from nemo_testing.ports import free_port

#: Where Debian's package puts the binary (/usr/sbin is not on every user's PATH).
DEBIAN_BINARY = Path("/usr/sbin/pgbouncer")
INSTALL_HINT = "install it with `make system-packages` (Debian: apt-get install pgbouncer)"
START_TIMEOUT_SECONDS = 15.0


class PgBouncerUnavailable(RuntimeError):
    """PgBouncer is not installed, or did not start (the message says which, and how to fix it)."""


@dataclass(frozen=True)
class PgBouncer:
    """A running PgBouncer: where it listens and the password of each role at it."""

    host: str
    port: int
    passwords: Mapping[str, str]
    log_path: Path

    def pooled(self, dsn: str) -> str:
        """``dsn`` (a direct URL of one of the pooler's roles) through the pooler: same role and
        database, the pooler's address and the role's password there."""
        parts = urlsplit(dsn)
        user = parts.username or ""
        if user not in self.passwords:
            raise KeyError(f"the pooler does not know the role {user!r}")
        database = parts.path.lstrip("/") or user
        return (
            f"postgresql://{user}:{self.passwords[user]}@{self.host}:{self.port}/{database}"
            "?sslmode=disable"
        )

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)


def pgbouncer_binary() -> Path:
    """The ``pgbouncer`` executable; :class:`PgBouncerUnavailable` saying how to install it."""
    found = shutil.which("pgbouncer")
    if found:
        return Path(found)
    if DEBIAN_BINARY.exists():
        return DEBIAN_BINARY
    raise PgBouncerUnavailable(f"pgbouncer is not installed: {INSTALL_HINT}")


def pgbouncer_version(binary: Path) -> tuple[int, int]:
    """(major, minor) of ``binary``, from ``pgbouncer --version``."""
    output = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    match = re.search(r"PgBouncer (\d+)\.(\d+)", output)
    if match is None:
        raise PgBouncerUnavailable(f"{binary} --version printed no PgBouncer version: {output!r}")
    return int(match[1]), int(match[2])


def _server_address(server_dsn: str) -> tuple[str, int]:
    """Host (or Unix socket directory) and port of ``server_dsn``, as libpq reads them."""
    parts = urlsplit(server_dsn)
    query = parse_qs(parts.query)
    host = parts.hostname or query.get("host", ["/var/run/postgresql"])[0]
    port = parts.port or int(query.get("port", ["5432"])[0])
    return host, port


def _run_as(server_host: str) -> str | None:
    """The user PgBouncer runs as when started by root (None: as whoever starts it)."""
    if os.geteuid() != 0:
        return None
    if server_host.startswith("/"):
        return pwd.getpwuid(Path(server_host).stat().st_uid).pw_name
    return "nobody"


def _quoted(value: str) -> str:
    # The auth file's syntax: double quotes around each field, a quote doubled inside one.
    return '"' + value.replace('"', '""') + '"'


def configuration(
    *, server_host: str, server_port: int, port: int, auth_file: Path, pool_size: int
) -> str:
    """pgbouncer.ini of a test pooler: the settings the production one has (transaction mode,
    SCRAM), loopback only, and short timeouts so a broken setup fails fast."""
    return f"""\
[databases]
* = host={server_host} port={server_port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
pool_mode = transaction
auth_type = scram-sha-256
auth_file = {auth_file}
default_pool_size = {pool_size}
max_client_conn = 1000
server_reset_query =
ignore_startup_parameters = extra_float_digits
server_connect_timeout = 5
server_login_retry = 1
client_login_timeout = 10
query_wait_timeout = 30
logfile =
pidfile =
"""


def _write_configuration(
    server_dsn: str, state_dir: Path, passwords: Mapping[str, str], pool_size: int
) -> tuple[Path, int]:
    """The configuration and auth file of a test pooler for ``passwords``' roles, written into
    ``state_dir``; the configuration file and the port it listens on."""
    state_dir.mkdir(parents=True, exist_ok=True)
    server_host, server_port = _server_address(server_dsn)
    port = free_port()
    auth_file = state_dir / "userlist.txt"
    auth_file.write_text(
        "".join(f"{_quoted(user)} {_quoted(password)}\n" for user, password in passwords.items()),
        encoding="utf-8",
    )
    ini = state_dir / "pgbouncer.ini"
    ini.write_text(
        configuration(
            server_host=server_host,
            server_port=server_port,
            port=port,
            auth_file=auth_file,
            pool_size=pool_size,
        ),
        encoding="utf-8",
    )
    return ini, port


def _command(ini: Path, server_dsn: str, files: Collection[Path]) -> list[str]:
    """The command that runs PgBouncer on ``ini``; started by root, as a user that may reach the
    server, who is given ``files`` (the configuration's)."""
    argv = [str(pgbouncer_binary())]
    user = _run_as(_server_address(server_dsn)[0])
    if user is not None:
        entry = pwd.getpwnam(user)
        for path in files:
            os.chown(path, entry.pw_uid, entry.pw_gid)
        argv += ["--user", user]
    return [*argv, str(ini)]


@asynccontextmanager
async def pgbouncer_process(
    ini: Path,
    port: int,
    *,
    server_dsn: str,
    passwords: Mapping[str, str],
    files: Collection[Path],
) -> AsyncIterator[PgBouncer]:
    """PgBouncer running on the configuration ``ini`` (listening on 127.0.0.1:``port``, in
    front of ``server_dsn``'s server, its roles' ``passwords`` in its auth file) for the block.
    ``files`` are everything it reads, its directories included; it logs beside ``ini``."""
    argv = _command(ini, server_dsn, files)
    log_path = ini.with_suffix(".log")
    process = await spawn_logged(argv, os.environ, log_path)
    pooler = PgBouncer("127.0.0.1", port, passwords, log_path)
    try:
        await _wait_listening(pooler, process)
        yield pooler
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()


@asynccontextmanager
async def running_pgbouncer(
    server_dsn: str,
    state_dir: Path,
    *,
    users: Collection[str],
    passwords: Mapping[str, str] | None = None,
    pool_size: int = 4,
) -> AsyncIterator[PgBouncer]:
    """PgBouncer in transaction mode in front of ``server_dsn``'s server for the block, at most
    ``pool_size`` server connections per database and role. ``users`` may log in, with their
    ``passwords`` (a role without one gets a random one: the server must then trust it)."""
    known = {user: (passwords or {}).get(user) or secrets.token_urlsafe(16) for user in users}
    ini, port = _write_configuration(server_dsn, state_dir, known, pool_size)
    files = [state_dir, ini, state_dir / "userlist.txt"]
    async with pgbouncer_process(
        ini, port, server_dsn=server_dsn, passwords=known, files=files
    ) as pooler:
        yield pooler


async def _wait_listening(pooler: PgBouncer, process: asyncio.subprocess.Process) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_TIMEOUT_SECONDS
    while True:
        if process.returncode is not None:
            raise PgBouncerUnavailable(
                f"pgbouncer exited with code {process.returncode} at start:\n{pooler.log_tail()}"
            )
        try:
            _, writer = await asyncio.open_connection(pooler.host, pooler.port)
        except OSError:
            if loop.time() > deadline:
                raise PgBouncerUnavailable(
                    f"pgbouncer not listening after {START_TIMEOUT_SECONDS:.0f} s:\n"
                    f"{pooler.log_tail()}"
                ) from None
            await asyncio.sleep(0.05)
            continue
        writer.close()
        await writer.wait_closed()
        return
