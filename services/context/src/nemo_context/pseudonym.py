"""The learner pseudonym: the only name a bundle, a snapshot key or a log line gives a learner.

``learner_ref = "nemo_" + first 24 hex digits of HMAC-SHA256(key, learner id)``. The same key
gives the same ref across restarts and replicas, so runs about one child can be joined; without
the key, refs cannot be turned back into ids by hashing candidate ids (an unkeyed hash can).

24 hex digits are 96 bits: among 10 million learners the chance that any two share a ref is about
6 in 10^16 (48 bits, the former 12 digits, gave about 16%). Refs of 12 digits written before the
change stay readable where they were stored (snapshot keys and digests accept both widths); they
are not the new refs of the same learners.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from typing import Final

from nemo_context.settings import ContextSettings

logger = logging.getLogger(__name__)

REF_PREFIX: Final = "nemo_"
REF_HEX_DIGITS: Final = 24


class Pseudonymizer:
    """Turns learner ids into refs under one secret key."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        if not key:
            raise ValueError("the pseudonym key must not be empty")
        self._key = key

    def learner_ref(self, learner_id: str) -> str:
        """``nemo_`` + 24 hex digits of HMAC-SHA256(key, learner id)."""
        digest = hmac.new(self._key, learner_id.encode("utf-8"), hashlib.sha256).hexdigest()
        return REF_PREFIX + digest[:REF_HEX_DIGITS]


def pseudonymizer_from_settings(settings: ContextSettings) -> Pseudonymizer:
    """The configured key; in development without one, a random key for this process only.

    Settings already refuse a missing key outside development, so the random key can only ever
    serve a developer's machine, where unstable refs are an inconvenience and not a leak.
    """
    if settings.pseudonym_key is not None:
        return Pseudonymizer(settings.pseudonym_key.get_secret_value().encode("utf-8"))
    logger.warning(
        "no pseudonym key configured: using a random key for this process, so learner refs "
        "change on every restart (set NEMO_CONTEXT_PSEUDONYM_KEY_FILE to keep them stable)"
    )
    return Pseudonymizer(secrets.token_bytes(32))
