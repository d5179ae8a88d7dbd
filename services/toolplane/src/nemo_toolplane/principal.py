"""Who is calling: the agent (from its token), and the session, user and request the call is for.

A token bound to a user decides the user; only an unbound token takes it from the caller
(``X-Nemo12-User-Id`` on the MCP edge, ``user_id`` over gRPC). Without either, user-scoped grants
reach no learner. Session and request ids are optional and generated when absent.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

# Visible ASCII without spaces, bounded: the ids end up in logs, audit rows and response headers.
_ID_PATTERN = re.compile(r"^[\x21-\x7e]{1,128}\Z")


class InvalidIdentifier(ValueError):
    """A caller-supplied session, user or request id is empty, too long or not printable ASCII."""


@dataclass(frozen=True)
class AgentIdentity:
    """What a valid token says: which agent, and for which user when the token is bound."""

    agent_id: str
    token_id: str | None
    bound_user_id: str | None


@dataclass(frozen=True)
class Principal:
    """The four identifiers of a call: agent, session, user (or None) and request."""

    agent_id: str
    session_id: str
    user_id: str | None
    request_id: str
    token_id: str | None = None


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
) -> Principal:
    """The principal of one call; empty or absent ids are generated, invalid ones rejected."""
    user = identity.bound_user_id
    if user is None and user_id:
        user = checked_id(user_id, "user id")
    return Principal(
        agent_id=identity.agent_id,
        session_id=checked_id(session_id, "session id") if session_id else new_session_id(),
        user_id=user,
        request_id=checked_id(request_id, "request id") if request_id else new_request_id(),
        token_id=identity.token_id,
    )
