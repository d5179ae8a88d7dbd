"""Reconcile ``toolplane.tools`` with the code registry (``nemo sync-tools``).

The table is a projection for grants, policies and operators; the registry in code stays the
source of truth. Every registered version is upserted, versions that left the code are removed,
and a run that finds nothing to change writes nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from nemo_core.db import Connection
from nemo_toolplane.registry import AnyTool, Registry

_COLUMNS = (
    "id",
    "name",
    "version",
    "description",
    "category",
    "risk",
    "mode",
    "input_schema",
    "output_schema",
    "learner_id_field",
    "annotations",
)


@dataclass(frozen=True)
class SyncReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)


def projection(tool: AnyTool) -> dict[str, Any]:
    """The row a tool version should have."""
    return {
        "id": tool.tool_id,
        "name": tool.name,
        "version": tool.version,
        "description": tool.description,
        "category": tool.category,
        "risk": tool.risk.value,
        "mode": tool.mode.value,
        "input_schema": tool.input_schema,
        "output_schema": tool.output_schema,
        "learner_id_field": tool.learner_id_field,
        "annotations": asdict(tool.hints),
    }


async def sync_tools(conn: Connection, registry: Registry, *, dry_run: bool = False) -> SyncReport:
    """Bring the table in line with ``registry``; with ``dry_run`` only report what would change."""
    wanted = {tool.tool_id: projection(tool) for tool in registry.versions()}
    async with conn.transaction():
        rows = await conn.fetch(f"SELECT {', '.join(_COLUMNS)} FROM toolplane.tools FOR UPDATE")
        stored = {row["id"]: dict(row) for row in rows}
        report = SyncReport(
            added=sorted(set(wanted) - set(stored)),
            updated=sorted(i for i in set(wanted) & set(stored) if wanted[i] != stored[i]),
            removed=sorted(set(stored) - set(wanted)),
            unchanged=sorted(i for i in set(wanted) & set(stored) if wanted[i] == stored[i]),
        )
        if dry_run:
            return report
        placeholders = ", ".join(f"${n}" for n in range(1, len(_COLUMNS) + 1))
        updates = ", ".join(f"{column} = EXCLUDED.{column}" for column in _COLUMNS[1:])
        for tool_id in [*report.added, *report.updated]:
            row = wanted[tool_id]
            await conn.execute(
                f"INSERT INTO toolplane.tools ({', '.join(_COLUMNS)}, updated_at) "
                f"VALUES ({placeholders}, now()) "
                f"ON CONFLICT (id) DO UPDATE SET {updates}, updated_at = now()",
                *(row[column] for column in _COLUMNS),
            )
        if report.removed:
            await conn.execute("DELETE FROM toolplane.tools WHERE id = ANY($1)", report.removed)
    return report
