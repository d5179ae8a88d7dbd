"""Embedded PostgreSQL (the ``pgserver`` package) for the local stack and the test suite.

The server listens on a Unix socket inside its data directory only (no TCP port) and trusts
local connections, so any role can connect by name without a password.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pgserver.postgres_server import PostgresServer

__all__ = ["EmbeddedPostgres", "start_embedded_postgres"]


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
    path.parent.mkdir(parents=True, exist_ok=True)
    server = get_server(path, cleanup_mode=cleanup)
    return EmbeddedPostgres(data_dir=path, dsn=server.get_uri(), _server=server)
