"""The key format: keys the identifier gate can match without ambiguity, and nothing shorter."""

from __future__ import annotations

import uuid

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_context.ids import check_learner_id, is_key
from nemo_core.errors import ServiceError


@pytest.mark.parametrize(
    "key", ["L-2041-1", "U-2041-P1", "F-2041-10", str(uuid.uuid4()), "lrn_01J9Z3K2M8"]
)
def test_keys_with_letters_digits_and_length_are_keys(key: str) -> None:
    assert is_key(key)
    check_learner_id(key)


@pytest.mark.parametrize(
    "plain",
    ["8", "35", "F-1", "L-1", "student", "12345678", "abcdefgh", "L-2041-1\n", "L 2041 1", ""],
)
def test_short_or_plain_values_are_refused(plain: str) -> None:
    assert not is_key(plain)
    with pytest.raises(ServiceError) as raised:
        check_learner_id(plain)
    assert (raised.value.code, raised.value.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_LEARNER_ID",
    )


@given(st.text(alphabet="0123456789", min_size=1, max_size=40))
def test_numbers_are_never_keys(number: str) -> None:
    assert not is_key(number)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=40))
def test_words_are_never_keys(word: str) -> None:
    assert not is_key(word)
