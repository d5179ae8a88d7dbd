"""The format of the keys that name learners, families and users, and why it is what it is.

Keys are read for binding and authorization but never leave the service: the identifier gate
looks for the keys of the learner (and of the people linked to it) in every string it returns,
however they are spelled. It can do that without false alarms only when a key cannot also be
ordinary text. A key is therefore

- 8 to 128 characters: ASCII letters, digits and ``. _ : -``, starting with a letter or a digit;
- with at least one letter and at least one digit.

A shorter or plainer key is ordinary text too: a learner keyed ``8`` would block every "lớp 8",
a family ``35`` every "35%", a family ``F-1`` a physics node titled "Lực F-1", a user ``student``
every sentence about students. Such keys are refused where they are written (the database's
``learning.is_unambiguous_key`` check, migration 0013, which repeats this rule) and a request that
names one is INVALID_ARGUMENT. The demo keys follow the pattern ``<kind>-<school>-<serial>``
(``L-2041-1``, ``F-2041-1``, ``U-2041-P1``); UUIDs and prefixed random ids fit as well.

The check also keeps a NUL or a control character a precise error rather than a database failure,
and a comma can never bind two learners (the row-level security setting is a comma-separated list).
"""

from __future__ import annotations

import re
from typing import Final

import grpc

from nemo_context.errors import service_error
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason

MIN_KEY_CHARS: Final = 8
MAX_KEY_CHARS: Final = 128

_KEY = re.compile(
    rf"(?=[^\d]*\d)(?=[^A-Za-z]*[A-Za-z])[A-Za-z0-9][A-Za-z0-9._:-]{{{MIN_KEY_CHARS - 1},"
    rf"{MAX_KEY_CHARS - 1}}}"
)
KEY_RULE: Final = (
    f"{MIN_KEY_CHARS} to {MAX_KEY_CHARS} letters, digits or . _ : - (starting with a letter or "
    "digit, with at least one letter and one digit)"
)


def is_key(value: str) -> bool:
    """Whether ``value`` has the format of a learner, family or user key."""
    # fullmatch: ``$`` would also accept a trailing newline.
    return _KEY.fullmatch(value) is not None


def check_learner_id(learner_id: str) -> None:
    """INVALID_ARGUMENT / ``INVALID_LEARNER_ID`` unless ``learner_id`` is a key."""
    if not is_key(learner_id):
        raise service_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            ErrorReason.INVALID_LEARNER_ID,
            f"learner_id must be {KEY_RULE}",
        )
