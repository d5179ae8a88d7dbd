"""What the edge tells a client whose credential it refused, as RFC 6750 and RFC 9728 say: a
``WWW-Authenticate: Bearer`` challenge naming where the resource's metadata is (so an MCP host
finds the authorization server and signs the person in), the scopes to ask for, and, for a
token that came, why it was refused (``invalid_token``) or which scope it lacks
(``insufficient_scope``)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from nemo_core.oauth.config import OAuthConfig

REALM = "nemo-toolplane"
# RFC 6750 section 3: error_description and scope values are limited to these characters.
_UNSAFE = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")


def _quoted(value: str) -> str:
    return '"' + _UNSAFE.sub("?", value) + '"'


def bearer_challenge(
    oauth: OAuthConfig | None,
    *,
    error: str | None = None,
    description: str | None = None,
    scopes: Iterable[str] | None = None,
) -> str:
    """A ``Bearer`` challenge; with OAuth set up it names the resource metadata and the scopes
    (all the tools' scopes unless ``scopes`` names the missing ones)."""
    params = [f"realm={_quoted(REALM)}"]
    if oauth is not None:
        params.append(f"resource_metadata={_quoted(oauth.metadata_url)}")
        wanted = list(scopes) if scopes is not None else list(oauth.scopes)
        params.append(f"scope={_quoted(' '.join(wanted))}")
    if error is not None:
        params.append(f"error={_quoted(error)}")
    if description is not None:
        params.append(f"error_description={_quoted(description)}")
    return "Bearer " + ", ".join(params)
