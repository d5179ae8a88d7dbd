"""The one error envelope of the tool plane: ``{success: false, error: {code, message, retryable,
details}}`` with ten codes.

Every tool-level failure (a denial, invalid arguments, a failed dependency) is a
:class:`ToolError` turned into this envelope; the MCP edge puts it in ``structuredContent`` with
``isError: true`` and the gRPC ``CallTool`` in its response. ``details`` carries identifiers of
the tool plane's own (approval id, failing field, policy name), never learner data.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any


class ErrorCode(StrEnum):
    """The ten codes an agent can branch on."""

    AUTHENTICATION_ERROR = "AUTHENTICATION_ERROR"
    AUTHORIZATION_ERROR = "AUTHORIZATION_ERROR"
    RESOURCE_NOT_FOUND = "RESOURCE_NOT_FOUND"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    CONFLICT = "CONFLICT"
    RATE_LIMITED = "RATE_LIMITED"
    DEPENDENCY_ERROR = "DEPENDENCY_ERROR"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    POLICY_DENIED = "POLICY_DENIED"
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"


#: Codes whose calls may succeed when simply repeated later; every other code needs a change first.
RETRYABLE_BY_DEFAULT = frozenset({ErrorCode.RATE_LIMITED, ErrorCode.DEPENDENCY_ERROR})


class ToolError(Exception):
    """A tool-level failure; ``message`` and ``details`` are shown to the agent as they are."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
        retryable: bool | None = None,
        audit: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details: Mapping[str, Any] = MappingProxyType(dict(details or {}))
        self.retryable = code in RETRYABLE_BY_DEFAULT if retryable is None else retryable
        #: Facts for the call's audit row only (the rule that refused it), never shown.
        self.audit: Mapping[str, Any] = MappingProxyType(dict(audit or {}))

    def __repr__(self) -> str:
        return f"ToolError({self.code}, {self.message!r})"

    def envelope(self) -> dict[str, Any]:
        """The error envelope as a JSON-ready dict."""
        return {
            "success": False,
            "error": {
                "code": self.code.value,
                "message": self.message,
                "retryable": self.retryable,
                "details": dict(self.details),
            },
        }


def internal_error() -> ToolError:
    """What the agent sees of an unexpected failure; the detail stays in the server log."""
    return ToolError(ErrorCode.INTERNAL_ERROR, "the tool failed unexpectedly")
