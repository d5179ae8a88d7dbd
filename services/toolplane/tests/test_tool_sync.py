"""`nemo sync-tools`: the tools table follows the code registry."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from nemo_ops.cli import main as nemo
from nemo_toolplane.tools import build_registry


async def test_sync_tools_reconciles_the_projection(
    owner_dsn: str, owner: asyncpg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    database = ["--database-url", owner_dsn]
    assert await asyncio.to_thread(nemo, ["sync-tools", *database]) == 0
    capsys.readouterr()
    await owner.execute(
        "INSERT INTO toolplane.tools (id, name, version, description, category, risk, mode, "
        "input_schema) VALUES ('legacy.tool:v1', 'legacy.tool', 1, 'gone', 'legacy', 'LOW', "
        "'read', '{}')"
    )
    await owner.execute(
        "UPDATE toolplane.tools SET description = 'stale' WHERE id = 'docs.get_doc:v1'"
    )

    assert await asyncio.to_thread(nemo, ["sync-tools", "--dry-run", *database]) == 0
    dry = capsys.readouterr().out
    assert "updated  docs.get_doc:v1" in dry
    assert "removed  legacy.tool:v1" in dry
    assert "dry run" in dry
    assert await owner.fetchval("SELECT count(*) FROM toolplane.tools WHERE id = 'legacy.tool:v1'")

    assert await asyncio.to_thread(nemo, ["sync-tools", *database]) == 0
    assert "1 updated, 1 removed" in capsys.readouterr().out
    rows = {
        row["id"]: row for row in await owner.fetch("SELECT * FROM toolplane.tools ORDER BY id")
    }
    registry = build_registry()
    assert sorted(rows) == [tool.tool_id for tool in registry.versions()]
    status = rows["application.set_status:v1"]
    assert (status["risk"], status["mode"], status["learner_id_field"]) == ("HIGH", "write", None)
    assert status["annotations"]["destructive"] is True
    assert rows["learner.get_profile:v1"]["learner_id_field"] == "learner_id"
    assert rows["docs.get_doc:v1"]["description"] != "stale"

    assert await asyncio.to_thread(nemo, ["sync-tools", *database]) == 0
    assert "0 added, 0 updated, 0 removed" in capsys.readouterr().out
