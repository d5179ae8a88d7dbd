"""A tool plane whose edge accepts OAuth access tokens from the session's local authorization
server (``oauth_server``), beside agent tokens; and tokens signed with that server's own key, to
forge what a real server would never issue."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from joserfc.jwk import KeySet, RSAKey
from joserfc.jws import JWSRegistry

from nemo_testing.oauth import OAuthServer
from nemo_testing.ports import free_port
from services.toolplane.tests.conftest import RunningToolPlane, StartToolPlane


@pytest.fixture(scope="session")
async def oauth_plane(
    start_toolplane: StartToolPlane, oauth_server: OAuthServer
) -> RunningToolPlane:
    """A tool plane trusting the session's authorization server for its edge's URL."""
    port = free_port()
    running = await start_toolplane(
        mcp_port=port,
        oauth_issuer=oauth_server.issuer,
        oauth_resource=f"http://127.0.0.1:{port}/mcp",
    )
    running.shared = True
    return running


def b64(value: bytes) -> str:
    return base64.urlsafe_b64encode(value).rstrip(b"=").decode()


def segment(value: dict[str, Any]) -> str:
    return b64(json.dumps(value).encode())


class Forger:
    """Signs tokens with the authorization server's own private key: every check but the
    signature's must then refuse what is wrong."""

    def __init__(self, server: OAuthServer, resource: str) -> None:
        stored = json.loads((server.server.state_dir / "jwks.json").read_text("utf-8"))
        self.keys = KeySet.import_key_set(stored)
        [key] = list(self.keys)
        assert isinstance(key, RSAKey)
        self.key = key
        self.issuer = server.issuer
        self.resource = resource

    def claims(self, **changes: Any) -> dict[str, Any]:
        """Claims of a token the server could have issued to the development client for
        U-2041-P1, with ``changes`` (a value of None drops the claim)."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.resource,
            "sub": "U-2041-P1",
            "client_id": "nemo-dev-learning-agent",
            "scope": "learner.read docs.read knowledge.read",
            "jti": f"forged-{now}-{id(changes)}",
            "iat": now,
            "exp": now + 600,
        }
        claims.update(changes)
        return {key: value for key, value in claims.items() if value is not None}

    def sign(self, claims: dict[str, Any], **header: Any) -> str:
        """``claims`` signed (RS256) with the server's key, under its header with ``header``'s
        changes (a value of None drops the parameter; any JSON value may stand in one, which a
        JOSE library would refuse to write)."""
        full = {"alg": "RS256", "kid": self.key.kid, "typ": "at+jwt", **header}
        kept = {name: value for name, value in full.items() if value is not None}
        signing_input = f"{segment(kept)}.{segment(claims)}"
        signature = JWSRegistry.algorithms["RS256"].sign(signing_input.encode(), self.key)
        return f"{signing_input}.{b64(signature)}"


@pytest.fixture(scope="session")
def forger(oauth_server: OAuthServer, oauth_plane: RunningToolPlane) -> Forger:
    return Forger(oauth_server, oauth_plane.settings.oauth_resource or "")
