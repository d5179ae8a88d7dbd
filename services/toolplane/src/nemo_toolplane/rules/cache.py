"""Tokens, OAuth clients and rules kept in memory until the database says they changed.

Authenticating a call and loading its agent's grants and policies is one query; repeating it on
every call would be most of a call's cost. Instead, valid tokens, the agents of known OAuth
clients and their rules are kept, and every change to agents, tokens, OAuth clients, grants or
policies (from this process, another replica or an operator's command) fires a PostgreSQL
notification on :data:`CHANNEL` that empties the cache. While the listening connection is down,
nothing is cached and every call reads the database, so a revocation is never missed. Unknown
tokens and clients are never cached.

Two bounds hold even if a notification is lost: a token's expiry is checked on every call, and
no entry is older than the maximum age (:data:`MAX_AGE_SECONDS` by default). The listening
connection is also probed every heartbeat (:data:`HEARTBEAT_SECONDS` by default), because a
connection dropped silently by the network (no reset reaches us) would otherwise look alive while
no notification arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime
from typing import Any

import asyncpg

from nemo_core.db import connect
from nemo_toolplane.rules.store import AuthenticatedAgent, ClientAgent, RulesStore
from nemo_toolplane.tokens import hash_token

logger = logging.getLogger(__name__)

#: Notified by the triggers of migrations 0009 and 0020 on every change to agents, tokens, OAuth
#: clients, grants or policies.
CHANNEL = "nemo_toolplane_access"
#: The listening session's name in ``pg_stat_activity``: the one session of a tool plane that
#: must reach PostgreSQL directly, never through a transaction pooler.
LISTENER_APPLICATION_NAME = "nemo-toolplane-listener"
MAX_ENTRIES = 10_000
MAX_AGE_SECONDS = 30.0
HEARTBEAT_SECONDS = 10.0
_RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)


class RulesCache:
    """:meth:`load` answers from memory while the change notifications are being received."""

    def __init__(
        self,
        store: RulesStore,
        dsn: str,
        *,
        max_age_seconds: float = MAX_AGE_SECONDS,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
    ) -> None:
        self._store = store
        self._dsn = dsn
        self._max_age = max_age_seconds
        self._heartbeat = heartbeat_seconds
        self._entries: dict[str, tuple[AuthenticatedAgent, float]] = {}
        self._clients: dict[str, tuple[ClientAgent, float]] = {}
        self._listening = False
        self.generation = 0
        """Increases with every change seen (and every reconnection of the listener)."""

    @property
    def listening(self) -> bool:
        return self._listening

    def invalidate(self) -> None:
        """Forget everything (a change happened, or may have been missed)."""
        self.generation += 1
        self._entries.clear()
        self._clients.clear()

    async def load(self, token: str) -> AuthenticatedAgent | None:
        if not self._listening:
            return await self._store.load(token)
        key = hash_token(token)
        cached = self._entries.get(key)
        if cached is not None:
            agent, cached_at = cached
            if time.monotonic() - cached_at < self._max_age and not _expired(agent):
                return agent
            del self._entries[key]
        generation = self.generation
        loaded = await self._store.load(token)
        # A change seen while the query ran may not be in its result: do not keep it then.
        if loaded is not None and self._listening and generation == self.generation:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[key] = (loaded, time.monotonic())
        return loaded

    async def load_client(self, client_id: str) -> ClientAgent | None:
        """The agent an OAuth client acts as, with its rules (kept like a token's)."""
        if not self._listening:
            return await self._store.load_client(client_id)
        cached = self._clients.get(client_id)
        if cached is not None:
            agent, cached_at = cached
            if time.monotonic() - cached_at < self._max_age:
                return agent
            del self._clients[client_id]
        generation = self.generation
        loaded = await self._store.load_client(client_id)
        if loaded is not None and self._listening and generation == self.generation:
            if len(self._clients) >= MAX_ENTRIES:
                self._clients.clear()
            self._clients[client_id] = (loaded, time.monotonic())
        return loaded

    def _notified(self, *_: Any) -> None:
        self.invalidate()

    async def run(self, stopping: asyncio.Event) -> None:
        """Listen for changes until ``stopping`` is set, reconnecting when the connection drops."""
        attempt = 0
        while not stopping.is_set():
            try:
                conn = await connect(self._dsn, application_name=LISTENER_APPLICATION_NAME)
            except (OSError, asyncpg.PostgresError, TimeoutError):
                delay = _RETRY_SECONDS[min(attempt, len(_RETRY_SECONDS) - 1)]
                attempt += 1
                logger.warning("access change listener cannot connect", extra={"retry_in": delay})
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), delay)
                continue
            attempt = 0
            await self._listen(conn, stopping)
            if not stopping.is_set():
                logger.warning("access change listener lost its connection; reconnecting")

    async def _listen(
        self, conn: asyncpg.Connection[asyncpg.Record], stopping: asyncio.Event
    ) -> None:
        """Serve from the cache while ``conn`` receives notifications; until it drops or stop."""
        lost = asyncio.Event()
        try:
            conn.add_termination_listener(lambda _: lost.set())
            await conn.add_listener(CHANNEL, self._notified)
            # Changes made while nobody listened are unknown: start from nothing.
            self.invalidate()
            self._listening = True
            waits = [
                asyncio.ensure_future(stopping.wait()),
                asyncio.ensure_future(lost.wait()),
                asyncio.ensure_future(_heartbeat(conn, self._heartbeat)),
            ]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()
        finally:
            self._listening = False
            self.invalidate()
            if not conn.is_closed():
                await conn.close()


def _expired(agent: AuthenticatedAgent) -> bool:
    return agent.expires_at is not None and agent.expires_at <= datetime.now(UTC)


async def _heartbeat(conn: asyncpg.Connection[asyncpg.Record], seconds: float) -> None:
    """Return when the listening connection stops answering (the listener then reconnects)."""
    while True:
        await asyncio.sleep(seconds)
        try:
            await conn.fetchval("SELECT 1", timeout=seconds)
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
            logger.warning("access change listener stopped answering")
            return
