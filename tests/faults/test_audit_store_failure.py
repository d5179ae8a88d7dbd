"""The audit store refusing writes: tool calls still answer, every refused row is logged in full
and counted, and rows are stored again once the store accepts them."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable

from nemo_core.db import connect
from nemo_testing.otlp import OtlpReceiver
from tests.stack import StackFactory

from .support import OK, UNLIMITED_TOOLPLANE, migrated_and_seeded, stack_clients

FAILED_ROWS = "nemo.toolplane.audit.rows_failed"


async def _set_audit_insert(owner_dsn: str, *, allowed: bool) -> None:
    statement = (
        "GRANT INSERT ON toolplane.audit_logs TO nemo_toolplane"
        if allowed
        else "REVOKE INSERT ON toolplane.audit_logs FROM nemo_toolplane"
    )
    conn = await connect(owner_dsn)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def _stored(owner_dsn: str, prefix: str) -> set[str]:
    conn = await connect(owner_dsn)
    try:
        rows = await conn.fetch(
            "SELECT request_id FROM toolplane.audit_logs WHERE request_id LIKE $1", f"{prefix}-%"
        )
    finally:
        await conn.close()
    return {row["request_id"] for row in rows}


async def test_tool_calls_answer_while_the_audit_store_fails_and_the_loss_is_logged(
    # The receiver comes first so it outlives the stack, whose last export goes to it.
    fresh_otlp_receiver: OtlpReceiver,
    start_stack: StackFactory,
    make_empty_database: Callable[[], Awaitable[str]],
) -> None:
    owner_dsn = await migrated_and_seeded(await make_empty_database())
    stack = await start_stack(
        owner_dsn,
        otlp_endpoint=fresh_otlp_receiver.endpoint,
        extra_env={"toolplane": UNLIMITED_TOOLPLANE},
    )
    prefix = f"REQ-audit-{secrets.token_hex(4)}"
    async with stack_clients(stack) as clients:
        await _set_audit_insert(owner_dsn, allowed=False)
        try:
            refused = [await clients.learning_state(n, request_prefix=prefix) for n in range(3)]
            await fresh_otlp_receiver.wait_until(
                lambda: fresh_otlp_receiver.counter("toolplane", FAILED_ROWS) >= len(refused)
            )
        finally:
            await _set_audit_insert(owner_dsn, allowed=True)
        after = await clients.learning_state(100, request_prefix=prefix)

    assert refused == [OK] * 3
    assert after == OK
    assert fresh_otlp_receiver.counter("toolplane", FAILED_ROWS) == 3
    # Each refused row is in the error log with what the table would have held.
    logged = [
        record["audit"]
        for record in stack.toolplane.log_records()
        if record.get("message") == "audit row not stored"
    ]
    assert sorted(row["request_id"] for row in logged) == [f"{prefix}-{n}" for n in range(3)]
    assert {(row["agent_id"], row["resource"], row["status"]) for row in logged} == {
        ("learning-agent", "learner:L-2041-1", "success")
    }
    # Once the store accepts rows again, they are stored; the refused ones are only in the log.
    await stack.toolplane.stop()
    assert await _stored(owner_dsn, prefix) == {f"{prefix}-100"}
