"""OAuth access tokens from the platform's authorization server, verified by the service that
receives them, failing closed: JWTs against the issuer's published keys, opaque tokens by
introspection. The tool plane's edge verifies agents' tokens with it, and the tool plane and
the context service verify the tokens people sign in to the console with."""
