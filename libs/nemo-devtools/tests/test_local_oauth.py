"""The local authorization server, as the real oidc-provider process, driven over HTTP: what a
resource server and an MCP host rely on (discovery, keys, the code flow with PKCE, resource
indicators, registration, refresh, sign-in) and the refusals a plausible misconfiguration would
lose."""

from __future__ import annotations

import re
import secrets
import string
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from joserfc import jwt
from joserfc.errors import BadSignatureError
from joserfc.jwk import KeySet

from nemo_devtools.oauth_client import (
    REDIRECT_URI,
    OAuthFlowError,
    Pkce,
    Tokens,
    authorization_code,
    authorization_url,
    exchange_code,
    refresh,
    register_client,
    sign_in,
)
from nemo_devtools.oauth_server import SCOPES, TOOL_SCOPES, Account
from nemo_testing.oauth import OAuthServer, running_authorization_server

FLOW_SETTINGS = settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
#: What the server says an access token lives.
ACCESS_TOKEN_SECONDS = 3600

_scopes = st.lists(st.sampled_from(TOOL_SCOPES), min_size=1, unique=True)
_segments = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=8)
_paths = st.lists(_segments, max_size=3)
_loopback_resources = st.builds(
    lambda host, port, path: f"http://{host}:{port}/{'/'.join(path)}",
    st.sampled_from(["127.0.0.1", "localhost"]),
    st.integers(1024, 65535),
    _paths,
)


def _verified(token: str, jwks: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims of a JWT whose RS256 signature verifies against ``jwks``."""
    decoded = jwt.decode(token, KeySet.import_key_set(jwks), algorithms=["RS256"])  # type: ignore[arg-type]
    return dict(decoded.header), dict(decoded.claims)


def _seeded_user(oauth_accounts: list[Account], index: int) -> str:
    return oauth_accounts[index % len(oauth_accounts)].id


class Flow:
    """One authorization request's state, for tests that take the flow apart."""

    def __init__(self, server: OAuthServer, metadata: dict[str, Any]) -> None:
        self.server, self.metadata = server, metadata
        self.pkce, self.state = Pkce.new(), secrets.token_urlsafe(8)

    def url(
        self,
        *,
        resource: str | None,
        scopes: Sequence[str] = TOOL_SCOPES,
        client_id: str | None = None,
        pkce: bool = True,
    ) -> str:
        return authorization_url(
            self.metadata,
            client_id=client_id or self.server.client_id,
            scopes=scopes,
            resource=resource,
            code_challenge=self.pkce.challenge if pkce else None,
            state=self.state,
        )

    async def code(self, http: httpx.AsyncClient, url: str, user: str = "U-2041-P1") -> str:
        callback = await sign_in(http, url, user=user, password=self.server.password)
        return authorization_code(callback, state=self.state, issuer=self.server.issuer)


@pytest.fixture
async def http() -> Any:
    async with httpx.AsyncClient(timeout=10, trust_env=False) as client:
        yield client


async def test_discovery_names_the_issuer_and_what_hosts_need(oauth_server: OAuthServer) -> None:
    metadata = await oauth_server.metadata()
    issuer = oauth_server.issuer
    assert metadata["issuer"] == issuer
    for endpoint in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        assert metadata[endpoint].startswith(f"{issuer}/"), endpoint
    assert metadata["registration_endpoint"].startswith(f"{issuer}/")
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["response_types_supported"] == ["code"]
    assert sorted(metadata["scopes_supported"]) == sorted(SCOPES)
    assert "refresh_token" in metadata["grant_types_supported"]
    assert metadata["client_id_metadata_document_supported"] is True
    assert metadata["authorization_response_iss_parameter_supported"] is True


async def test_the_key_set_is_public_keys_only(oauth_server: OAuthServer) -> None:
    keys = (await oauth_server.jwks())["keys"]
    assert keys
    for key in keys:
        assert key["kty"] == "RSA"
        assert key["kid"]
        # A private member published would let anyone sign tokens.
        assert not {"d", "p", "q", "dp", "dq", "qi"} & set(key)


@FLOW_SETTINGS
@given(index=st.integers(0, 100), scopes=_scopes, resource=_loopback_resources)
async def test_a_signed_in_person_gets_a_signed_jwt_for_the_resource_asked(
    oauth_server: OAuthServer,
    oauth_accounts: list[Account],
    index: int,
    scopes: list[str],
    resource: str,
) -> None:
    user = _seeded_user(oauth_accounts, index)
    before = int(time.time())
    tokens = await oauth_server.tokens(user, resource=resource, scopes=scopes)
    header, claims = _verified(tokens.access_token, await oauth_server.jwks())
    assert header["typ"] == "at+jwt"
    assert claims["iss"] == oauth_server.issuer
    assert claims["aud"] == resource
    assert claims["sub"] == user
    assert claims["client_id"] == oauth_server.client_id
    assert set(claims["scope"].split()) == set(scopes)
    assert set(tokens.scope.split()) == set(scopes)
    assert claims["jti"]
    assert before - 5 <= claims["iat"] <= int(time.time()) + 5
    assert claims["exp"] - claims["iat"] == ACCESS_TOKEN_SECONDS == tokens.expires_in


async def test_a_signature_over_other_claims_does_not_verify(oauth_server: OAuthServer) -> None:
    tokens = await oauth_server.tokens("U-2041-P1", resource="http://127.0.0.1:8080/mcp")
    header, payload, signature = tokens.access_token.split(".")
    other = await oauth_server.tokens("U-2041-P2", resource="http://127.0.0.1:8080/mcp")
    forged = ".".join([header, other.access_token.split(".")[1], signature])
    with pytest.raises(BadSignatureError):
        _verified(forged, await oauth_server.jwks())
    assert payload != other.access_token.split(".")[1]


@pytest.mark.parametrize("confidential", [False, True])
async def test_an_authorization_request_without_pkce_is_refused(
    oauth_server: OAuthServer, http: httpx.AsyncClient, confidential: bool
) -> None:
    """Of every client: a confidential one (with a secret) too, which oidc-provider's default
    policy would let through."""
    flow = Flow(oauth_server, await oauth_server.metadata())
    client_id = oauth_server.client_id
    if confidential:
        registered = await register_client(
            http,
            flow.metadata,
            {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "client_secret_basic"},
        )
        assert registered["client_secret"]
        client_id = registered["client_id"]
    url = flow.url(resource="http://127.0.0.1:8080/mcp", client_id=client_id, pkce=False)
    with pytest.raises(OAuthFlowError, match=r"invalid_request: .* requires PKCE"):
        await flow.code(http, url)


@FLOW_SETTINGS
@given(verifier=st.text(string.ascii_letters + string.digits + "-._~", min_size=43, max_size=128))
async def test_a_code_is_exchanged_only_with_its_own_verifier(
    oauth_server: OAuthServer, http: httpx.AsyncClient, verifier: str
) -> None:
    resource = "http://127.0.0.1:8080/mcp"
    flow = Flow(oauth_server, await oauth_server.metadata())
    code = await flow.code(http, flow.url(resource=resource))

    async def exchange(code_verifier: str | None) -> Tokens:
        return await exchange_code(
            http,
            flow.metadata,
            client_id=oauth_server.client_id,
            code=code,
            code_verifier=code_verifier,
            resource=resource,
        )

    for wrong in (verifier, None):
        if wrong == flow.pkce.verifier:
            continue
        with pytest.raises(OAuthFlowError, match=r"invalid_grant|invalid_request"):
            await exchange(wrong)
    tokens = await exchange(flow.pkce.verifier)
    assert tokens.access_token
    # A code is single use.
    with pytest.raises(OAuthFlowError, match="invalid_grant"):
        await exchange(flow.pkce.verifier)


async def test_the_token_is_for_the_resource_asked_and_no_other(
    oauth_server: OAuthServer, http: httpx.AsyncClient
) -> None:
    asked, other = "http://127.0.0.1:8080/mcp", "http://127.0.0.1:9090/mcp"
    flow = Flow(oauth_server, await oauth_server.metadata())
    code = await flow.code(http, flow.url(resource=asked))
    with pytest.raises(OAuthFlowError, match="invalid_target"):
        await exchange_code(
            http,
            flow.metadata,
            client_id=oauth_server.client_id,
            code=code,
            code_verifier=flow.pkce.verifier,
            resource=other,
        )
    tokens = await oauth_server.tokens("U-2041-P1", resource=asked)
    _, claims = _verified(tokens.access_token, await oauth_server.jwks())
    assert claims["aud"] == asked
    assert tokens.refresh_token is not None
    with pytest.raises(OAuthFlowError, match="invalid_target"):
        await refresh(
            http,
            flow.metadata,
            client_id=oauth_server.client_id,
            refresh_token=tokens.refresh_token,
            resource=other,
        )


@pytest.mark.parametrize(
    "resource", ["https://edge.example.org/mcp", "http://10.0.0.8:8080/mcp", "urn:nemo:edge"]
)
async def test_a_resource_off_this_machine_is_not_a_resource_of_the_local_server(
    oauth_server: OAuthServer, http: httpx.AsyncClient, resource: str
) -> None:
    flow = Flow(oauth_server, await oauth_server.metadata())
    with pytest.raises(OAuthFlowError, match="invalid_target"):
        await flow.code(http, flow.url(resource=resource))


async def test_a_refresh_token_gives_a_new_access_token_once(
    oauth_server: OAuthServer, http: httpx.AsyncClient
) -> None:
    resource = "http://127.0.0.1:8080/mcp"
    first = await oauth_server.tokens("U-2041-P2", resource=resource, scopes=["docs.read"])
    assert first.refresh_token is not None
    metadata = await oauth_server.metadata()
    second = await refresh(
        http, metadata, client_id=oauth_server.client_id, refresh_token=first.refresh_token
    )
    jwks = await oauth_server.jwks()
    _, before = _verified(first.access_token, jwks)
    _, after = _verified(second.access_token, jwks)
    assert after["jti"] != before["jti"]
    for claim in ("sub", "aud", "scope", "client_id", "iss"):
        assert after[claim] == before[claim], claim
    # A public client's refresh token rotates: the spent one is refused.
    assert second.refresh_token not in {None, first.refresh_token}
    with pytest.raises(OAuthFlowError, match="invalid_grant"):
        await refresh(
            http, metadata, client_id=oauth_server.client_id, refresh_token=first.refresh_token
        )


async def test_a_registered_client_completes_the_flow(
    oauth_server: OAuthServer, http: httpx.AsyncClient
) -> None:
    metadata = await oauth_server.metadata()
    registered = await register_client(
        http,
        metadata,
        {
            "client_name": "An MCP host",
            "application_type": "native",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        },
    )
    assert registered["client_id"] != oauth_server.client_id
    resource = "http://localhost:8080/mcp"
    tokens = await oauth_server.tokens(
        "U-2041-P3", resource=resource, scopes=["learner.read"], client_id=registered["client_id"]
    )
    _, claims = _verified(tokens.access_token, await oauth_server.jwks())
    assert (claims["client_id"], claims["sub"], claims["aud"]) == (
        registered["client_id"],
        "U-2041-P3",
        resource,
    )


async def test_a_registration_with_an_unusable_redirect_is_refused(
    oauth_server: OAuthServer, http: httpx.AsyncClient
) -> None:
    with pytest.raises(OAuthFlowError, match="registration refused: invalid_redirect_uri"):
        await register_client(
            http,
            await oauth_server.metadata(),
            {"redirect_uris": ["not a url"], "token_endpoint_auth_method": "none"},
        )


async def test_a_hostile_client_name_is_shown_as_text(
    oauth_server: OAuthServer, http: httpx.AsyncClient
) -> None:
    metadata = await oauth_server.metadata()
    name = '<script>alert("x")</script>'
    registered = await register_client(
        http,
        metadata,
        {
            "client_name": name,
            "application_type": "native",
            "redirect_uris": [REDIRECT_URI],
            "token_endpoint_auth_method": "none",
        },
    )
    flow = Flow(oauth_server, metadata)
    url = flow.url(resource="http://127.0.0.1:8080/mcp", client_id=registered["client_id"])
    page = await http.get(url, follow_redirects=True)
    assert page.status_code == 200
    assert name not in page.text
    assert "&lt;script&gt;" in page.text


_unknown_users = st.text(string.ascii_uppercase + string.digits + "-", min_size=1, max_size=12)


@FLOW_SETTINGS
@given(user=_unknown_users)
async def test_only_the_given_accounts_sign_in(
    oauth_server: OAuthServer, oauth_accounts: list[Account], user: str
) -> None:
    if user in {account.id for account in oauth_accounts}:
        return
    with pytest.raises(OAuthFlowError, match=re.escape(f"sign-in refused: unknown user: {user}")):
        await oauth_server.tokens(user, resource="http://127.0.0.1:8080/mcp")


@FLOW_SETTINGS
@given(password=st.text(min_size=0, max_size=40))
async def test_a_seeded_user_needs_the_development_password(
    oauth_server: OAuthServer, http: httpx.AsyncClient, password: str
) -> None:
    if password == oauth_server.password:
        return
    flow = Flow(oauth_server, await oauth_server.metadata())
    with pytest.raises(OAuthFlowError, match="sign-in refused: wrong development password"):
        await sign_in(
            http,
            flow.url(resource="http://127.0.0.1:8080/mcp"),
            user="U-2041-P1",
            password=password,
        )
    http.cookies.clear()


async def test_keys_clients_and_refresh_tokens_survive_a_restart(
    tmp_path: Path, oauth_accounts: list[Account]
) -> None:
    state = tmp_path / "oauth"
    resource = "http://127.0.0.1:8080/mcp"
    async with running_authorization_server(state, oauth_accounts) as server:
        tokens = await server.tokens("U-2041-P1", resource=resource)
        keys_before = await server.jwks()
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            registered = await register_client(
                http,
                await server.metadata(),
                {
                    "redirect_uris": [REDIRECT_URI],
                    "application_type": "native",
                    "token_endpoint_auth_method": "none",
                },
            )
    async with running_authorization_server(
        state, oauth_accounts, port=int(server.issuer.rsplit(":", 1)[1])
    ) as restarted:
        assert await restarted.jwks() == keys_before
        # The token from before the restart still verifies.
        _, claims = _verified(tokens.access_token, await restarted.jwks())
        assert claims["sub"] == "U-2041-P1"
        assert tokens.refresh_token is not None
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            renewed = await refresh(
                http,
                await restarted.metadata(),
                client_id=restarted.client_id,
                refresh_token=tokens.refresh_token,
            )
        assert renewed.access_token
        again = await restarted.tokens(
            "U-2041-P2", resource=resource, client_id=registered["client_id"]
        )
        assert again.access_token
