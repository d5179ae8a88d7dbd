"""What kind of tool a tool is: its risk, its mode, the OAuth scope it needs, and the MCP hints
they imply.

The vocabulary the registry, the policy engine and the stored grants share; it imports nothing of
the tool plane, so each of them can import it without depending on another.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Risk(StrEnum):
    """How much harm a tool can do, lowest first."""

    LOW = "LOW"
    MEDIUM = "MEDIUM"
    HIGH = "HIGH"
    CRITICAL = "CRITICAL"

    @property
    def rank(self) -> int:
        return list(Risk).index(self)


class Mode(StrEnum):
    """Whether a tool reads or writes; policies read this, never the executor's code."""

    READ = "read"
    WRITE = "write"


class Scope(StrEnum):
    """The OAuth scope a tool needs: what a person consents to when an MCP host asks for access.

    A token's scopes narrow its agent's grants and never widen them: a call needs both a grant
    for the tool and the tool's scope. Agent tokens carry no scopes and are not narrowed. The
    local authorization server offers exactly these: its launcher's ``TOOL_SCOPES``
    (``nemo_devtools.oauth_server``) are checked equal to them by the registrations contract.
    """

    LEARNER_READ = "learner.read"
    LEARNER_WRITE = "learner.write"
    KNOWLEDGE_READ = "knowledge.read"
    DOCS_READ = "docs.read"
    APPLICATION_READ = "application.read"
    APPLICATION_WRITE = "application.write"

    @property
    def mode(self) -> Mode:
        """Whether the scope lets a tool read or write."""
        return Mode.WRITE if self.value.endswith(".write") else Mode.READ


@dataclass(frozen=True)
class ToolHints:
    """MCP tool annotations, derived from mode and risk only."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


def hints_for(mode: Mode, risk: Risk) -> ToolHints:
    """Reads change nothing and can be repeated; writes at HIGH risk or above may destroy data.
    Every tool acts on the platform's own data, so none is open-world."""
    return ToolHints(
        read_only=mode is Mode.READ,
        destructive=mode is Mode.WRITE and risk.rank >= Risk.HIGH.rank,
        idempotent=mode is Mode.READ,
        open_world=False,
    )
