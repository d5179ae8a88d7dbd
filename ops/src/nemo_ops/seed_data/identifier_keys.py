"""The development identifier key's digest, so a context service on a developer's machine (or in
the tests) fingerprints the circle's identifiers without a key of its own.

Only demo databases are seeded; a production database registers the digest of its own secret key
(``docs/operations/identifier-key.md``).
"""

from __future__ import annotations

import hashlib

from nemo_context.settings import DEVELOPMENT_IDENTIFIER_KEY
from nemo_ops.seed_data.base import TableData

TABLES: tuple[TableData, ...] = (
    TableData(
        "learning.identifier_keys",
        ("digest",),
        ({"digest": hashlib.sha256(DEVELOPMENT_IDENTIFIER_KEY.encode("utf-8")).digest()},),
    ),
)
