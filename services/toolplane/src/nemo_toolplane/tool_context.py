"""What a tool's executor may use: the caller, the context service, the tool plane's own database
and the docs library. Nothing else: no learner table, no credential."""

from __future__ import annotations

from dataclasses import dataclass

from nemo_core.db import Pool
from nemo_toolplane.context_client import ContextClient
from nemo_toolplane.docs_library import DocsLibrary
from nemo_toolplane.principal import Principal


@dataclass(frozen=True)
class Services:
    """The process-wide dependencies of executors."""

    context: ContextClient
    pool: Pool
    docs: DocsLibrary


@dataclass(frozen=True)
class ToolContext:
    """One call's view of the services."""

    principal: Principal
    services: Services

    @property
    def context(self) -> ContextClient:
        return self.services.context

    @property
    def pool(self) -> Pool:
        return self.services.pool

    @property
    def docs(self) -> DocsLibrary:
        return self.services.docs
