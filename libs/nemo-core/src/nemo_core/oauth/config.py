"""What the resource server trusts and checks: one issuer, this edge's resource URL, the
algorithms, the leeway, and where in a token the person and the client are (the claim mapping)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

#: Where RFC 9728 puts the protected resource metadata, before the resource's path.
METADATA_PATH = "/.well-known/oauth-protected-resource"
#: Asymmetric signature algorithms only: with a symmetric one (HS256) the key that verifies
#: also signs, and it would be the issuer's public key, known to everyone.
ASYMMETRIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


@dataclass(frozen=True)
class IntrospectionConfig:
    """RFC 7662 introspection of opaque tokens: the endpoint (None: from the issuer's metadata)
    and this resource server's client credentials there."""

    client_id: str
    client_secret: str
    endpoint: str | None = None
    #: Longest an answer is reused (never past the token's expiry).
    cache_seconds: float = 30.0


@dataclass(frozen=True)
class OAuthConfig:
    """The resource server's settings (``NEMO_TOOLPLANE_OAUTH_*``)."""

    issuer: str
    #: This edge's URL as tokens name it in ``aud`` (RFC 8707), e.g. https://edge.example.org/mcp.
    resource: str
    #: The scopes the tools ask for, advertised in the metadata and the 401 challenge.
    scopes: tuple[str, ...]
    algorithms: tuple[str, ...] = ("RS256", "PS256", "ES256", "EdDSA")
    leeway_seconds: float = 30.0
    #: Also accept JWTs typed generically (``typ`` ``JWT`` or none), not as access tokens.
    accept_untyped: bool = False
    #: The claim naming the platform user the agent acts for.
    user_claim: str = "sub"
    #: The claim naming the OAuth client.
    client_claim: str = "client_id"
    #: None: from the issuer's metadata (RFC 8414 or OpenID discovery).
    jwks_uri: str | None = None
    #: Shortest time between two fetches of the keys that a token with an unknown key id causes.
    jwks_refresh_seconds: float = 30.0
    #: Longest the keys are used before they are fetched again.
    jwks_max_age_seconds: float = 3600.0
    http_timeout_seconds: float = 5.0
    introspection: IntrospectionConfig | None = None

    def __post_init__(self) -> None:
        weak = set(self.algorithms) - ASYMMETRIC_ALGORITHMS
        if weak or not self.algorithms:
            raise ValueError(
                f"OAuth algorithms must be asymmetric ({', '.join(sorted(ASYMMETRIC_ALGORITHMS))})"
                f"; not {sorted(weak) or 'none'}"
            )
        for name, url in (("issuer", self.issuer), ("resource", self.resource)):
            parts = urlsplit(url)
            if parts.scheme not in ("https", "http") or not parts.netloc or parts.fragment:
                raise ValueError(f"OAuth {name} must be an absolute http(s) URL: {url!r}")

    @property
    def metadata_url(self) -> str:
        """Where this resource's metadata is (RFC 9728 section 3.1: the well-known path goes
        between the host and the resource's path)."""
        parts = urlsplit(self.resource)
        path = METADATA_PATH + parts.path.rstrip("/")
        return urlunsplit((parts.scheme, parts.netloc, path, "", ""))

    @property
    def metadata_path(self) -> str:
        """The path of :attr:`metadata_url` on this edge."""
        return urlsplit(self.metadata_url).path
