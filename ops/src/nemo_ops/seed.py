"""Demo data set: ``nemo seed``.

Every row of :mod:`nemo_ops.seed_data` is upserted on its key in one transaction, so a rerun
restores the demo rows to their original values and leaves rows created at run time (issued
tokens, audit records, recorded turns) in place.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from nemo_core.db import connect
from nemo_ops.migrate import MIGRATIONS_TABLE, Progress, load_migrations
from nemo_ops.seed_data import TABLES, TableData

__all__ = ["SeedError", "SeedReport", "seed", "upsert_statement"]

HELP = "load the demo data set (idempotent)"

# Concurrent seeds would otherwise interleave their upserts and deadlock on shared rows.
_LOCK_KEY = int.from_bytes(hashlib.sha256(b"nemo_seed").digest()[:8], "big", signed=True)


class SeedError(Exception):
    """The database cannot take the demo data set (for example, it is not migrated)."""


@dataclass(frozen=True)
class SeedReport:
    tables: int
    rows: int


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def upsert_statement(data: TableData) -> tuple[str, tuple[str, ...]]:
    """The ``INSERT ... ON CONFLICT`` statement for ``data`` and the column order it expects."""
    columns = tuple(data.rows[0])
    for row in data.rows:
        if tuple(row) != columns:
            raise ValueError(f"rows of {data.table} do not all have the columns {columns}")
    missing = set(data.key) - set(columns)
    if missing:
        raise ValueError(f"rows of {data.table} lack key columns {sorted(missing)}")
    schema, _, table = data.table.partition(".")
    updates = [column for column in columns if column not in data.key]
    action = (
        "DO UPDATE SET " + ", ".join(f"{_quote(c)} = EXCLUDED.{_quote(c)}" for c in updates)
        if updates
        else "DO NOTHING"
    )
    statement = (
        f"INSERT INTO {_quote(schema)}.{_quote(table)} ({', '.join(map(_quote, columns))}) "
        f"VALUES ({', '.join(f'${i}' for i in range(1, len(columns) + 1))}) "
        f"ON CONFLICT ({', '.join(map(_quote, data.key))}) {action}"
    )
    return statement, columns


def _ignore(_message: str) -> None:
    return None


async def seed(
    dsn: str, *, tables: Sequence[TableData] = TABLES, progress: Progress = _ignore
) -> SeedReport:
    """Upsert ``tables`` (default: the demo data set) into the migrated database at ``dsn``."""
    conn = await connect(dsn)
    try:
        latest = max(migration.version for migration in load_migrations())
        migrated = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", MIGRATIONS_TABLE)
        current = (
            await conn.fetchval(f"SELECT max(version) FROM {MIGRATIONS_TABLE}")
            if migrated
            else None
        )
        if current is None or current < latest:
            raise SeedError(
                f"the database is not migrated to version {latest}; run `nemo migrate` first"
            )
        rows = sum(len(data.rows) for data in tables)
        progress(f"loading {rows} rows into {len(tables)} tables")
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
            for data in tables:
                statement, columns = upsert_statement(data)
                await conn.executemany(
                    statement, [tuple(row[column] for column in columns) for row in data.rows]
                )
        return SeedReport(tables=len(tables), rows=rows)
    finally:
        await conn.close()


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Load the demo data set: families, learners with measures and computed models, chat "
        "sessions, knowledge nodes, and the tool plane's applications, agents, grants and "
        "policies. Rows are upserted, so running it again restores the demo rows and keeps "
        "everything else. Agent tokens are not part of it."
    )


def run_command(args: argparse.Namespace) -> int:
    def progress(message: str) -> None:
        print(f"nemo seed: {message}", file=sys.stderr, flush=True)

    report = asyncio.run(seed(args.database_url, progress=progress))
    print(f"seeded {report.rows} rows into {report.tables} tables")
    return 0
