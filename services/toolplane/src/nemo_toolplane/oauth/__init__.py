"""The edge as an OAuth 2.1 resource server: which agent an access token acts as, and what its
audit row records of it (the verification itself is :mod:`nemo_core.oauth`)."""
