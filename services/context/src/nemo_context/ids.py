"""Learner ids in requests: the key format of ``nemo_core.identifiers``, as a precise error.

Keys are read for binding and authorization but never leave the service: the identifier gate
looks for the keys of the learner (and of the people linked to it) in every string it returns,
however they are spelled. It can do that without false alarms only when a key cannot also be
ordinary text, which is what the format guarantees; a request that names anything else is
INVALID_ARGUMENT. The check also keeps a NUL or a control character a precise error rather than
a database failure, and a comma can never bind two learners (the row-level security setting is
a comma-separated list).
"""

from __future__ import annotations

import grpc

from nemo_context.errors import service_error
from nemo_core.identifiers import KEY_RULE, is_key
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason


def check_learner_id(learner_id: str) -> None:
    """INVALID_ARGUMENT / ``INVALID_LEARNER_ID`` unless ``learner_id`` is a key."""
    if not is_key(learner_id):
        raise service_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            ErrorReason.INVALID_LEARNER_ID,
            f"learner_id must be {KEY_RULE}",
        )
