"""Ordered SQL migrations: ``nemo migrate``.

Migrations are the files ``migrations/NNNN_name.sql`` of this package, applied in version order,
each in its own transaction, and recorded in ``public.nemo_schema_migrations`` with a checksum.
A whole run holds a PostgreSQL advisory lock, so replicas that start together apply each file
once: the first applies, the others wait and then find nothing to do. A file changed after it
was applied stops the run; fix forward with a new file instead.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import os
import re
import secrets
import sys
import time
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from nemo_core.db import connect
from nemo_core.secret_files import FILE_SUFFIX, read_secret_file

__all__ = [
    "ROLE_PASSWORD_ENV",
    "Migration",
    "MigrationError",
    "MigrationReport",
    "load_migrations",
    "migrate",
    "role_passwords_from_env",
]

HELP = "apply pending database migrations"

MIGRATIONS_TABLE = "public.nemo_schema_migrations"

#: Environment variables holding login passwords for the service roles (or, with a ``_FILE``
#: suffix, the path of a file holding one). Applied on every run when set.
ROLE_PASSWORD_ENV: Mapping[str, str] = {
    "nemo_context": "NEMO_DB_CONTEXT_PASSWORD",
    "nemo_toolplane": "NEMO_DB_TOOLPLANE_PASSWORD",
}

# One key for every Nemo migration run on a database (advisory locks are per database).
_LOCK_KEY = int.from_bytes(
    hashlib.sha256(b"nemo_schema_migrations").digest()[:8], "big", signed=True
)

_FILE_PATTERN = re.compile(r"^(?P<version>\d{4})_(?P<name>[a-z0-9_]+)\.sql\Z")

_CREATE_TABLE = f"""
CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""

Progress = Callable[[str], None]


class MigrationError(Exception):
    """The database or the migration files are not in a state a run can proceed from."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def filename(self) -> str:
        return f"{self.version:04d}_{self.name}.sql"

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


@dataclass(frozen=True)
class MigrationReport:
    applied: tuple[Migration, ...]
    current_version: int


def load_migrations(directory: Traversable | None = None) -> list[Migration]:
    """Read the migration files of ``directory`` (default: this package's) in version order."""
    root = directory if directory is not None else resources.files("nemo_ops") / "migrations"
    migrations: dict[int, Migration] = {}
    for entry in root.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = _FILE_PATTERN.match(entry.name)
        if match is None:
            # A misnamed file would otherwise be skipped silently and never applied.
            raise MigrationError(f"migration file {entry.name!r} is not named NNNN_name.sql")
        version = int(match["version"])
        if version in migrations:
            raise MigrationError(f"two migration files have version {version:04d}")
        # Line endings are normalised so a checkout with CRLF does not change the checksum.
        sql = entry.read_text(encoding="utf-8").replace("\r\n", "\n")
        migrations[version] = Migration(version, match["name"], sql)
    return [migrations[version] for version in sorted(migrations)]


def _scram_sha256_verifier(password: str) -> str:
    # Sending PostgreSQL the SCRAM verifier instead of the password keeps the password out of
    # server logs and pg_stat_activity.
    salt = secrets.token_bytes(16)
    iterations = 4096  # PostgreSQL's default scram_iterations
    # PostgreSQL prepares passwords with SASLprep, which normalises them to NFKC.
    prepared = unicodedata.normalize("NFKC", password)
    salted = hashlib.pbkdf2_hmac("sha256", prepared.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", "sha256")

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def role_passwords_from_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Passwords of :data:`ROLE_PASSWORD_ENV` found in ``environ`` (directly or via ``_FILE``)."""
    passwords: dict[str, str] = {}
    for role, variable in ROLE_PASSWORD_ENV.items():
        if environ.get(variable):
            passwords[role] = environ[variable]
        elif environ.get(f"{variable}{FILE_SUFFIX}"):
            passwords[role] = read_secret_file(environ[f"{variable}{FILE_SUFFIX}"])
    return passwords


def _ignore(_message: str) -> None:
    return None


async def migrate(
    dsn: str,
    *,
    migrations: Sequence[Migration] | None = None,
    role_passwords: Mapping[str, str] | None = None,
    progress: Progress = _ignore,
) -> MigrationReport:
    """Apply the pending ``migrations`` (default: :func:`load_migrations`) to ``dsn``.

    Raises :class:`MigrationError` when an applied migration was changed or is unknown to this
    release; nothing is applied then.
    """
    known = list(migrations) if migrations is not None else load_migrations()
    conn = await connect(dsn)
    try:
        if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", _LOCK_KEY):
            progress("waiting for another migration run to finish")
            await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
        try:
            await conn.execute(_CREATE_TABLE)
            rows = await conn.fetch(f"SELECT version, name, checksum FROM {MIGRATIONS_TABLE}")
            applied = {row["version"]: row for row in rows}
            by_version = {migration.version: migration for migration in known}
            for version, row in sorted(applied.items()):
                migration = by_version.get(version)
                if migration is None:
                    raise MigrationError(
                        f"the database has migration {version:04d}_{row['name']} applied, which "
                        "this release does not know; refusing to continue with older code"
                    )
                if migration.checksum != row["checksum"]:
                    raise MigrationError(
                        f"migration {migration.filename} was changed after it was applied "
                        "(checksum differs); add a new migration instead of editing an applied one"
                    )
            done: list[Migration] = []
            for migration in known:
                if migration.version in applied:
                    continue
                started = time.monotonic()
                progress(f"applying {migration.filename}")
                async with conn.transaction():
                    await conn.execute(migration.sql)
                    await conn.execute(
                        f"INSERT INTO {MIGRATIONS_TABLE} (version, name, checksum) "
                        "VALUES ($1, $2, $3)",
                        migration.version,
                        migration.name,
                        migration.checksum,
                    )
                elapsed_ms = (time.monotonic() - started) * 1000
                progress(f"applied {migration.filename} in {elapsed_ms:.0f} ms")
                done.append(migration)
            for role, password in (role_passwords or {}).items():
                statement = await conn.fetchval(
                    "SELECT format('ALTER ROLE %I PASSWORD %L', $1::text, $2::text)",
                    role,
                    _scram_sha256_verifier(password),
                )
                await conn.execute(statement)
                progress(f"set the login password of {role}")
            current = max((*applied, *(migration.version for migration in done)), default=0)
            return MigrationReport(applied=tuple(done), current_version=current)
        finally:
            # A broken connection has released the lock already, and raising here would hide
            # the error that broke it.
            if not conn.is_closed():
                await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    finally:
        await conn.close()


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Apply the pending SQL migrations in order, each in its own transaction, and record "
        "them in public.nemo_schema_migrations. Safe to run from several replicas at once. "
        "Also sets the login passwords of the service roles from "
        + ", ".join(f"{variable} (or {variable}_FILE)" for variable in ROLE_PASSWORD_ENV.values())
        + " when set."
    )


def run_command(args: argparse.Namespace) -> int:
    def progress(message: str) -> None:
        print(f"nemo migrate: {message}", file=sys.stderr, flush=True)

    report = asyncio.run(
        migrate(
            args.database_url,
            role_passwords=role_passwords_from_env(os.environ),
            progress=progress,
        )
    )
    if report.applied:
        print(
            f"applied {len(report.applied)} migration(s); "
            f"the database is at version {report.current_version}"
        )
    else:
        print(f"nothing to apply: the database is up to date at version {report.current_version}")
    return 0
