"""Embedded PostgreSQL: a data directory survives a stop and a restart."""

from __future__ import annotations

from pathlib import Path

from nemo_core.db import connect
from nemo_ops.embedded_pg import start_embedded_postgres


async def test_restart_reuses_the_data_directory(fast_scratch_dir: Path) -> None:
    data_dir = fast_scratch_dir / "restart"
    server = start_embedded_postgres(data_dir)
    try:
        conn = await connect(server.dsn)
        try:
            await conn.execute(
                "CREATE TABLE kept (note text); INSERT INTO kept VALUES ('still here')"
            )
        finally:
            await conn.close()
    finally:
        server.stop()

    restarted = start_embedded_postgres(data_dir, cleanup="delete")
    try:
        assert restarted.data_dir == data_dir.resolve()
        conn = await connect(restarted.dsn)
        try:
            assert await conn.fetchval("SELECT note FROM kept") == "still here"
        finally:
            await conn.close()
    finally:
        restarted.stop()
    assert not data_dir.exists()
