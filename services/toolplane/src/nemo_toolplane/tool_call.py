"""What a tool's executor may use: the caller, the context service, the tool plane's own database
and the docs library. Nothing else: no learner table, no credential.

A tool about a learner whose context-service read authorizes it (agent views) gets the call's
:class:`LearnerReach` to send along, and records the snapshot of what it returned
(:meth:`ToolCall.record_input`), which the call's audit row then carries."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from nemo_core.db import Connection, Pool
from nemo_toolplane.context_client import ContextClient, LearnerReach
from nemo_toolplane.docs.library import DocsLibrary
from nemo_toolplane.principal import Principal


@dataclass(frozen=True)
class Services:
    """The process-wide dependencies of executors."""

    context_service: ContextClient
    pool: Pool
    docs: DocsLibrary


@dataclass(frozen=True)
class ToolCall:
    """One call's view of the services."""

    principal: Principal
    services: Services
    #: The open transaction that consumes the call's approval, when the call needed one.
    approval_connection: Connection | None = None
    #: Who the call acts for and the grants' scopes, for tools the context service authorizes.
    reach: LearnerReach | None = None
    #: Snapshot references of the learner data the call returned (``input_ref``).
    input_refs: list[str] = field(default_factory=list)

    def record_input(self, input_ref: str) -> None:
        """Note the snapshot of learner data this call returns; "" (not written) is dropped,
        the call still succeeds (snapshots never block a read)."""
        if input_ref:
            self.input_refs.append(input_ref)

    def learner_reach(self) -> LearnerReach:
        """The reach the router gave this call; a tool that needs it and has none is a bug."""
        if self.reach is None:
            raise RuntimeError("this tool reads a learner but the call carries no reach")
        return self.reach

    @property
    def context_service(self) -> ContextClient:
        return self.services.context_service

    @property
    def pool(self) -> Pool:
        return self.services.pool

    @property
    def docs(self) -> DocsLibrary:
        return self.services.docs

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        """A transaction for the tool's writes; write tools write through nothing else.

        Under an approval it is nested in the approval's transaction, so the write and the
        approval's consumption commit together or not at all (and the call needs no second
        connection from the pool).
        """
        if self.approval_connection is not None:
            async with self.approval_connection.transaction():
                yield self.approval_connection
            return
        async with self.pool.acquire() as conn, conn.transaction():
            yield conn
