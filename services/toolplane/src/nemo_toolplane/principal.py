"""Who is calling: the agent (from its credential), and the session, user and request the call is
for.

Two kinds of credential name an agent (:class:`Credential`): an agent token an operator issued,
optionally bound to a user, and an OAuth access token, whose subject is the person who signed in and
consented, whose client maps to an agent, and whose scopes narrow that agent's grants. The user an
agent acts for carries where it came from (:class:`UserSource`), because only some sources may widen
what the agent reaches. A token bound to a user, like an OAuth token's subject, decides the user,
whatever the caller sends. Otherwise the user named by the caller (``X-Nemo12-User-Id`` on the MCP
edge, ``CallToolRequest.user_id`` over gRPC) is *vouched for* when an internal caller that the ACL
trusts to vouch for users sent it, and merely *asserted* otherwise: an asserted user is recorded
(audit rows, approvals) but reaches no learner. Session and request ids are optional and generated
when absent; every call also gets a server-made id of its own (``call_id``), so rows stay apart when
agents reuse request ids.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from enum import StrEnum

# Visible ASCII without spaces, bounded: the ids end up in logs, audit rows and response headers.
_ID_PATTERN = re.compile(r"^[\x21-\x7e]{1,128}\Z")


class InvalidIdentifier(ValueError):
    """A caller-supplied session, user or request id is empty, too long or not printable ASCII."""


class UserSource(StrEnum):
    """Where the user a call acts for came from."""

    NONE = "none"
    """Nobody: the token is bound to no user and the caller named none."""
    TOKEN = "token"  # noqa: S105  a source of a user, not a token
    """The agent token is bound to the user."""
    CALLER = "caller"
    """An internal caller trusted to vouch for users (``acl.USER_VOUCHING_CALLERS``) named it."""
    ASSERTED = "asserted"
    """The agent named it itself: kept for attribution, never a basis for access."""


class CredentialKind(StrEnum):
    """What a request authenticated with."""

    NONE = "none"
    """Nothing: no credential came (only a refused request has none)."""
    AGENT_TOKEN = "agent_token"  # noqa: S105  a kind of credential, not a token
    """A static agent token issued by an operator (``nemo issue-token``)."""
    OAUTH = "oauth"
    """An OAuth access token from the platform's authorization server."""


@dataclass(frozen=True)
class Credential:
    """What authenticated a request, as its audit row records it (never the token itself)."""

    kind: CredentialKind
    #: The agent token's id, or the OAuth access token's ``jti`` (None when it carries none).
    token_id: str | None = None
    #: The OAuth client the token was issued to.
    client_id: str | None = None
    #: The OAuth token's subject, as the token names it.
    subject: str | None = None
    #: The scopes an OAuth token carries; None for a credential that scopes do not narrow.
    scopes: frozenset[str] | None = None

    def allows(self, scope: str) -> bool:
        """Whether the credential's scopes cover ``scope`` (always, when it has none)."""
        return self.scopes is None or scope in self.scopes

    @property
    def binding(self) -> str | None:
        """What an approval is bound to besides agent and user: the agent token, or for OAuth the
        client (a person's access tokens are renewed every hour; the consent behind them is the
        client's)."""
        if self.kind is CredentialKind.OAUTH:
            return f"oauth-client:{self.client_id}"
        return self.token_id


#: The credential of a request that came without any.
NO_CREDENTIAL = Credential(CredentialKind.NONE)


@dataclass(frozen=True)
class AgentIdentity:
    """What a valid credential says: which agent, and for which user when it names one."""

    agent_id: str
    credential: Credential
    bound_user_id: str | None

    @property
    def token_id(self) -> str | None:
        return self.credential.token_id


def new_call_id() -> str:
    return str(uuid.uuid4())


@dataclass(frozen=True)
class Principal:
    """The identifiers of a call: agent, session, user (or None, with its source), request, and
    the token and server-made call id behind them."""

    agent_id: str
    session_id: str
    user_id: str | None
    request_id: str
    credential: Credential = NO_CREDENTIAL
    user_source: UserSource = UserSource.NONE
    call_id: str = field(default_factory=new_call_id)

    @property
    def token_id(self) -> str | None:
        """The agent token's id, or the OAuth access token's ``jti``."""
        return self.credential.token_id


def checked_id(value: str, what: str) -> str:
    """``value`` if it is a usable identifier; raises :class:`InvalidIdentifier` otherwise."""
    if not _ID_PATTERN.match(value):
        raise InvalidIdentifier(f"{what} must be 1 to 128 visible ASCII characters")
    return value


def new_session_id() -> str:
    return f"S-{uuid.uuid4()}"


def new_request_id() -> str:
    return f"REQ-{uuid.uuid4()}"


def build_principal(
    identity: AgentIdentity,
    *,
    session_id: str | None,
    user_id: str | None,
    request_id: str | None,
    vouched: bool = False,
) -> Principal:
    """The principal of one call; empty or absent ids are generated, invalid ones rejected.
    ``vouched``: the caller is trusted to vouch for the user it names."""
    user, source = identity.bound_user_id, UserSource.TOKEN
    if user is None:
        user = checked_id(user_id, "user id") if user_id else None
        source = UserSource.NONE if user is None else (
            UserSource.CALLER if vouched else UserSource.ASSERTED
        )  # fmt: skip
    return Principal(
        agent_id=identity.agent_id,
        session_id=checked_id(session_id, "session id") if session_id else new_session_id(),
        user_id=user,
        request_id=checked_id(request_id, "request id") if request_id else new_request_id(),
        credential=identity.credential,
        user_source=source,
    )


def usable_id(value: str | None) -> str | None:
    """``value`` when it is a usable identifier; None otherwise (absent, empty or unusable)."""
    return value if value and _ID_PATTERN.match(value) else None


def refusal_principal(
    identity: AgentIdentity,
    *,
    session_id: str | None,
    user_id: str | None,
    request_id: str | None,
) -> Principal:
    """The principal of a call refused before routing, for its audit row: the ids the caller
    sent that are usable, generated ones in place of the others (an unusable id is not kept)."""

    return build_principal(
        identity,
        session_id=usable_id(session_id),
        user_id=usable_id(user_id),
        request_id=usable_id(request_id),
    )
