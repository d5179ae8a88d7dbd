"""Embedded PostgreSQL (the ``pgserver`` package) for the local stack and the test suite.

The server listens on a Unix socket inside its data directory only (no TCP port) and trusts
local connections, so any role can connect by name without a password.
"""

from __future__ import annotations

import json
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import psutil

if TYPE_CHECKING:
    from pgserver.postgres_server import PostgresServer

__all__ = ["EmbeddedPostgres", "EmbeddedPostgresError", "start_embedded_postgres"]

# Where pgserver lists the processes using a server (its own file format: a JSON list of pids).
_HANDLES_FILE = ".handle_pids.json"


class EmbeddedPostgresError(RuntimeError):
    """The embedded server cannot run here; the message says why and what to do."""


@dataclass
class EmbeddedPostgres:
    """A running embedded server. ``dsn`` connects as the superuser to database ``postgres``."""

    data_dir: Path
    dsn: str
    _server: PostgresServer = field(repr=False)

    def stop(self) -> None:
        """Stop the server (and delete its data directory if started with ``cleanup="delete"``).

        The server stays up while another process still holds a handle on the same directory.
        """
        self._server.cleanup()


def _forget_dead_handles(data_dir: Path) -> None:
    """Drop processes that no longer exist from pgserver's list of the server's users.

    pgserver stops the server when its last listed user lets go; a user killed without cleaning up
    (SIGKILL, a crash) would stay listed forever and the server would never be stopped again.
    """
    handles = data_dir / _HANDLES_FILE
    if not handles.exists():
        return
    pids: list[int] = json.loads(handles.read_text())
    alive = [pid for pid in pids if psutil.pid_exists(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def start_embedded_postgres(
    data_dir: Path | str, *, cleanup: Literal["stop", "delete"] = "stop"
) -> EmbeddedPostgres:
    """Start a server on ``data_dir``, or reuse the one already running there.

    A new directory is initialised first (about a second); an existing one keeps its data, so a
    second run of the local stack finds its databases again. Unless :meth:`EmbeddedPostgres.stop`
    is called, the server is stopped (or deleted, with ``cleanup="delete"``) when the last
    process using it exits normally.
    """
    with warnings.catch_warnings():
        # pgserver asks platformdirs for a runtime directory at import time; the fallback it
        # takes when XDG_RUNTIME_DIR is unset is fine and its warning only noise.
        warnings.simplefilter("ignore")
        from pgserver.postgres_server import get_server

    path = Path(data_dir).expanduser().resolve()
    if any(character.isspace() for character in str(path)):
        # pgserver hands the socket directory to postgres unquoted, so the server cannot start.
        raise EmbeddedPostgresError(
            f"embedded PostgreSQL cannot run in a path with spaces ({path}); use a state "
            "directory without spaces, or point DATABASE_URL at a server"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    _forget_dead_handles(path)
    try:
        server = get_server(path, cleanup_mode=cleanup)
    except subprocess.CalledProcessError as error:
        raise EmbeddedPostgresError(
            f"embedded PostgreSQL did not start in {path} (exit code {error.returncode}); "
            f"its log is {path / 'log'}"
        ) from None
    return EmbeddedPostgres(data_dir=path, dsn=server.get_uri(), _server=server)
