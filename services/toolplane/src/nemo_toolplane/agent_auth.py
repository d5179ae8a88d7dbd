"""Agent authentication, the same on both edges: a bearer token to the agent and its rules.

A missing or unknown token is refused, and the failure is held against the client address; once
an address has failed too often it is told so (the MCP edge answers 429, gRPC
RESOURCE_EXHAUSTED) instead of being told the token is wrong. Only failures count: a valid token
is never refused for its address, since agents behind one shared egress must not be locked out by
one stale token. Each edge only maps an :class:`AuthRefusal` to its own protocol.
"""

from __future__ import annotations

from dataclasses import dataclass

from nemo_toolplane.limits.auth_failures import FailedAuthentications
from nemo_toolplane.rules.cache import RulesCache
from nemo_toolplane.rules.store import AuthenticatedAgent


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value; None for anything else."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


@dataclass(frozen=True)
class AuthRefusal:
    """Why a call gets no agent."""

    token_sent: bool
    """A token came but names no live agent (otherwise none came)."""
    retry_after_seconds: int | None = None
    """Set when the address has failed too often: whole seconds, at least 1, until it may try
    again."""


class AgentAuthenticator:
    """Tokens to agents for both edges, with one count of failures per client address."""

    def __init__(self, rules: RulesCache, failures: FailedAuthentications) -> None:
        self._rules = rules
        self._failures = failures

    async def authenticate(
        self, token: str | None, source: str
    ) -> AuthenticatedAgent | AuthRefusal:
        """The agent of ``token`` with its rules, or why the call from ``source`` (a client
        address) gets none."""
        agent = await self._rules.load(token) if token else None
        if agent is not None:
            return agent
        # Counted on the buckets every replica shares (:mod:`nemo_toolplane.limits.auth_failures`).
        wait = await self._failures.charge(source)
        if wait is not None:
            return AuthRefusal(
                token_sent=token is not None, retry_after_seconds=max(1, round(wait))
            )
        return AuthRefusal(token_sent=token is not None)
