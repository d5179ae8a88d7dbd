"""An access token's claims, checked the same way whether they come signed (a JWT) or from the
issuer's introspection endpoint: issuer exact, this edge in the audience (a token without one is
refused), expiry and not-before within the leeway, and the person, the client and the scopes
where the claim mapping says they are."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nemo_core.oauth.config import OAuthConfig

# Ids end up in audit rows, logs and the context service's requests: visible ASCII, bounded.
_USER_ID = re.compile(r"[\x21-\x7e]{1,128}")
_CLIENT_ID = re.compile(r"[\x21-\x7e]{1,512}")
_TOKEN_ID = re.compile(r"[\x21-\x7e]{1,256}")
_SCOPE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,128}")  # RFC 6749 scope-token
_MAX_SCOPES = 64


@dataclass(frozen=True)
class TokenFacts:
    """What a token says of itself that a log may record (never the token): its id, client,
    subject and scopes. Empty unless the issuer's signature or introspection vouches for them."""

    jti: str | None = None
    client_id: str | None = None
    subject: str | None = None
    scopes: frozenset[str] | None = None


class InvalidToken(Exception):
    """The token is not accepted here. The message says which check failed and is safe to show
    the caller; ``facts`` is what may be recorded of it."""

    def __init__(self, message: str, facts: TokenFacts | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.facts = facts or TokenFacts()


@dataclass(frozen=True)
class AccessToken:
    """A verified access token: who it acts for, through which client, with what consent."""

    user_id: str
    client_id: str
    scopes: frozenset[str]
    #: Epoch seconds.
    expires_at: float
    #: The ``sub`` claim (the person as the issuer names them).
    subject: str | None = None
    jti: str | None = None

    @property
    def facts(self) -> TokenFacts:
        return TokenFacts(
            jti=self.jti, client_id=self.client_id, subject=self.subject, scopes=self.scopes
        )


def _text(claims: Mapping[str, Any], name: str, pattern: re.Pattern[str]) -> str | None:
    value = claims.get(name)
    return value if isinstance(value, str) and pattern.fullmatch(value) else None


def _time(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _scopes(claims: Mapping[str, Any]) -> frozenset[str] | None:
    """``scope`` (space-separated, RFC 9068) or ``scp`` (a list, as some providers write it);
    None when either is malformed."""
    value = claims.get("scope", claims.get("scp", ""))
    items = value.split() if isinstance(value, str) else value
    if not isinstance(items, list) or len(items) > _MAX_SCOPES:
        return None
    if not all(isinstance(item, str) and _SCOPE.fullmatch(item) for item in items):
        return None
    return frozenset(items)


def _audiences(claims: Mapping[str, Any]) -> list[str]:
    value = claims.get("aud")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


def access_token(claims: Mapping[str, Any], config: OAuthConfig, now: float) -> AccessToken:
    """The token the issuer vouches for in ``claims``; :class:`InvalidToken` naming the first
    check that fails. ``now`` is epoch seconds."""
    jti = _text(claims, "jti", _TOKEN_ID)
    client_id = _text(claims, config.client_claim, _CLIENT_ID)
    subject = _text(claims, "sub", _USER_ID)
    scopes = _scopes(claims)
    vouched = TokenFacts(jti=jti, client_id=client_id, subject=subject, scopes=scopes)

    def refuse(message: str) -> InvalidToken:
        return InvalidToken(message, vouched)

    if claims.get("iss") != config.issuer:
        raise refuse("the token was issued by another authorization server")
    if config.resource not in _audiences(claims):
        raise refuse(f"the token is not for this resource (its audience must be {config.resource})")
    leeway = config.leeway_seconds
    expires_at = _time(claims, "exp")
    if expires_at is None:
        raise refuse("the token has no expiry")
    if now >= expires_at + leeway:
        raise refuse("the token has expired")
    not_before = _time(claims, "nbf")
    if "nbf" in claims and (not_before is None or now + leeway < not_before):
        raise refuse("the token is not valid yet")
    issued_at = _time(claims, "iat")
    if "iat" in claims and (issued_at is None or issued_at > now + leeway):
        raise refuse("the token was issued in the future")
    user_id = _text(claims, config.user_claim, _USER_ID)
    if user_id is None:
        raise refuse(f"the token names no user in its {config.user_claim!r} claim")
    if client_id is None:
        raise refuse(f"the token names no client in its {config.client_claim!r} claim")
    if scopes is None:
        raise refuse("the token's scope claim is malformed")
    return AccessToken(
        user_id=user_id,
        client_id=client_id,
        scopes=scopes,
        expires_at=expires_at,
        subject=subject,
        jti=jti,
    )
