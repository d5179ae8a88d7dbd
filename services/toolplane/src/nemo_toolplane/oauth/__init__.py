"""The edge as an OAuth 2.1 resource server: access tokens from the platform's authorization
server verified here, failing closed (JWTs against the issuer's keys, opaque tokens by
introspection)."""
