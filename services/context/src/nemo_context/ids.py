"""The shape of the keys requests name learners and users by.

Checked before a key reaches a query, so a NUL or a control character is a precise error rather
than a database failure, and a comma can never bind two learners (the row-level security setting
is a comma-separated list).
"""

from __future__ import annotations

import re
from typing import Final

import grpc

from nemo_core.errors import ServiceError

INVALID_LEARNER_ID: Final = "INVALID_LEARNER_ID"

_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_KEY_RULE: Final = "1 to 128 letters, digits or . _ : - (starting with a letter or digit)"


def is_key(value: str) -> bool:
    """Whether ``value`` has the shape of a learner or user key."""
    # fullmatch: ``$`` would also accept a trailing newline.
    return _KEY.fullmatch(value) is not None


def check_learner_id(learner_id: str) -> None:
    """INVALID_ARGUMENT / ``INVALID_LEARNER_ID`` unless ``learner_id`` looks like a learner key."""
    if not is_key(learner_id):
        raise ServiceError(
            grpc.StatusCode.INVALID_ARGUMENT, INVALID_LEARNER_ID, f"learner_id must be {_KEY_RULE}"
        )
