"""The local authorization server as a test peer: the real oidc-provider process that `make run`
starts (``local-oauth/``), on a free loopback port, and a person's tokens from it through the
headless sign-in (:mod:`nemo_devtools.oauth_client`).

The ``oauth_server`` fixture (``nemo_testing.plugin``) shares one for the session. It accepts
any resource on loopback, so every stack's edge (``stack.mcp_url``) is a resource of it::

    tokens = await oauth_server.tokens("U-2041-P1", resource=stack.mcp_url,
                                       scopes=["learner.read"])
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from nemo_devtools.oauth_client import REDIRECT_URI, Tokens, obtain_tokens
from nemo_devtools.oauth_server import (
    TOOL_SCOPES,
    Account,
    AuthorizationServer,
    AuthorizationServerUnavailable,
    discovery,
    start_authorization_server,
)
from nemo_testing.ports import free_port

_START_ATTEMPTS = 3


@dataclass
class OAuthServer:
    """A running local authorization server and the calls tests make of it."""

    server: AuthorizationServer

    @property
    def issuer(self) -> str:
        return self.server.issuer

    @property
    def client_id(self) -> str:
        """The development client of the learning agent (public, PKCE, loopback redirect)."""
        return self.server.client_id

    @property
    def password(self) -> str:
        """The development password every account signs in with."""
        return self.server.password

    async def metadata(self) -> dict[str, Any]:
        """Its discovery document."""
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            return await discovery(http, self.issuer)

    async def jwks(self) -> dict[str, Any]:
        """Its public signing keys."""
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            response = await http.get((await discovery(http, self.issuer))["jwks_uri"])
            response.raise_for_status()
            keys: dict[str, Any] = response.json()
        return keys

    async def tokens(
        self,
        user: str,
        *,
        resource: str | None,
        scopes: Sequence[str] = TOOL_SCOPES,
        client_id: str | None = None,
        redirect_uri: str = REDIRECT_URI,
    ) -> Tokens:
        """Tokens of ``client_id`` (default: the development client) for ``user``, who signs
        in and consents on the server's pages, through a fresh browser session."""
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            return await obtain_tokens(
                http,
                self.issuer,
                user=user,
                password=self.password,
                client_id=client_id or self.client_id,
                scopes=scopes,
                resource=resource,
                redirect_uri=redirect_uri,
            )


@asynccontextmanager
async def running_authorization_server(
    state_dir: Path,
    accounts: Iterable[Account],
    *,
    resources: Iterable[str] = (),
    opaque_resources: Iterable[str] = (),
    clients: Iterable[Mapping[str, Any]] = (),
    port: int | None = None,
) -> AsyncIterator[OAuthServer]:
    """A local authorization server on ``port`` (default: a free one), stopped at the end of
    the block; a server started again on its state directory and port is the same issuer.
    ``opaque_resources`` get opaque access tokens, for resource servers that introspect;
    ``clients`` are registered beside the development client (the console)."""
    accounts, resources, clients = list(accounts), list(resources), list(clients)
    opaque_resources = list(opaque_resources)
    attempts = 1 if port is not None else _START_ATTEMPTS
    for attempt in range(1, attempts + 1):
        # A port free a moment ago can be taken before the server binds it: then it exits at
        # start, and it gets another port.
        try:
            server = await start_authorization_server(
                port or free_port(),
                state_dir,
                accounts,
                log_path=state_dir.with_name(f"{state_dir.name}.log"),
                resources=resources,
                opaque_resources=opaque_resources,
                clients=clients,
            )
        except AuthorizationServerUnavailable:
            if attempt == attempts:
                raise
            continue
        try:
            yield OAuthServer(server)
        finally:
            await server.stop()
        return
