"""The whole stack through PgBouncer in transaction mode (the ``pooled_stack`` fixture): its
services open PostgreSQL sessions only through the pooler, and the tool plane's change listener
alone holds a direct one, so a revoked token is refused on its next call although the tool plane
would otherwise keep it for an hour. (The journeys, the replica test and the isolation tests run
through the pooler too: ``tests/journeys/conftest.py``, ``tests/faults/test_replicas.py``,
``test_isolation.py``.)"""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx

from nemo_core.db import connect
from nemo_toolplane.rules.cache import LISTENER_APPLICATION_NAME
from nemo_toolplane.tokens import issue_token, revoke_token
from services.toolplane.tests.mcp_http import modern_call, post
from tests.conftest import POOLER_SERVER_CONNECTIONS
from tests.faults.support import OK, stack_clients
from tests.stack import Stack

CONCURRENT_CALLS = 24
SEARCH = modern_call("docs.search_docs", {"query": "audit"})


async def _sessions(owner_dsn: str) -> Counter[tuple[str, bool]]:
    """PostgreSQL sessions on the stack's database: (role, whether it is the change listener's)
    -> count."""
    conn = await connect(owner_dsn)
    try:
        rows = await conn.fetch(
            "SELECT usename, application_name = $1 AS listens FROM pg_stat_activity "
            "WHERE datname = current_database() AND usename IN ('nemo_context', 'nemo_toolplane')",
            LISTENER_APPLICATION_NAME,
        )
    finally:
        await conn.close()
    return Counter((row["usename"], row["listens"]) for row in rows)


async def test_services_reach_postgresql_only_through_the_pooler(pooled_stack: Stack) -> None:
    async with stack_clients(pooled_stack) as clients:
        # Each service's pool (10) could open more sessions than the pooler has for its role.
        outcomes = await asyncio.gather(
            *(clients.hint(n) for n in range(CONCURRENT_CALLS)),
            *(clients.bundle(n) for n in range(CONCURRENT_CALLS)),
        )
    assert set(outcomes) == {OK}
    sessions = await _sessions(pooled_stack.owner_dsn)
    assert 1 <= sessions["nemo_context", False] <= POOLER_SERVER_CONNECTIONS
    assert sessions["nemo_context", True] == 0
    assert sessions["nemo_toolplane", False] <= POOLER_SERVER_CONNECTIONS
    # The change listener's session, named as such (that it is direct, the revocation below
    # proves: through a transaction pooler no notification would reach it).
    assert sessions["nemo_toolplane", True] == 1


async def _refused(http: httpx.AsyncClient, stack: Stack, token: str) -> bool:
    response = await post(stack.mcp_url, SEARCH, token=token, client=http)
    return response.status_code == 401


async def test_a_revoked_token_is_refused_through_the_direct_listener(
    pooled_stack: Stack,
) -> None:
    owner = await connect(pooled_stack.owner_dsn)
    try:
        issued = await issue_token(owner, "research-agent", label=pooled_stack.token_label)
        async with httpx.AsyncClient(timeout=30) as http:
            # Kept in the tool plane's cache from here on...
            for _ in range(2):
                response = await post(pooled_stack.mcp_url, SEARCH, token=issued.token, client=http)
                assert response.status_code == 200, response.text
            await revoke_token(owner, issued.token_id)
            # ...until the notification of the revocation empties it.
            async with asyncio.timeout(10):
                while not await _refused(http, pooled_stack, issued.token):  # noqa: ASYNC110 - another process acts
                    await asyncio.sleep(0.05)
    finally:
        await owner.close()
