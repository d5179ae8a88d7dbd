"""What the corpus must leave unchanged, and the audit rows it may add."""

from __future__ import annotations

from dataclasses import dataclass, field

from nemo_core.db import connect

#: Tables a rejected call must leave alone; audit_logs is checked against the exact rows the
#: authenticated bad calls legitimately write.
GUARDED_TABLES = (
    "learning.chat_messages",
    "toolplane.approvals",
    "toolplane.agent_tokens",
    "learning.context_snapshots",
    "toolplane.audit_logs",
)


async def row_counts(owner_dsn: str) -> dict[str, int]:
    conn = await connect(owner_dsn)
    try:
        return {
            table: await conn.fetchval(f"SELECT count(*) FROM {table}") for table in GUARDED_TABLES
        }
    finally:
        await conn.close()


@dataclass
class Ledger:
    """What the stack looked like before the corpus, and the audit rows the corpus may add."""

    pids: dict[str, int]
    counts: dict[str, int]
    expected_audit_rows: int = 0
    cases_run: list[str] = field(default_factory=list)
