"""JWT access tokens (RFC 9068) verified locally: the algorithm from the allow-list (never
``none``, never a symmetric one), the type (``typ`` ``at+jwt``), the signature against the
issuer's published key named by the token's key id, then the claims (:mod:`.claims`). Nothing in
the token is believed before its signature is checked, the algorithm included: it only picks
which of the allowed ones applies, and a header that is wrong refuses the token sooner.

The type tells an access token from the other JWTs an issuer signs with the same keys (ID,
logout and DPoP proof tokens, signed requests). Providers that type their access tokens
generically (``JWT``, or no ``typ``: Keycloak's clients by default) are accepted only when the
edge is told so (``OAuthConfig.accept_untyped``); a token typed as anything else is refused
either way, and the audience check still refuses an ID token, whose audience is its client."""

from __future__ import annotations

import base64
import json
import re
import time
from typing import Any

from joserfc import jws
from joserfc.errors import JoseError

from nemo_core.oauth.claims import AccessToken, InvalidToken, access_token
from nemo_core.oauth.config import OAuthConfig
from nemo_core.oauth.issuer import Issuer

#: Three base64url segments: a JWS in compact form (an unsigned token has an empty third one).
JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
#: Larger than any access token a provider issues; bounds the work a junk header costs.
MAX_TOKEN_LENGTH = 16_384
#: RFC 9068 section 2.1: the media type ``application/at+jwt``, with or without its prefix
#: (RFC 7515 section 4.1.9), compared case-insensitively.
ACCESS_TOKEN_TYPES = frozenset({"at+jwt", "application/at+jwt"})
#: The generic type, which says nothing of what the token is for.
UNTYPED = frozenset({"jwt", "application/jwt"})


def looks_like_jwt(token: str) -> bool:
    return len(token) <= MAX_TOKEN_LENGTH and JWT_SHAPE.fullmatch(token) is not None


def _header(token: str) -> dict[str, Any]:
    segment = token.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except ValueError:
        raise InvalidToken("the token's header is not JSON") from None
    if not isinstance(header, dict):
        raise InvalidToken("the token's header is not a JSON object")
    return header


def _typed_as_access_token(typ: object, accept_untyped: bool) -> bool:
    if typ is None:
        return accept_untyped
    media_type = typ.lower() if isinstance(typ, str) else None
    return media_type in ACCESS_TOKEN_TYPES or (accept_untyped and media_type in UNTYPED)


async def verify_jwt(token: str, issuer: Issuer, config: OAuthConfig) -> AccessToken:
    """The access token ``token`` is, once its signature and claims hold; else
    :class:`InvalidToken` (or ``IssuerUnavailable`` when the keys cannot be had)."""
    header = _header(token)
    algorithm = header.get("alg")
    if not isinstance(algorithm, str) or algorithm not in config.algorithms:
        raise InvalidToken(
            f"the token's algorithm is not accepted (accepted: {', '.join(config.algorithms)})"
        )
    if "crit" in header or "b64" in header:
        raise InvalidToken("the token's header asks for extensions this server does not apply")
    if not _typed_as_access_token(header.get("typ"), config.accept_untyped):
        raise InvalidToken("the token is not typed as an access token (typ at+jwt, RFC 9068)")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise InvalidToken("the token's key id is not a string")
    key = await issuer.signing_key(kid)
    if key is None:
        raise InvalidToken("the token is signed with a key the issuer does not publish")
    if key.alg is not None and key.alg != algorithm:
        raise InvalidToken("the token's algorithm is not its key's")
    try:
        signed = jws.deserialize_compact(token, key, algorithms=[algorithm])
        claims = json.loads(signed.payload)
    except (JoseError, ValueError):
        raise InvalidToken("the token's signature does not verify") from None
    if not isinstance(claims, dict):
        raise InvalidToken("the token's payload is not a JSON object")
    return access_token(claims, config, time.time())
