"""Learner ids in requests: anything but a key is INVALID_ARGUMENT with a reason."""

from __future__ import annotations

import uuid

import grpc
import pytest

from nemo_context.ids import check_learner_id
from nemo_core.errors import ServiceError


@pytest.mark.parametrize(
    "key", ["L-2041-1", "U-2041-P1", "F-2041-10", str(uuid.uuid4()), "lrn_01J9Z3K2M8"]
)
def test_keys_are_accepted(key: str) -> None:
    check_learner_id(key)


@pytest.mark.parametrize(
    "plain",
    ["8", "35", "F-1", "L-1", "student", "12345678", "abcdefgh", "L-2041-1\n", "L 2041 1", ""],
)
def test_short_or_plain_values_are_refused(plain: str) -> None:
    with pytest.raises(ServiceError) as raised:
        check_learner_id(plain)
    assert (raised.value.code, raised.value.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_LEARNER_ID",
    )
