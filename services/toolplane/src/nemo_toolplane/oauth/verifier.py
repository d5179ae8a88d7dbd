"""Which tokens are OAuth access tokens, and their verification: a JWT locally, any other token
by introspection when the edge is set up for it. The person a token names must be a user of the
platform (asked of the context service, the only service that reads users, and kept a while)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import httpx

from nemo_core.oauth.claims import AccessToken, InvalidToken
from nemo_core.oauth.config import OAuthConfig
from nemo_core.oauth.introspection import Introspector
from nemo_core.oauth.issuer import Issuer
from nemo_core.oauth.signed import looks_like_jwt, verify_jwt

#: How long "this user exists" is kept; a user removed from the platform is refused after it.
KNOWN_USER_SECONDS = 300.0
#: How long "no such user" is kept (a user signed up a moment ago is let in soon).
UNKNOWN_USER_SECONDS = 10.0
_MAX_KEPT_USERS = 10_000

UserLookup = Callable[[str], Awaitable[bool]]


class KnownUsers:
    """Whether a user id names a platform user, asked once in a while."""

    def __init__(self, lookup: UserLookup) -> None:
        self._lookup = lookup
        self._kept: OrderedDict[str, tuple[bool, float]] = OrderedDict()

    async def exists(self, user_id: str) -> bool:
        now = time.monotonic()
        kept = self._kept.get(user_id)
        if kept is not None and now < kept[1]:
            return kept[0]
        exists = await self._lookup(user_id)
        self._kept.pop(user_id, None)
        if len(self._kept) >= _MAX_KEPT_USERS:
            self._kept.popitem(last=False)
        self._kept[user_id] = (
            exists,
            now + (KNOWN_USER_SECONDS if exists else UNKNOWN_USER_SECONDS),
        )
        return exists


class OAuthVerifier:
    """Verifies the OAuth access tokens the edge accepts."""

    def __init__(self, config: OAuthConfig, http: httpx.AsyncClient, users: UserLookup) -> None:
        self.config = config
        self.issuer = Issuer(config, http)
        self._introspector = (
            Introspector(config, config.introspection, self.issuer, http)
            if config.introspection is not None
            else None
        )
        self._users = KnownUsers(users)

    @property
    def introspects(self) -> bool:
        return self._introspector is not None

    async def verify(self, token: str) -> AccessToken:
        """The verified token, naming a user the platform knows; :class:`InvalidToken` (or
        ``IssuerUnavailable``, or the context service's ``ToolError``) otherwise."""
        if looks_like_jwt(token):
            verified = await verify_jwt(token, self.issuer, self.config)
        elif self._introspector is not None:
            verified = await self._introspector.verify(token)
        else:
            raise InvalidToken("the token is not a JWT access token")
        if not await self._users.exists(verified.user_id):
            raise InvalidToken("the token's subject names no user of this platform", verified.facts)
        return verified
