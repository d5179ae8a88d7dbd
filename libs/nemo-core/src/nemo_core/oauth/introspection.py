"""Opaque access tokens, verified by asking the issuer (RFC 7662 token introspection), for
providers that do not issue JWTs. The answer's claims are checked exactly as a JWT's are
(:mod:`.claims`): an active token must still name this issuer and this edge as its audience.

Each answer for an active token is reused for ``cache_seconds`` at most, never past the token's
expiry, so a busy agent does not cost the issuer a request per call; a token revoked at the
issuer is therefore refused here within that time. Inactive tokens are not kept.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict

import httpx

from nemo_core.oauth.claims import AccessToken, InvalidToken, access_token
from nemo_core.oauth.config import IntrospectionConfig, OAuthConfig
from nemo_core.oauth.issuer import Issuer, IssuerUnavailable

_MAX_KEPT = 10_000


class Introspector:
    """Asks the issuer about opaque tokens, keeping recent answers."""

    def __init__(
        self,
        config: OAuthConfig,
        introspection: IntrospectionConfig,
        issuer: Issuer,
        http: httpx.AsyncClient,
    ) -> None:
        self._config = config
        self._introspection = introspection
        self._issuer = issuer
        self._http = http
        self._kept: OrderedDict[str, tuple[AccessToken, float]] = OrderedDict()

    async def _endpoint(self) -> str:
        if self._introspection.endpoint is not None:
            return self._introspection.endpoint
        endpoint = (await self._issuer.metadata()).get("introspection_endpoint")
        if not isinstance(endpoint, str):
            raise IssuerUnavailable("the issuer's metadata names no introspection_endpoint")
        return endpoint

    async def verify(self, token: str) -> AccessToken:
        """The access token the issuer says ``token`` is; :class:`InvalidToken` when it is not
        active or not for this edge."""
        key = hashlib.sha256(token.encode()).hexdigest()
        now = time.time()
        kept = self._kept.get(key)
        if kept is not None and now < kept[1]:
            self._kept.move_to_end(key)
            return kept[0]
        self._kept.pop(key, None)
        try:
            response = await self._http.post(
                await self._endpoint(),
                data={"token": token, "token_type_hint": "access_token"},
                auth=(self._introspection.client_id, self._introspection.client_secret),
                headers={"Accept": "application/json"},
                timeout=self._config.http_timeout_seconds,
            )
        except httpx.HTTPError as error:
            raise IssuerUnavailable(f"introspection: {type(error).__name__}") from None
        if response.status_code != 200:
            raise IssuerUnavailable(f"introspection answered {response.status_code}")
        try:
            answer = response.json()
        except ValueError:
            raise IssuerUnavailable("introspection answered no JSON") from None
        if not isinstance(answer, dict) or answer.get("active") is not True:
            raise InvalidToken("the token is not active")
        verified = access_token(answer, self._config, now)
        until = min(verified.expires_at, now + self._introspection.cache_seconds)
        if len(self._kept) >= _MAX_KEPT:
            self._kept.popitem(last=False)
        self._kept[key] = (verified, until)
        return verified
