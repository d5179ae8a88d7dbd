"""What an audit row records of an OAuth access token: its facts as a :class:`Credential`."""

from __future__ import annotations

from nemo_core.oauth.claims import TokenFacts
from nemo_toolplane.principal import Credential, CredentialKind


def oauth_credential(facts: TokenFacts) -> Credential:
    """The credential of an OAuth access token; only the kind when nothing vouches for its
    claims."""
    return Credential(
        CredentialKind.OAUTH,
        token_id=facts.jti,
        client_id=facts.client_id,
        subject=facts.subject,
        scopes=facts.scopes,
    )
