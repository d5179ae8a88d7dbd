"""The authorization server as this resource server sees it: its metadata (RFC 8414, or OpenID
discovery) and its signing keys (JWKS), fetched over HTTP and kept.

The keys are kept for ``jwks_max_age_seconds``. A token signed with a key id the kept set lacks
makes one fetch (the issuer rotated its keys), but at most one per ``jwks_refresh_seconds``: a
stream of tokens with made-up key ids must not turn into a stream of requests to the issuer.
Concurrent lookups share one fetch. When the issuer cannot be reached, the keys already kept stay
in use; with none kept, :class:`IssuerUnavailable` (the edge answers 503, never "valid").
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from joserfc.errors import JoseError
from joserfc.jwk import Key, KeySet

from nemo_core.oauth.config import OAuthConfig

logger = logging.getLogger(__name__)


class IssuerUnavailable(Exception):
    """The authorization server cannot be asked now (down, slow, or answering nonsense)."""


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: RFC 8414's well-known path (inserted before the
    issuer's path), then OpenID discovery's (appended)."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    return [
        urlunsplit(
            (parts.scheme, parts.netloc, "/.well-known/oauth-authorization-server" + path, "", "")
        ),
        issuer.rstrip("/") + "/.well-known/openid-configuration",
    ]


class Issuer:
    """One trusted issuer's metadata and keys."""

    def __init__(self, config: OAuthConfig, http: httpx.AsyncClient) -> None:
        self._config = config
        self._http = http
        self._metadata: dict[str, Any] | None = None
        self._keys: KeySet | None = None
        self._fetched_at = float("-inf")
        self._lock = asyncio.Lock()
        self.fetches = 0
        """Key sets fetched since start."""

    async def _get_json(self, url: str) -> Any:
        try:
            response = await self._http.get(url, timeout=self._config.http_timeout_seconds)
        except httpx.HTTPError as error:
            raise IssuerUnavailable(f"{url}: {type(error).__name__}") from None
        if response.status_code != 200:
            raise IssuerUnavailable(f"{url} answered {response.status_code}")
        try:
            return response.json()
        except ValueError:
            raise IssuerUnavailable(f"{url} answered no JSON") from None

    async def metadata(self) -> dict[str, Any]:
        """The issuer's metadata, naming this issuer exactly (another issuer's is refused)."""
        if self._metadata is not None:
            return self._metadata
        problems = []
        for url in metadata_urls(self._config.issuer):
            try:
                found = await self._get_json(url)
            except IssuerUnavailable as error:
                problems.append(str(error))
                continue
            if isinstance(found, dict) and found.get("issuer") == self._config.issuer:
                self._metadata = found
                return found
            problems.append(f"{url} names another issuer")
        raise IssuerUnavailable("; ".join(problems))

    async def _jwks_uri(self) -> str:
        if self._config.jwks_uri is not None:
            return self._config.jwks_uri
        uri = (await self.metadata()).get("jwks_uri")
        if not isinstance(uri, str):
            raise IssuerUnavailable("the issuer's metadata names no jwks_uri")
        return uri

    async def _fetch_keys(self) -> None:
        self._fetched_at = time.monotonic()
        self.fetches += 1
        found = await self._get_json(await self._jwks_uri())
        try:
            keys = KeySet.import_key_set(found)
        except (JoseError, KeyError, TypeError, ValueError):
            raise IssuerUnavailable("the issuer's key set cannot be read") from None
        self._keys = KeySet([key for key in keys if _public(key)])

    async def signing_key(self, kid: str | None) -> Key | None:
        """The issuer's public key with ``kid`` (without one: the only key), fetching the keys
        when they are missing, too old, or lack ``kid`` and the last fetch is not too recent;
        None when there is no such key. Raises :class:`IssuerUnavailable` when no keys are
        kept and none can be fetched."""
        key = self._find(kid)
        age = time.monotonic() - self._fetched_at
        stale = self._keys is None or age >= self._config.jwks_max_age_seconds
        if key is not None and not stale:
            return key
        if not stale and age < self._config.jwks_refresh_seconds:
            return None
        async with self._lock:
            # Another lookup may have fetched meanwhile.
            if (
                time.monotonic() - self._fetched_at
                >= min(self._config.jwks_refresh_seconds, self._config.jwks_max_age_seconds)
                or self._keys is None
            ):
                try:
                    await self._fetch_keys()
                except IssuerUnavailable:
                    if self._keys is None:
                        raise
                    logger.warning("cannot refresh the issuer's keys; the kept ones stay in use")
        return self._find(kid)

    def _find(self, kid: str | None) -> Key | None:
        if self._keys is None:
            return None
        keys = list(self._keys)
        if kid is None:
            return keys[0] if len(keys) == 1 else None
        return next((key for key in keys if key.kid == kid), None)


def _public(key: Key) -> bool:
    """Keys meant for signatures, not for encryption."""
    use = key.get("use")
    return use in (None, "sig")
