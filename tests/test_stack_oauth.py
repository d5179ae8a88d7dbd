"""A stack with its own authorization server (``start_stack(..., oauth=True)``): a seeded
person's token is for that stack's edge, and the server stops with the stack."""

from __future__ import annotations

from joserfc import jwt
from joserfc.jwk import KeySet

from tests.stack import StackFactory


async def test_a_stacks_tokens_are_for_its_edge_and_its_server_stops_with_it(
    start_stack: StackFactory,
) -> None:
    stack = await start_stack(oauth=True)
    assert stack.oauth is not None
    tokens = await stack.oauth_tokens("U-2041-M1", scopes=["learner.read", "docs.read"])
    keys = KeySet.import_key_set(await stack.oauth.jwks())  # type: ignore[arg-type]
    claims = jwt.decode(tokens.access_token, keys, algorithms=["RS256"]).claims
    assert (claims["aud"], claims["sub"], claims["iss"]) == (
        stack.mcp_url,
        "U-2041-M1",
        stack.oauth.issuer,
    )
    assert set(claims["scope"].split()) == {"learner.read", "docs.read"}
    process = stack.oauth.server.process
    await stack.stop()
    assert process.returncode == 0
