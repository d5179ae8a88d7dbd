"""Opaque access tokens, for providers that issue no JWTs: the edge asks the issuer (RFC 7662) and
checks the answer as it checks a JWT's claims. The local authorization server issues opaque
tokens for this test's edge and answers introspection for a client registered as the edge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from nemo_core.oauth.signed import looks_like_jwt
from nemo_devtools.oauth_client import register_client
from nemo_ops.local_oauth import seeded_accounts
from nemo_testing.oauth import running_authorization_server
from nemo_testing.ports import free_port
from services.toolplane.tests.conftest import StartToolPlane
from services.toolplane.tests.mcp_http import modern_call, post


async def test_an_opaque_token_is_introspected_and_refused_once_revoked(
    start_toolplane: StartToolPlane, tmp_path: Path, audit_rows: Any
) -> None:
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    async with running_authorization_server(
        tmp_path / "state", seeded_accounts(), opaque_resources=[resource]
    ) as server:
        metadata = await server.metadata()
        async with httpx.AsyncClient(timeout=10) as http:
            edge = await register_client(
                http,
                metadata,
                {
                    "client_name": "the edge, introspecting",
                    "redirect_uris": ["http://127.0.0.1/unused"],
                    "application_type": "native",
                    "token_endpoint_auth_method": "client_secret_basic",
                },
            )
        plane = await start_toolplane(
            mcp_port=port,
            oauth_issuer=server.issuer,
            oauth_resource=resource,
            oauth_introspection_client_id=edge["client_id"],
            oauth_introspection_client_secret=edge["client_secret"],
            oauth_introspection_cache_seconds=0,
        )
        tokens = await server.tokens("U-2041-P1", resource=resource, scopes=["learner.read"])
        assert not looks_like_jwt(tokens.access_token)

        async def profile(learner: str, request_id: str) -> httpx.Response:
            return await post(
                plane.mcp_url,
                modern_call("learner.get_profile", {"learner_id": learner}),
                token=tokens.access_token,
                headers={"X-Request-Id": request_id},
            )

        own = await profile("L-2041-1", "REQ-introspect-own")
        assert own.json()["result"]["structuredContent"]["profile"]["grade"] == 8
        other = (await profile("L-2041-2", "REQ-introspect-other")).json()["result"]
        assert other["_meta"]["dev.nemo/error"]["error"]["code"] == "AUTHORIZATION_ERROR"
        [row] = await audit_rows(request_id="REQ-introspect-own", plane=plane)
        assert (row["credential_kind"], row["client_id"], row["user_id"]) == (
            "oauth",
            server.client_id,
            "U-2041-P1",
        )
        async with httpx.AsyncClient(timeout=10) as http:
            revoked = await http.post(
                metadata["revocation_endpoint"],
                data={"token": tokens.access_token, "client_id": server.client_id},
            )
        assert revoked.status_code == 200
        assert (await profile("L-2041-1", "REQ-introspect-revoked")).status_code == 401
        [row] = await audit_rows(request_id="REQ-introspect-revoked", plane=plane)
        assert (row["agent_id"], row["error_code"]) == (None, "AUTHENTICATION_ERROR")
