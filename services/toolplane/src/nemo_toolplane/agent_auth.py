"""Agent authentication, the same on both edges: a credential to the agent and its rules.

Two credentials name an agent. An agent token (issued by an operator, stored as its SHA-256) is
looked up. An OAuth access token is verified (:mod:`nemo_toolplane.oauth`): its subject is the
user the agent acts for, as for a token bound to that user; its client is mapped to an agent by
``toolplane.oauth_clients`` (a client mapped to none is refused, with the id an operator needs to
map it); its scopes narrow that agent's grants.

A missing or invalid credential is refused, and the failure is held against the client address;
once an address has failed too often it is told so (the MCP edge answers 429, gRPC
RESOURCE_EXHAUSTED) instead of being told the credential is wrong. Only failures count: a valid
credential is never refused for its address, since agents behind one shared egress must not be
locked out by one stale token. When a credential cannot be checked now (the authorization server
or the context service is unreachable), the refusal says so and fails closed. Each edge only maps
an :class:`AuthRefusal` to its own protocol.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from nemo_core.oauth.claims import InvalidToken
from nemo_core.oauth.issuer import IssuerUnavailable
from nemo_core.oauth.signed import looks_like_jwt
from nemo_toolplane.envelope import ErrorCode, ToolError
from nemo_toolplane.limits.auth_failures import FailedAuthentications
from nemo_toolplane.oauth.credentials import oauth_credential
from nemo_toolplane.oauth.verifier import OAuthVerifier
from nemo_toolplane.principal import (
    NO_CREDENTIAL,
    AgentIdentity,
    Credential,
    CredentialKind,
)
from nemo_toolplane.rules.cache import RulesCache
from nemo_toolplane.rules.store import AuthenticatedAgent
from nemo_toolplane.tokens import TOKEN_PREFIX

logger = logging.getLogger(__name__)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value; None for anything else."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class RefusalKind(StrEnum):
    """Why a request gets no agent."""

    MISSING = "no credential"
    INVALID = "invalid credential"
    UNKNOWN_CLIENT = "unregistered OAuth client"
    UNAVAILABLE = "credential cannot be checked now"

    @property
    def code(self) -> ErrorCode:
        """The envelope code the refusal carries (and its audit row)."""
        if self is RefusalKind.UNKNOWN_CLIENT:
            return ErrorCode.AUTHORIZATION_ERROR
        if self is RefusalKind.UNAVAILABLE:
            return ErrorCode.DEPENDENCY_ERROR
        return ErrorCode.AUTHENTICATION_ERROR


@dataclass(frozen=True)
class AuthRefusal:
    """Why a request gets no agent, in words safe to show the caller, and what is known of the
    credential for the audit row."""

    kind: RefusalKind
    message: str
    credential: Credential = NO_CREDENTIAL
    retry_after_seconds: int | None = None
    """Set when the address has failed too often: whole seconds, at least 1, until it may try
    again."""

    @property
    def token_sent(self) -> bool:
        return self.kind is not RefusalKind.MISSING


class AgentAuthenticator:
    """Credentials to agents for both edges, with one count of failures per client address."""

    def __init__(
        self,
        rules: RulesCache,
        failures: FailedAuthentications,
        oauth: OAuthVerifier | None = None,
    ) -> None:
        self._rules = rules
        self._failures = failures
        self._oauth = oauth

    @property
    def oauth(self) -> OAuthVerifier | None:
        return self._oauth

    async def authenticate(
        self, token: str | None, source: str
    ) -> AuthenticatedAgent | AuthRefusal:
        """The agent of ``token`` with its rules, or why the request from ``source`` (a client
        address) gets none."""
        if token is None:
            return await self._failed(
                AuthRefusal(RefusalKind.MISSING, "a bearer token is required"), source
            )
        oauth = self._oauth
        if oauth is not None and looks_like_jwt(token):
            return await self._oauth_agent(oauth, token, source)
        agent = await self._rules.load(token)
        if agent is not None:
            return agent
        if oauth is not None and oauth.introspects and not token.startswith(TOKEN_PREFIX):
            return await self._oauth_agent(oauth, token, source)
        unknown = AuthRefusal(
            RefusalKind.INVALID,
            "the agent token is unknown, revoked or expired",
            Credential(CredentialKind.AGENT_TOKEN),
        )
        return await self._failed(unknown, source)

    async def _oauth_agent(
        self, oauth: OAuthVerifier, token: str, source: str
    ) -> AuthenticatedAgent | AuthRefusal:
        try:
            verified = await oauth.verify(token)
        except InvalidToken as invalid:
            refused = AuthRefusal(
                RefusalKind.INVALID, invalid.message, oauth_credential(invalid.facts)
            )
            return await self._failed(refused, source)
        except (IssuerUnavailable, ToolError) as unavailable:
            # The issuer's keys, its introspection or the context service (does the subject
            # exist?) cannot be had: nothing can be verified, so nothing is let through.
            logger.warning(
                "an OAuth access token cannot be verified now", extra={"problem": str(unavailable)}
            )
            return AuthRefusal(
                RefusalKind.UNAVAILABLE,
                "the access token cannot be verified now; retry later",
                Credential(CredentialKind.OAUTH),
            )
        client = await self._rules.load_client(verified.client_id)
        if client is None:
            # Not a failure of the person's: an operator has not mapped the host's client yet.
            return AuthRefusal(
                RefusalKind.UNKNOWN_CLIENT,
                f"the OAuth client {verified.client_id!r} is not registered with the tool plane; "
                "an operator maps it to an agent with `nemo oauth-clients add`",
                oauth_credential(verified.facts),
            )
        if client.revoked_by(verified.user_id):
            revoked = AuthRefusal(
                RefusalKind.INVALID,
                "the person this token acts for revoked this host's access",
                oauth_credential(verified.facts),
            )
            return await self._failed(revoked, source)
        identity = AgentIdentity(
            client.agent_id, oauth_credential(verified.facts), verified.user_id
        )
        expires_at = datetime.fromtimestamp(verified.expires_at, UTC)
        return AuthenticatedAgent(identity, client.rules, expires_at)

    async def _failed(self, refusal: AuthRefusal, source: str) -> AuthRefusal:
        # Counted on the buckets every replica shares (:mod:`nemo_toolplane.limits.auth_failures`).
        wait = await self._failures.charge(source)
        if wait is None:
            return refusal
        return AuthRefusal(refusal.kind, refusal.message, refusal.credential, max(1, round(wait)))
