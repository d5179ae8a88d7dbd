"""SIGTERM to each service under load: every call in flight when the signal arrives completes,
the process exits 0, and the tool plane stores an audit row for every call it answered."""

from __future__ import annotations

import functools
import secrets
import signal
import time
from collections.abc import Awaitable, Callable

import pytest

from nemo_core.db import connect
from tests.stack import StackFactory

from .support import OK, UNLIMITED_TOOLPLANE, Load, StackClients, only, stack_clients

#: Health turns NOT_SERVING this long before new calls are refused, so a call the client sent
#: just before the signal still arrives.
DRAIN = "0.5"
#: What a call sent after the server stopped accepting gets: the connection is refused, or the
#: stream is cancelled while the server closes.
REFUSED = {"UNAVAILABLE/", "CANCELLED/"}


def _drained(service: str) -> dict[str, str]:
    return {f"NEMO_{service.upper()}_DRAIN_SECONDS": DRAIN}


async def _answered_request_ids(owner_dsn: str, prefix: str) -> set[str]:
    conn = await connect(owner_dsn)
    try:
        rows = await conn.fetch(
            "SELECT request_id FROM toolplane.audit_logs WHERE request_id LIKE $1", f"{prefix}-%"
        )
    finally:
        await conn.close()
    return {row["request_id"] for row in rows}


@pytest.mark.parametrize("service", ["context", "gateway", "toolplane"])
async def test_sigterm_under_load_lets_calls_in_flight_finish(
    start_stack: StackFactory, service: str
) -> None:
    stack = await start_stack(
        extra_env={
            "context": _drained("context"),
            "gateway": _drained("gateway"),
            "toolplane": _drained("toolplane") | UNLIMITED_TOOLPLANE,
        }
    )
    prefix = f"REQ-sigterm-{secrets.token_hex(4)}"
    async with stack_clients(stack) as clients:
        calls: dict[str, Callable[[StackClients], Callable[[int], Awaitable[str]]]] = {
            "context": lambda c: c.bundle,
            "gateway": lambda c: c.hint,
            "toolplane": lambda c: functools.partial(c.learning_state, request_prefix=prefix),
        }
        load = Load()
        load.start(calls[service](clients), callers=4)
        try:
            await load.wait_for(OK, since=time.monotonic())
            terminated = time.monotonic()
            exit_code = await stack.services[service].stop(signal.SIGTERM)
        finally:
            await load.stop()

    assert exit_code == 0, stack.services[service].log_tail()
    in_flight = load.in_flight_at(terminated)
    assert in_flight, "the load had no call in flight when the signal arrived"
    assert [o.kind for o in in_flight] == [OK] * len(in_flight)
    assert only(load.kinds(), {OK} | REFUSED) == {}
    if service == "toolplane":
        answered = {f"{prefix}-{o.sequence}" for o in load.outcomes if o.kind not in REFUSED}
        assert answered
        assert await _answered_request_ids(stack.owner_dsn, prefix) == answered
