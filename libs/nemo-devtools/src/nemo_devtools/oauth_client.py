"""A headless OAuth 2.1 client of the local authorization server: authorization code with PKCE
(S256), the development sign-in and consent forms posted as a person would, the code exchanged
for tokens; refresh and dynamic client registration too.

It speaks to any authorization server for the protocol steps; the sign-in step follows the
local server's pages (``local-oauth/interactions.mjs`` documents their contract), so it works
only there. `nemo dev oauth-token` and the tests use it::

    async with httpx.AsyncClient() as http:
        tokens = await obtain_tokens(http, issuer, user="U-2041-P1", password=DEV_PASSWORD,
                                     client_id=DEV_CLIENT_ID, scopes=["learner.read"],
                                     resource="http://127.0.0.1:8080/mcp")
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx

from nemo_devtools.oauth_server import discovery

#: The development client's redirect: loopback, on a port nothing needs to listen on (the
#: client reads the code from the redirect instead of following it).
REDIRECT_URI = "http://127.0.0.1:8976/callback"
_MAX_REDIRECTS = 10
_FORM_ACTION = re.compile(r'<form method="post" action="([^"]+/(?:login|confirm))"')
_ALERT = re.compile(r'role="alert"[^>]*>(.*?)</p>', re.S)


class OAuthFlowError(Exception):
    """A step of the flow was refused; the message names the step and the server's reason."""


@dataclass(frozen=True)
class Pkce:
    """A PKCE verifier and its S256 challenge (RFC 7636)."""

    verifier: str
    challenge: str

    @classmethod
    def new(cls) -> Pkce:
        verifier = secrets.token_urlsafe(48)
        digest = hashlib.sha256(verifier.encode("ascii")).digest()
        return cls(verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii"))


@dataclass(frozen=True)
class Tokens:
    """A token response (RFC 6749 section 5.1)."""

    access_token: str
    token_type: str
    expires_in: int
    scope: str
    refresh_token: str | None = None
    id_token: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_response(cls, body: dict[str, Any]) -> Tokens:
        return cls(
            access_token=body["access_token"],
            token_type=body["token_type"],
            expires_in=int(body.get("expires_in", 0)),
            scope=body.get("scope", ""),
            refresh_token=body.get("refresh_token"),
            id_token=body.get("id_token"),
            raw=body,
        )


def authorization_url(
    metadata: dict[str, Any],
    *,
    client_id: str,
    scopes: Sequence[str],
    resource: str | None,
    code_challenge: str | None,
    state: str,
    redirect_uri: str = REDIRECT_URI,
) -> str:
    """The authorization request (``code_challenge=None`` leaves PKCE out, for tests)."""
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": " ".join(scopes),
        "state": state,
    }
    if code_challenge is not None:
        params |= {"code_challenge": code_challenge, "code_challenge_method": "S256"}
    if resource is not None:
        params["resource"] = resource
    return f"{metadata['authorization_endpoint']}?{urlencode(params)}"


async def sign_in(
    http: httpx.AsyncClient,
    url: str,
    *,
    user: str,
    password: str,
    redirect_uri: str = REDIRECT_URI,
) -> str:
    """Open the authorization request ``url`` as a browser would, sign in as ``user`` and consent
    on the local server's pages; return the redirect to ``redirect_uri`` (with the code).
    ``http`` keeps the cookies, so a second request in the same session skips the sign-in."""
    response = await http.get(url)
    for _ in range(_MAX_REDIRECTS):
        if response.is_redirect:
            location = urljoin(str(response.url), response.headers["location"])
            if location.split("?")[0] == redirect_uri.split("?")[0]:
                return location
            response = await http.get(location)
            continue
        if response.status_code == 401:
            raise OAuthFlowError(f"sign-in refused: {_alert(response.text)}")
        action = _FORM_ACTION.search(response.text) if response.status_code == 200 else None
        if action is None:
            raise OAuthFlowError(
                f"authorization refused ({response.status_code}): {_alert(response.text)}"
            )
        form = {"user": user, "password": password} if action[1].endswith("/login") else {}
        response = await http.post(urljoin(str(response.url), html.unescape(action[1])), data=form)
    raise OAuthFlowError(f"more than {_MAX_REDIRECTS} redirects from {url}")


def authorization_code(callback: str, *, state: str, issuer: str) -> str:
    """The code of an authorization response, checked against ``state`` and ``issuer``
    (RFC 9207: a response from another server is refused)."""
    params = {key: values[0] for key, values in parse_qs(urlsplit(callback).query).items()}
    if "error" in params:
        reason = params.get("error_description", "")
        raise OAuthFlowError(f"authorization refused: {params['error']}: {reason}")
    if params.get("state") != state:
        raise OAuthFlowError("authorization response with another state")
    if params.get("iss", issuer) != issuer:
        raise OAuthFlowError(f"authorization response from {params['iss']}, not {issuer}")
    return params["code"]


async def token_request(
    http: httpx.AsyncClient,
    metadata: dict[str, Any],
    form: dict[str, str],
    client_secret: str | None = None,
) -> Tokens:
    """POST ``form`` to the token endpoint (a public client names itself in ``client_id``)."""
    endpoint = metadata["token_endpoint"]
    if client_secret is None:
        response = await http.post(endpoint, data=form)
    else:
        response = await http.post(endpoint, data=form, auth=(form["client_id"], client_secret))
    body = _json(response)
    if response.status_code != 200:
        raise OAuthFlowError(
            f"token request refused: {body.get('error')}: {body.get('error_description', '')}"
        )
    return Tokens.from_response(body)


async def exchange_code(
    http: httpx.AsyncClient,
    metadata: dict[str, Any],
    *,
    client_id: str,
    code: str,
    code_verifier: str | None,
    resource: str | None,
    redirect_uri: str = REDIRECT_URI,
    client_secret: str | None = None,
) -> Tokens:
    """Exchange an authorization code (``code_verifier=None`` leaves PKCE out, for tests)."""
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "client_id": client_id,
    }
    if code_verifier is not None:
        form["code_verifier"] = code_verifier
    if resource is not None:
        form["resource"] = resource
    return await token_request(http, metadata, form, client_secret)


async def refresh(
    http: httpx.AsyncClient,
    metadata: dict[str, Any],
    *,
    client_id: str,
    refresh_token: str,
    resource: str | None = None,
    client_secret: str | None = None,
) -> Tokens:
    """A new access token (and, for a public client, a new refresh token) from a refresh token."""
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id}
    if resource is not None:
        form["resource"] = resource
    return await token_request(http, metadata, form, client_secret)


async def register_client(
    http: httpx.AsyncClient, metadata: dict[str, Any], client_metadata: dict[str, Any]
) -> dict[str, Any]:
    """Register a client (RFC 7591) and return what the server registered, ``client_id``
    included."""
    response = await http.post(metadata["registration_endpoint"], json=client_metadata)
    body = _json(response)
    if response.status_code != 201:
        raise OAuthFlowError(
            f"registration refused: {body.get('error')}: {body.get('error_description', '')}"
        )
    return body


async def obtain_tokens(
    http: httpx.AsyncClient,
    issuer: str,
    *,
    user: str,
    password: str,
    client_id: str,
    scopes: Sequence[str],
    resource: str | None,
    redirect_uri: str = REDIRECT_URI,
    client_secret: str | None = None,
) -> Tokens:
    """The whole authorization-code flow with PKCE, signed in as ``user``."""
    metadata = await discovery(http, issuer)
    pkce, state = Pkce.new(), secrets.token_urlsafe(16)
    url = authorization_url(
        metadata,
        client_id=client_id,
        scopes=scopes,
        resource=resource,
        code_challenge=pkce.challenge,
        state=state,
        redirect_uri=redirect_uri,
    )
    callback = await sign_in(http, url, user=user, password=password, redirect_uri=redirect_uri)
    return await exchange_code(
        http,
        metadata,
        client_id=client_id,
        code=authorization_code(callback, state=state, issuer=issuer),
        code_verifier=pkce.verifier,
        resource=resource,
        redirect_uri=redirect_uri,
        client_secret=client_secret,
    )


def _alert(page: str) -> str:
    match = _ALERT.search(page)
    text = match[1] if match else re.sub(r"<[^>]+>", " ", page)
    return " ".join(html.unescape(text).split())[:300]


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        raise OAuthFlowError(
            f"{response.request.url} answered {response.status_code} without JSON"
        ) from None
    if not isinstance(body, dict):
        raise OAuthFlowError(f"{response.request.url} answered JSON that is not an object")
    return body
