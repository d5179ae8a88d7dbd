"""After the whole corpus: every process is the one that started, still SERVING, and nothing
was written but the audit rows of the authenticated bad tool calls.

This module runs after the corpus modules (pytest collects a directory's modules in name
order, and "test_survival" sorts after "test_grpc_corpus" and "test_mcp_corpus").
"""

from __future__ import annotations

import asyncio
import time

from tests.stack import Stack

from .ledger import Ledger, row_counts

AUDIT_TABLE = "toolplane.audit_logs"
#: Audit rows are written in batches off the request path (every 0.2 s by default).
AUDIT_SETTLE_SECONDS = 10.0


async def test_no_process_crashed(bad_input_stack: Stack, ledger: Ledger) -> None:
    assert ledger.cases_run, "the corpus did not run in this session"
    for name, service in bad_input_stack.services.items():
        assert service.running, f"{name} exited:\n{service.log_tail()}"
        assert service.pid == ledger.pids[name]
        assert await service.serving(), f"{name} is not SERVING"


async def test_nothing_written_but_the_audit_rows_of_bad_tool_calls(
    bad_input_stack: Stack, ledger: Ledger, owner_dsn: str
) -> None:
    expected = dict(ledger.counts)
    expected[AUDIT_TABLE] += ledger.expected_audit_rows
    deadline = time.monotonic() + AUDIT_SETTLE_SECONDS
    counts = await row_counts(owner_dsn)
    while counts[AUDIT_TABLE] < expected[AUDIT_TABLE] and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        counts = await row_counts(owner_dsn)
    # One more flush interval: a surplus row would show up now.
    await asyncio.sleep(0.5)
    assert await row_counts(owner_dsn) == expected
