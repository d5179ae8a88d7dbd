"""`nemo dev oauth-token`: a person's access token from the local authorization server.

Runs the real authorization-code flow with PKCE against the server `nemo dev up` started, as a
browser would but headless: the authorization request, the development sign-in and consent
forms, the redirect with the code, the token exchange. The issuer, the client and the resource
default to what ``STATE_DIR/dev.env`` names. Prints the access token on its last line, so a
script can take it with ``tail -n 1``.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from pathlib import Path

import httpx

from nemo_devtools.oauth_client import OAuthFlowError, Tokens, obtain_tokens
from nemo_devtools.oauth_server import DEV_PASSWORD, TOOL_SCOPES
from nemo_ops.local_oauth import CLIENT_ID_VARIABLE, ISSUER_VARIABLE

HELP = "a person's OAuth access token from the local authorization server (last line)"
TIMEOUT_SECONDS = 30.0


class OAuthTokenError(Exception):
    """The token cannot be had as asked; the message says why."""


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Sign USER in at the local authorization server (authorization code with PKCE, the "
        "development sign-in and consent pages, headless) and print the access token on the "
        "last line. Issuer, client and resource default to STATE_DIR/dev.env."
    )
    parser.add_argument("--user", required=True, help="the seeded user id, e.g. U-2041-P1")
    parser.add_argument(
        "--client", help=f"the OAuth client id (default: ${CLIENT_ID_VARIABLE} of dev.env)"
    )
    parser.add_argument(
        "--scope",
        action="append",
        dest="scopes",
        metavar="SCOPE",
        help=f"a scope to ask for, repeatable (default: {' '.join(TOOL_SCOPES)})",
    )
    parser.add_argument(
        "--resource", help="the resource the token is for (default: $NEMO_MCP_URL of dev.env)"
    )
    parser.add_argument("--issuer", help=f"the issuer (default: ${ISSUER_VARIABLE} of dev.env)")
    parser.add_argument(
        "--state-dir", type=Path, default=Path(".nemo"), help="where dev.env is (default: .nemo)"
    )


def _dev_env(state_dir: Path) -> dict[str, str]:
    path = state_dir / "dev.env"
    if not path.exists():
        return {}
    pairs = (line.partition("=") for line in path.read_text("utf-8").splitlines())
    return {key: shlex.split(value)[0] if value else "" for key, _, value in pairs if key}


def _setting(given: str | None, env: dict[str, str], variable: str, flag: str) -> str:
    value = given or env.get(variable)
    if not value:
        raise OAuthTokenError(
            f"no {flag}: pass it, or start the stack (`make run`) so dev.env names {variable}"
        )
    return value


async def _obtain(args: argparse.Namespace) -> Tokens:
    env = _dev_env(args.state_dir)
    issuer = _setting(args.issuer, env, ISSUER_VARIABLE, "--issuer")
    client = _setting(args.client, env, CLIENT_ID_VARIABLE, "--client")
    resource = _setting(args.resource, env, "NEMO_MCP_URL", "--resource")
    async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS, trust_env=False) as http:
        try:
            return await obtain_tokens(
                http,
                issuer,
                user=args.user,
                password=DEV_PASSWORD,
                client_id=client,
                scopes=args.scopes or TOOL_SCOPES,
                resource=resource,
            )
        except httpx.HTTPError as error:
            raise OAuthTokenError(
                f"the authorization server at {issuer} does not answer ({error!r}):"
                " is the stack running (`make run`)?"
            ) from error


def run_command(args: argparse.Namespace) -> int:
    try:
        tokens = asyncio.run(_obtain(args))
    except OAuthFlowError as error:
        raise OAuthTokenError(str(error)) from error
    print(f"scope: {tokens.scope}; expires in {tokens.expires_in} s", file=sys.stderr)
    print(tokens.access_token)
    return 0
