"""Helpers for retention and erasure: batched deletes and updates, and scans for traces.

Batches commit one at a time (the caller's connection is outside a transaction), so a purge
that stops half-way keeps what it did and the next run finishes the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Final

from nemo_core.db import Connection

Progress = Callable[[str], None]

_BATCH: Final = 1000


def _affected(status: str) -> int:
    return int(status.split()[-1])


async def change_in_batches(
    conn: Connection,
    table: str,
    where: str,
    *args: object,
    progress: Progress,
    label: str,
    set_clause: str | None = None,
) -> int:
    """Delete (or, with ``set_clause``, update) the rows of ``table`` matching ``where``, a batch
    at a time; returns how many. ``where`` must stop matching a row once it is changed."""
    change = f"UPDATE {table} SET {set_clause}" if set_clause else f"DELETE FROM {table}"
    verb = "changed" if set_clause else "deleted"
    total = 0
    while True:
        status = await conn.execute(
            f"{change} WHERE ctid = ANY(ARRAY(SELECT ctid FROM {table} WHERE {where}"
            f" LIMIT {_BATCH}))",
            *args,
        )
        done = _affected(status)
        total += done
        if done:
            progress(f"{label}: {verb} {total} row(s) so far")
        if done < _BATCH:
            return total


#: Characters that continue a key: a key is found only where none stands right before or after
#: it, so erasing L-2041-1 never touches L-2041-10 (``.`` and ``:`` separate, as in
#: ``learner:L-2041-1``).
_KEY_CHARS: Final = "A-Za-z0-9_-"


def _escaped(text: str) -> str:
    return "".join(char if char.isalnum() else f"\\{char}" for char in text)


def key_pattern(key: str) -> str:
    """A PostgreSQL regular expression that finds ``key`` as a whole key in any text."""
    return f"(?<![{_KEY_CHARS}]){_escaped(key)}(?![{_KEY_CHARS}])"


def ref_pattern(ref: str, prefix_length: int) -> str:
    """A regular expression that finds ``ref`` and its first ``prefix_length`` characters (a
    ref from before refs widened) as whole refs."""
    head, rest = ref[:prefix_length], ref[prefix_length:]
    return f"(?<![0-9a-f]){_escaped(head)}({_escaped(rest)})?(?![0-9a-f])"


# Every column that can hold text, of every table of the given schemas.
_TEXT_COLUMNS: Final = """
SELECT format('%I.%I', c.table_schema, c.table_name) AS name,
       array_agg(format('%I', c.column_name) ORDER BY c.ordinal_position) AS columns
FROM information_schema.columns c
JOIN information_schema.tables t
  ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema = ANY($1::text[]) AND t.table_type = 'BASE TABLE'
  AND c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'ARRAY')
GROUP BY c.table_schema, c.table_name
ORDER BY name
"""


async def count_traces(
    conn: Connection, schemas: Collection[str], patterns: Collection[str]
) -> dict[str, int]:
    """How many rows of each table of ``schemas`` match any of ``patterns`` (regular
    expressions, in any case) in a column that can hold text. Reads every row: the verification
    of an erasure, not a query for every day."""
    found: dict[str, int] = {}
    for table in await conn.fetch(_TEXT_COLUMNS, list(schemas)):
        text = " || ' ' || ".join(f"coalesce({column}::text, '')" for column in table["columns"])
        found[table["name"]] = await conn.fetchval(
            f"SELECT count(*) FROM {table['name']} WHERE ({text}) ~* ANY($1::text[])",
            list(patterns),
        )
    return found
