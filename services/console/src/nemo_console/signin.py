"""Signing people in at the platform's OpenID provider: authorization code with PKCE (S256), the
console a confidential client, the access token asked for the people's API (RFC 8707
``resource``).

The console does not decide who signed in: it hands the access token to the tool plane, which
verifies it and says who the person is and whether they are an operator (``GetPerson``). The
token came straight from the provider's token endpoint over the console's own connection, so
nothing a browser sent can stand in for it; the state binds the answer to the browser that
started the sign-in, and the PKCE verifier binds the code to it.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx

from nemo_console.sessions import SignIn
from nemo_console.settings import ConsoleSettings


class SignInFailed(Exception):
    """The sign-in cannot complete; the message says why, in words safe to show."""


@dataclass(frozen=True)
class Tokens:
    access_token: str
    #: Epoch seconds.
    expires_at: float


def challenge(verifier: str) -> str:
    """The S256 code challenge of a PKCE verifier (RFC 7636)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def safe_next(path: str | None, root_path: str) -> str:
    """Where to go after signing in: a path of the console itself, never another site."""
    home = f"{root_path}/"
    if not path or not path.startswith(home) or path.startswith("//") or "\\" in path:
        return home
    return path


class OpenIdProvider:
    """The provider's endpoints (from its discovery document) and the console's client."""

    def __init__(self, settings: ConsoleSettings, http: httpx.AsyncClient) -> None:
        self._settings = settings
        self._http = http
        self._metadata: dict[str, Any] | None = None

    @property
    def configured(self) -> bool:
        return self._settings.oidc_issuer is not None and self._settings.people_audience is not None

    @property
    def redirect_uri(self) -> str:
        return f"{self._settings.public_url}/auth/callback"

    async def _endpoints(self) -> dict[str, Any]:
        if self._metadata is None:
            issuer = (self._settings.oidc_issuer or "").rstrip("/")
            try:
                response = await self._http.get(f"{issuer}/.well-known/openid-configuration")
                response.raise_for_status()
                metadata = response.json()
            except (httpx.HTTPError, ValueError):
                raise SignInFailed("the sign-in service cannot be reached; try again") from None
            if not isinstance(metadata, dict) or metadata.get("issuer") != issuer:
                raise SignInFailed("the sign-in service answered for another issuer")
            self._metadata = metadata
        return self._metadata

    async def begin(self, next_path: str) -> tuple[str, SignIn]:
        """The provider's authorization URL to send the browser to, and what to keep until the
        person comes back."""
        sign_in = SignIn(
            state=secrets.token_urlsafe(32),
            verifier=secrets.token_urlsafe(64),
            nonce=secrets.token_urlsafe(32),
            next_path=next_path,
        )
        endpoint = (await self._endpoints())["authorization_endpoint"]
        query = urlencode(
            {
                "response_type": "code",
                "client_id": self._settings.oidc_client_id,
                "redirect_uri": self.redirect_uri,
                "scope": "openid",
                "state": sign_in.state,
                "nonce": sign_in.nonce,
                "code_challenge": challenge(sign_in.verifier),
                "code_challenge_method": "S256",
                "resource": self._settings.people_audience,
            }
        )
        return f"{endpoint}?{query}", sign_in

    async def finish(self, sign_in: SignIn, code: str) -> Tokens:
        """Exchange the code for the person's access token for the people's API."""
        endpoint = (await self._endpoints())["token_endpoint"]
        secret = self._settings.oidc_client_secret
        try:
            response = await self._http.post(
                endpoint,
                data={
                    "grant_type": "authorization_code",
                    "code": code,
                    "redirect_uri": self.redirect_uri,
                    "code_verifier": sign_in.verifier,
                    "resource": self._settings.people_audience,
                },
                auth=(self._settings.oidc_client_id, secret.get_secret_value() if secret else ""),
                headers={"Accept": "application/json"},
            )
            answer = response.json()
        except (httpx.HTTPError, ValueError):
            raise SignInFailed("the sign-in service did not answer; try again") from None
        if response.status_code != 200 or not isinstance(answer, dict):
            raise SignInFailed("the sign-in service refused the sign-in; try again")
        token = answer.get("access_token")
        expires_in = answer.get("expires_in")
        if not isinstance(token, str) or not isinstance(expires_in, int | float):
            raise SignInFailed("the sign-in service answered without an access token")
        return Tokens(token, time.time() + float(expires_in))
