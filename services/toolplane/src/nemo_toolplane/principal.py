"""Who is calling: the agent (from its token), and the session, user and request the call is for.

The user an agent acts for carries where it came from (:class:`UserSource`), because only some
sources may widen what the agent reaches. A token bound to a user decides the user, whatever the
caller sends. Otherwise the user named by the caller (``X-Nemo12-User-Id`` on the MCP edge,
``CallToolRequest.user_id`` over gRPC) is *vouched for* when an internal caller that the ACL
trusts to vouch for users sent it, and merely *asserted* otherwise: an asserted user is recorded
(audit rows, approvals) but reaches no learner. Session and request ids are optional and
generated when absent; every call also gets a server-made id of its own (``call_id``), so rows
stay apart when agents reuse request ids.
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


@dataclass(frozen=True)
class AgentIdentity:
    """What a valid token says: which agent, and for which user when the token is bound."""

    agent_id: str
    token_id: str
    bound_user_id: str | None


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
    token_id: str | None = None
    user_source: UserSource = UserSource.NONE
    call_id: str = field(default_factory=new_call_id)


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
        token_id=identity.token_id,
        user_source=source,
    )


def refusal_principal(
    identity: AgentIdentity,
    *,
    session_id: str | None,
    user_id: str | None,
    request_id: str | None,
) -> Principal:
    """The principal of a call refused before routing, for its audit row: the ids the caller
    sent that are usable, generated ones in place of the others (an unusable id is not kept)."""

    def usable(value: str | None) -> str | None:
        return value if value and _ID_PATTERN.match(value) else None

    return build_principal(
        identity,
        session_id=usable(session_id),
        user_id=usable(user_id),
        request_id=usable(request_id),
    )
